import Dispatch
import FoundationEssentials
import Synchronization

/// Runs work after a delay: the clock of ``ActivityMonitor`` (and of the
/// terminal renderer), injectable so tests can drive time by hand.
public protocol ActivityScheduler: Sendable {
    /// Runs `action` once, `delay` seconds from now, unless the returned token
    /// is cancelled first. Must not run `action` before returning.
    func schedule(after delay: TimeInterval, _ action: @escaping @Sendable () -> Void) -> ObservationToken
}

/// An ``ActivityScheduler`` on a dispatch queue (wall-clock delays).
public struct DispatchActivityScheduler: ActivityScheduler {
    /// Where scheduled actions run.
    public let queue: DispatchQueue

    /// A scheduler that runs its work on `queue`.
    public init(queue: DispatchQueue = DispatchQueue(label: "transfer.activity")) {
        self.queue = queue
    }

    public func schedule(after delay: TimeInterval, _ action: @escaping @Sendable () -> Void) -> ObservationToken {
        // Whoever claims the flag first wins: the timer runs the action, or
        // cancel() makes the timer a no-op.
        let pending = OnceFlag()
        queue.asyncAfter(deadline: .now() + max(0, delay)) {
            if pending.claim() { action() }
        }
        return ObservationToken { _ = pending.claim() }
    }
}

/// An ``ActivityScheduler`` whose time only moves when ``advance(by:)`` is
/// called: actions run on the advancing thread, in due order.
public final class ManualActivityScheduler: ActivityScheduler {
    private struct Entry {
        let id: Int
        let due: TimeInterval
        let action: @Sendable () -> Void
    }

    private struct State {
        var now: TimeInterval = 0
        var nextID = 0
        var entries: [Entry] = []
    }

    private let state = Protected(State())

    /// A scheduler that runs nothing until the test advances it.
    public init() {}

    /// Seconds advanced so far.
    public var now: TimeInterval { state.withLock { $0.now } }

    /// Actions scheduled and neither run nor cancelled.
    public var pendingCount: Int { state.withLock { $0.entries.count } }

    public func schedule(after delay: TimeInterval, _ action: @escaping @Sendable () -> Void) -> ObservationToken {
        let id = state.withLock { state in
            state.nextID += 1
            state.entries.append(Entry(id: state.nextID, due: state.now + max(0, delay), action: action))
            return state.nextID
        }
        return ObservationToken { [weak self] in
            self?.state.withLock { $0.entries.removeAll { $0.id == id } }
        }
    }

    /// Moves time forward by `interval`, running every action that falls due,
    /// including actions scheduled by those actions within the interval.
    public func advance(by interval: TimeInterval) {
        let target = state.withLock { $0.now + max(0, interval) }
        while true {
            let next: Entry? = state.withLock { state in
                let due = state.entries.enumerated().filter { $0.element.due <= target }
                guard let first = due.min(by: { ($0.element.due, $0.element.id) < ($1.element.due, $1.element.id) })
                else { return nil }
                state.entries.remove(at: first.offset)
                state.now = max(state.now, first.element.due)
                return first.element
            }
            guard let next else { break }
            next.action()
        }
        state.withLock { $0.now = max($0.now, target) }
    }
}

/// Tells whether network activity is going on, without flicker: the
/// behaviour of AFNetworkActivityIndicatorManager as a library type.
///
/// The monitor counts running tasks from the task events (a resumed task
/// adds one, a suspended or completed task removes it; each task counts once,
/// the count never goes below zero) plus a manual count. By default it counts
/// every task of the process; TransferFoundation's
/// `init(activationDelay:completionDelay:scheduler:observing:)` and
/// `observe(_:where:)` count the task notifications of a NotificationCenter
/// instead (`Notification.Name.transferTaskDidResume` and its siblings). It reports active only
/// once activity has lasted ``activationDelay`` (1 s by default), and inactive
/// only once it has been idle for ``completionDelay`` (0.17 s), so a burst of
/// short requests shows as one continuous activity and a quick one not at all.
///
/// ```swift
/// let monitor = ActivityMonitor()
/// monitor.onChange = { active in spinner.isHidden = !active }
/// ```
///
/// - Note: A task is held (strongly) while it is counted, so its identity
///   cannot be reused by another object before it is suspended or completed.
public final class ActivityMonitor: Sendable {
    /// A monitor of every task of the process (AF's `sharedManager`, which
    /// listens to the default notification center), with the default delays.
    public static let shared = ActivityMonitor()

    /// Seconds of activity before the indicator shows (AFNetworking's 1.0).
    public static let defaultActivationDelay: TimeInterval = 1.0
    /// Seconds after the last task before the indicator hides (AFNetworking's 0.17).
    public static let defaultCompletionDelay: TimeInterval = 0.17

    private enum Phase {
        case notActive
        case delayingStart
        case active
        case delayingEnd

        var isVisible: Bool { self == .active || self == .delayingEnd }
    }

    private struct State {
        var running: [ObjectIdentifier: any ObservableTransfer] = [:]
        var manualCount = 0
        var phase = Phase.notActive
        var enabled = true
        var activationDelay: TimeInterval
        var completionDelay: TimeInterval
        var onChange: (@Sendable (Bool) -> Void)?
        var changeHandlers: [Int: @Sendable (Bool) -> Void] = [:]
        var nextHandlerID = 0

        /// `onChange` and every added handler, in the order they were set.
        var allHandlers: [@Sendable (Bool) -> Void] {
            (onChange.map { [$0] } ?? []) + changeHandlers.sorted { $0.key < $1.key }.map(\.value)
        }
        /// Bumped whenever a pending timer becomes meaningless.
        var generation = 0
        var timer: ObservationToken?

        var total: Int { running.count + manualCount }
    }

    /// What the caller must do once the lock is released.
    private struct Effects {
        var schedule: (delay: TimeInterval, generation: Int)?
        var cancel: ObservationToken?
        var notify: (handlers: [@Sendable (Bool) -> Void], active: Bool)?
    }

    private let scheduler: any ActivityScheduler
    private let state: Protected<State>
    private let observations = Protected<[ObservationToken]>([])

    /// Creates a monitor.
    ///
    /// - Parameters:
    ///   - activationDelay: How long activity must last before ``isActive`` turns true.
    ///   - completionDelay: How long idleness must last before ``isActive`` turns false.
    ///   - scheduler: The clock for both delays; a dispatch queue by default.
    ///
    /// The monitor counts every task of the process right away (what
    /// AFNetworking's manager hears on the default notification center).
    public convenience init(
        activationDelay: TimeInterval = ActivityMonitor.defaultActivationDelay,
        completionDelay: TimeInterval = ActivityMonitor.defaultCompletionDelay,
        scheduler: any ActivityScheduler = DispatchActivityScheduler()
    ) {
        self.init(activationDelay: activationDelay, completionDelay: completionDelay, scheduler: scheduler,
                  countingProcessTasks: true)
    }

    /// A monitor that counts the process's tasks, or nothing until a source is added.
    package init(
        activationDelay: TimeInterval, completionDelay: TimeInterval, scheduler: any ActivityScheduler,
        countingProcessTasks: Bool
    ) {
        self.scheduler = scheduler
        self.state = Protected(State(activationDelay: activationDelay, completionDelay: completionDelay))
        if countingProcessTasks { countProcessTasks() }
    }

    deinit {
        for token in observations.withLock({ $0 }) { token.cancel() }
        state.withLock { $0.timer }?.cancel()
    }

    // MARK: Reading and configuring

    /// Whether activity is being reported (after the delays).
    public var isActive: Bool { state.withLock { $0.phase.isVisible } }

    /// Running tasks plus the manual count.
    public var activityCount: Int { state.withLock { $0.total } }

    /// Seconds of activity before the indicator shows (`activationDelay` in AFNetworking).
    public var activationDelay: TimeInterval {
        get { state.withLock { $0.activationDelay } }
        set { state.withLock { $0.activationDelay = max(0, newValue) } }
    }

    /// Seconds after the last task before the indicator hides (`completionDelay` in AFNetworking).
    public var completionDelay: TimeInterval {
        get { state.withLock { $0.completionDelay } }
        set { state.withLock { $0.completionDelay = max(0, newValue) } }
    }

    /// Called with the new value each time ``isActive`` changes.
    ///
    /// - Note: Runs on the scheduler's thread (the delays end there), or on the
    ///   thread that sets ``isEnabled`` to false while active; never under a lock.
    public var onChange: (@Sendable (Bool) -> Void)? {
        get { state.withLock { $0.onChange } }
        set { state.withLock { $0.onChange = newValue } }
    }

    /// Adds a handler called like ``onChange`` with each new value of
    /// ``isActive`` (after `onChange`), until the token is cancelled. Lets
    /// several displays follow one monitor.
    public func addChangeHandler(_ handler: @escaping @Sendable (Bool) -> Void) -> ObservationToken {
        let id = state.withLock { state in
            state.nextHandlerID += 1
            state.changeHandlers[state.nextHandlerID] = handler
            return state.nextHandlerID
        }
        return ObservationToken { [weak self] in
            self?.state.withLock { _ = $0.changeHandlers.removeValue(forKey: id) }
        }
    }

    /// When false, the monitor keeps counting but reports inactive (AF's `enabled`).
    /// Turning it back on while tasks run starts the activation delay again.
    public var isEnabled: Bool {
        get { state.withLock { $0.enabled } }
        set {
            let effects = state.withLock { state -> Effects in
                guard state.enabled != newValue else { return Effects() }
                state.enabled = newValue
                if newValue { return Self.update(&state) }
                var effects = Effects()
                let wasVisible = state.phase.isVisible
                state.phase = .notActive
                state.generation += 1
                effects.cancel = state.timer
                state.timer = nil
                if wasVisible { effects.notify = (state.allHandlers, false) }
                return effects
            }
            perform(effects)
        }
    }

    // MARK: Sources

    /// Counts every task of the process, as an observer of the default
    /// notification center did: while counted, requests run as tasks.
    private func countProcessTasks() {
        TransferEvents.beginObserving()
        let listening = TransferEvents.listen { [weak self] event, object in
            guard let task = object as? any ObservableTransfer else { return }
            if event == .taskDidResume { self?.taskDidStart(task) } else { self?.taskDidStop(task) }
        }
        addSource(ObservationToken {
            listening.cancel()
            TransferEvents.endObserving()
        })
    }

    /// Adds a source of counts: ``stopObserving()`` and deinit cancel `token`.
    package func addSource(_ token: ObservationToken) {
        observations.withLock { $0.append(token) }
    }

    /// Stops counting from every source (the process's tasks, and each added
    /// with TransferFoundation's `observe(_:where:)`).
    public func stopObserving() {
        for token in observations.withLock({ tokens in
            defer { tokens = [] }
            return tokens
        }) { token.cancel() }
    }

    // MARK: Counting

    /// Counts `task` as running (no effect if it already is).
    public func taskDidStart(_ task: any ObservableTransfer) {
        change { state in state.running.updateValue(task, forKey: ObjectIdentifier(task)) == nil }
    }

    /// Stops counting `task` (no effect if it was not counted).
    public func taskDidStop(_ task: any ObservableTransfer) {
        change { state in state.running.removeValue(forKey: ObjectIdentifier(task)) != nil }
    }

    /// Adds one to the manual count (AF's `incrementActivityCount`).
    public func incrementActivityCount() {
        change { state in
            state.manualCount += 1
            return true
        }
    }

    /// Removes one from the manual count, never going below zero.
    public func decrementActivityCount() {
        change { state in
            guard state.manualCount > 0 else { return false }
            state.manualCount -= 1
            return true
        }
    }

    // MARK: The state machine

    private func change(_ body: (inout State) -> Bool) {
        let effects = state.withLock { state -> Effects in
            guard body(&state) else { return Effects() }
            return Self.update(&state)
        }
        perform(effects)
    }

    /// AF's updateCurrentStateForNetworkActivityChange: move the phase after a
    /// count change; visible changes only ever happen when a delay ends.
    private static func update(_ state: inout State) -> Effects {
        var effects = Effects()
        guard state.enabled else { return effects }
        if state.total > 0 {
            switch state.phase {
            case .notActive:
                state.phase = .delayingStart
                state.generation += 1
                effects.schedule = (state.activationDelay, state.generation)
            case .delayingEnd:
                // Activity came back before the indicator went off: keep it on.
                state.phase = .active
                state.generation += 1
                effects.cancel = state.timer
                state.timer = nil
            case .delayingStart, .active:
                break
            }
        } else {
            switch state.phase {
            case .delayingStart:
                // Finished before the activation delay: never shown.
                state.phase = .notActive
                state.generation += 1
                effects.cancel = state.timer
                state.timer = nil
            case .active:
                state.phase = .delayingEnd
                state.generation += 1
                effects.schedule = (state.completionDelay, state.generation)
            case .notActive, .delayingEnd:
                break
            }
        }
        return effects
    }

    private func perform(_ effects: Effects) {
        effects.cancel?.cancel()
        if let (delay, generation) = effects.schedule {
            // Scheduled outside the lock (a scheduler may take its own locks);
            // the generation tells a stale timer from the current one.
            let token = scheduler.schedule(after: delay) { [weak self] in self?.delayEnded(generation: generation) }
            let stale = state.withLock { state -> Bool in
                guard state.generation == generation else { return true }
                state.timer = token
                return false
            }
            if stale { token.cancel() }
        }
        if let (handlers, active) = effects.notify {
            for handler in handlers { handler(active) }
        }
    }

    private func delayEnded(generation: Int) {
        let effects = state.withLock { state -> Effects in
            guard state.generation == generation else { return Effects() }
            state.timer = nil
            let wasVisible = state.phase.isVisible
            switch state.phase {
            case .delayingStart:
                state.phase = state.total > 0 ? .active : .notActive
            case .delayingEnd:
                state.phase = state.total > 0 ? .active : .notActive
            case .notActive, .active:
                return Effects()
            }
            state.generation += 1
            var effects = Effects()
            if state.phase.isVisible != wasVisible {
                effects.notify = (state.allHandlers, state.phase.isVisible)
            }
            return effects
        }
        perform(effects)
    }
}
