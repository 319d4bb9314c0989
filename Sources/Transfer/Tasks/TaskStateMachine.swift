/// The life of one task as a value: events in, actions out.
///
/// Every change of a task's lifecycle goes through one of the `mutating`
/// functions below, under the task's lock; the caller then performs the
/// returned action outside the lock (engine commands, notifications,
/// completion). The machine itself touches no engine, queue or socket, so it
/// is tested event by event (TaskStateMachineTests).
///
/// The state carries its data: the engine id exists only while a transfer is
/// in the engine, what the user asked for (run, suspend, cancel) travels with
/// it, and a task that became a download names its successor. A request made
/// before the engine id is known is kept with the submitting state (suspend
/// and cancel as its ``Intent``, the rest as ``EngineCommands``) and handed
/// back by ``submitted(id:)``, so it cannot be lost.
///
/// `Successor` is the task that takes over after `becomeDownload`
/// (``DownloadTask`` in the library, any type in tests).
struct TaskStateMachine<Successor: Sendable>: Sendable {
    /// What the user last asked for while a transfer is (or is about to be) in the engine.
    enum Intent: Sendable, Equatable {
        case run
        case suspend
        case cancel(keepPartial: Bool)

        var visible: TaskState {
            switch self {
            case .run: return .running
            case .suspend: return .suspended
            case .cancel: return .canceling
            }
        }
    }

    enum State: Sendable {
        /// Created, never resumed.
        case initialized
        /// Resumed; a spec is being handed to the engine and its id is not
        /// known yet. The engine may already run the transfer: commands its
        /// events asked for meanwhile are kept here until the id arrives.
        case submitting(Intent, kept: EngineCommands)
        /// A transfer with this id is in the engine.
        case inEngine(id: UInt64, Intent)
        /// The engine finished a hop; the delegate queue decides whether a
        /// redirect or a 401 answer starts another one.
        case betweenHops(Intent)
        /// No transfer is in the engine: an interceptor adapts the next
        /// attempt's request, or decides on a failed attempt, or its retry
        /// delay runs (``RequestInterceptor``). Never holds `.cancel`: a
        /// cancel here completes the task at once.
        case awaitingAttempt(Intent)
        /// The result is known and being produced (file moved, body kept); the
        /// visible state stays what it was until completion.
        case finishing(TaskState)
        /// The transfer continues as a download task: control goes there.
        case movedToDownload(Successor)
        /// Completion delivered (exactly once).
        case completed(TransferError?)
    }

    private(set) var state: State
    /// The async/await waiter, fired once with the completion.
    private var waiter: (any TaskWaiter)?

    /// Commands for a transfer that need its engine id: the set
    /// ``submitted(id:)`` hands back, in the order the submitter sends them.
    struct EngineCommands: OptionSet, Sendable {
        let rawValue: UInt8
        /// The response hook or delegate allowed the response: go on.
        static var allowResponse: EngineCommands { EngineCommands(rawValue: 1 << 0) }
        /// The response hook or delegate answered `becomeDownload`: hand the
        /// transfer to a download task (which needs the id).
        static var becomeDownload: EngineCommands { EngineCommands(rawValue: 1 << 1) }
        /// The body's consumer drained its buffer: deliver again.
        static var consumerReady: EngineCommands { EngineCommands(rawValue: 1 << 2) }
        /// The user suspended the task: pause the transfer.
        static var pause: EngineCommands { EngineCommands(rawValue: 1 << 3) }
        /// The user cancelled the task: cancel the transfer (with
        /// ``keepPartial``: keep what a download has written).
        static var cancel: EngineCommands { EngineCommands(rawValue: 1 << 4) }
        static var keepPartial: EngineCommands { EngineCommands(rawValue: 1 << 5) }
        /// The user resumed the task after its spec went to the engine
        /// paused (``handOver()``): unpause the transfer.
        static var resume: EngineCommands { EngineCommands(rawValue: 1 << 6) }
        /// Kept while submitting, never handed back: the spec asked the
        /// engine to start the transfer paused.
        static var startedPaused: EngineCommands { EngineCommands(rawValue: 1 << 7) }
    }

    init() {
        state = .initialized
    }

    /// A task that takes over a transfer already in the engine (become-download).
    init(adoptingEngineTransfer id: UInt64) {
        state = .inEngine(id: id, .run)
    }

    /// The adopted transfer is paused in the engine: the user had suspended
    /// the task it came from while the hook decided. Only right after the
    /// adoption, while the task is still running; anything else is left alone.
    mutating func adoptedTransferIsPaused() {
        guard case .inEngine(let id, .run) = state else { return }
        state = .inEngine(id: id, .suspend)
    }

    // MARK: - Queries

    /// The state as the public API shows it (`NSURLSessionTaskState`).
    var visibleState: TaskState {
        switch state {
        case .initialized: return .suspended
        case .submitting(let intent, _), .inEngine(_, let intent), .betweenHops(let intent), .awaitingAttempt(let intent):
            return intent.visible
        case .finishing(let visible): return visible
        case .movedToDownload: return .running
        case .completed: return .completed
        }
    }

    /// The id of the transfer in the engine, if one is there.
    var engineID: UInt64? {
        if case .inEngine(let id, _) = state { return id }
        return nil
    }

    var isCompleted: Bool {
        if case .completed = state { return true }
        return false
    }

    /// Between two attempts: an adapter, retrier or retry delay decides
    /// what comes next. A cancel ends this state (``cancel(keepPartial:)``).
    var isAwaitingAttempt: Bool {
        if case .awaitingAttempt = state { return true }
        return false
    }

    /// The completion error, once completed.
    var completionError: TransferError?? {
        if case .completed(let error) = state { return .some(error) }
        return .none
    }

    var successor: Successor? {
        if case .movedToDownload(let successor) = state { return successor }
        return nil
    }

    // MARK: - Control from the user (any thread)

    enum ControlAction {
        case none
        /// Tell observers (state change + notification); nothing for the engine.
        case notify(TaskState)
        /// First resume: notify `.running`, then submit the first hop.
        case start
        case resumeEngine(UInt64)
        case pauseEngine(UInt64)
        case cancelEngine(UInt64, keepPartial: Bool)
        /// Cancelled before start: notify `.canceling`, then complete as cancelled without the engine.
        case cancelLocally
        /// The task became a download: the call goes to the successor.
        case forward(Successor)
        /// Cancelled between attempts: notify `.canceling`, stop the pending
        /// interceptor work, complete as cancelled without the engine.
        case cancelBetweenAttempts
    }

    mutating func resume() -> ControlAction {
        switch state {
        case .initialized:
            state = .submitting(.run, kept: [])
            return .start
        case .submitting(.suspend, let kept):
            state = .submitting(.run, kept: kept)
            return .notify(.running)
        case .inEngine(let id, .suspend):
            state = .inEngine(id: id, .run)
            return .resumeEngine(id)
        case .betweenHops(.suspend):
            state = .betweenHops(.run)
            return .notify(.running)
        case .awaitingAttempt(.suspend):
            state = .awaitingAttempt(.run)
            return .notify(.running)
        case .movedToDownload(let successor):
            return .forward(successor)
        case .submitting, .inEngine, .betweenHops, .awaitingAttempt, .finishing, .completed:
            return .none
        }
    }

    mutating func suspend() -> ControlAction {
        switch state {
        case .submitting(.run, let kept):
            // The id is not known yet: the pause is applied when it is.
            state = .submitting(.suspend, kept: kept)
            return .notify(.suspended)
        case .inEngine(let id, .run):
            state = .inEngine(id: id, .suspend)
            return .pauseEngine(id)
        case .betweenHops(.run):
            state = .betweenHops(.suspend)
            return .notify(.suspended)
        case .awaitingAttempt(.run):
            // The delay runs on; the next attempt starts paused.
            state = .awaitingAttempt(.suspend)
            return .notify(.suspended)
        case .movedToDownload(let successor):
            return .forward(successor)
        case .initialized, .submitting, .inEngine, .betweenHops, .awaitingAttempt, .finishing, .completed:
            return .none
        }
    }

    mutating func cancel(keepPartial: Bool) -> ControlAction {
        switch state {
        case .initialized:
            state = .finishing(.canceling)
            return .cancelLocally
        case .submitting(.run, let kept), .submitting(.suspend, let kept):
            state = .submitting(.cancel(keepPartial: keepPartial), kept: kept)
            return .notify(.canceling)
        case .inEngine(let id, .run), .inEngine(let id, .suspend):
            state = .inEngine(id: id, .cancel(keepPartial: keepPartial))
            return .cancelEngine(id, keepPartial: keepPartial)
        case .betweenHops(.run), .betweenHops(.suspend):
            state = .betweenHops(.cancel(keepPartial: keepPartial))
            return .notify(.canceling)
        case .awaitingAttempt:
            // Nothing is in the engine: a retry delay or an interceptor must
            // not hold a cancelled task back.
            state = .finishing(.canceling)
            return .cancelBetweenAttempts
        case .movedToDownload(let successor):
            return .forward(successor)
        case .submitting(.cancel, _), .inEngine(_, .cancel), .betweenHops(.cancel), .finishing, .completed:
            return .none
        }
    }

    // MARK: - Submitting

    /// The engine accepted the spec and gave it `id`: what to send it now
    /// (a suspend or cancel of the user, and what the transfer's events asked
    /// for while the id was not known). Empty when the transfer finished (or
    /// the task completed) before the submitter got here: the id is stale.
    mutating func submitted(id: UInt64) -> EngineCommands {
        guard case .submitting(let intent, var commands) = state else { return [] }
        state = .inEngine(id: id, intent)
        let startedPaused = commands.remove(.startedPaused) != nil
        switch intent {
        case .run: if startedPaused { commands.insert(.resume) }
        case .suspend: if !startedPaused { commands.insert(.pause) }
        case .cancel(let keep): commands.formUnion(keep ? [.cancel, .keepPartial] : .cancel)
        }
        return commands
    }

    /// The spec is about to go to the engine: true when the transfer is to
    /// start paused (`CT_FLAG_START_PAUSED`), because the user suspended
    /// the task before this hop was handed over. A pause sent with the id
    /// would come too late for a transfer the loop finishes first.
    /// Remembered, so that a resume before the id is known unpauses it.
    mutating func handOver() -> Bool {
        guard case .submitting(.suspend, var kept) = state else { return false }
        kept.insert(.startedPaused)
        state = .submitting(.suspend, kept: kept)
        return true
    }

    /// The body's consumer drained its buffer: the id to tell the engine, or
    /// nil. While submitting (the engine runs the transfer, the id is not
    /// recorded yet) the command is kept and handed back by
    /// ``submitted(id:)``; with no transfer in the engine there is nothing to
    /// wake.
    mutating func consumerReady() -> UInt64? { engineCommand(.consumerReady) }

    /// The response was allowed (hook, delegate or default): the id to tell
    /// the engine, or nil, kept while submitting as ``consumerReady()``.
    mutating func allowResponse() -> UInt64? { engineCommand(.allowResponse) }

    /// The response hook or delegate answered `becomeDownload`: the id of the
    /// transfer to hand over, or nil, kept while submitting as
    /// ``consumerReady()``.
    mutating func becomeDownloadRequested() -> UInt64? { engineCommand(.becomeDownload) }

    private mutating func engineCommand(_ command: EngineCommands) -> UInt64? {
        switch state {
        case .inEngine(let id, _):
            return id
        case .submitting(let intent, var kept):
            kept.insert(command)
            state = .submitting(intent, kept: kept)
            return nil
        default:
            return nil
        }
    }

    enum LocalFinishAction {
        case none
        /// Complete with this error without the engine.
        case finishLocally(TransferError)
    }

    /// Building or submitting the spec failed (bad request, engine stopping).
    mutating func submitFailed(_ error: TransferError) -> LocalFinishAction {
        guard case .submitting(let intent, _) = state else { return .none }
        state = .finishing(intent.visible)
        return .finishLocally(error)
    }

    enum ServedLocallyAction: Equatable {
        case none
        /// Complete with the cached response.
        case serve
        /// Cancelled while the cache was asked: complete as cancelled.
        case cancelled
    }

    /// The response cache answered the request being submitted: the task
    /// finishes without the engine.
    mutating func servedLocally() -> ServedLocallyAction {
        guard case .submitting(let intent, _) = state else { return .none }
        state = .finishing(intent.visible)
        if case .cancel = intent { return .cancelled }
        return .serve
    }

    /// The task cannot start at all (its session is invalidated).
    mutating func failBeforeStart(_ error: TransferError) -> LocalFinishAction {
        guard case .initialized = state else { return .none }
        state = .finishing(.running)
        return .finishLocally(error)
    }

    // MARK: - Engine events (delegate queue)

    enum FinishAction: Equatable {
        case none
        /// The hop ended: follow a redirect or answer a 401 if wanted, else complete.
        case considerFollowUp
        /// The hop ended after a cancel: complete with the outcome.
        case complete
    }

    /// The engine finished the current hop.
    mutating func engineFinished() -> FinishAction {
        switch state {
        case .inEngine(_, let intent), .submitting(let intent, _):
            // `.submitting`: the finish overtook the submitter (the id is stale when it arrives).
            if case .cancel = intent {
                state = .finishing(.canceling)
                return .complete
            }
            state = .betweenHops(intent)
            return .considerFollowUp
        case .initialized, .betweenHops, .awaitingAttempt, .finishing, .movedToDownload, .completed:
            return .none
        }
    }

    enum HopAction {
        case none
        /// Submit the next hop.
        case submit
        /// Cancelled while deciding: complete as cancelled.
        case finishLocally(TransferError)
    }

    /// A redirect or a 401 answer wants another hop.
    mutating func beginHop(cancelled: @autoclosure () -> TransferError) -> HopAction {
        switch state {
        case .betweenHops(.run):
            state = .submitting(.run, kept: [])
            return .submit
        case .betweenHops(.suspend):
            state = .submitting(.suspend, kept: [])
            return .submit
        case .betweenHops(.cancel):
            state = .finishing(.canceling)
            return .finishLocally(cancelled())
        case .initialized, .submitting, .inEngine, .awaitingAttempt, .finishing, .movedToDownload, .completed:
            return .none
        }
    }

    /// No further hop: the result is produced from the last outcome.
    mutating func endHops() {
        if case .betweenHops(let intent) = state { state = .finishing(intent.visible) }
    }

    enum BecomeDownloadAction {
        /// Hand the transfer `id` to the successor (suspended by the user, or not).
        case become(UInt64, suspended: Bool)
        /// Cancelled or finished meanwhile: the disposition is refused.
        case refuse
    }

    /// The response hook answered `.becomeDownload`.
    mutating func becomeDownload(_ successor: Successor) -> BecomeDownloadAction {
        switch state {
        case .inEngine(let id, .run):
            state = .movedToDownload(successor)
            return .become(id, suspended: false)
        case .inEngine(let id, .suspend):
            state = .movedToDownload(successor)
            return .become(id, suspended: true)
        case .initialized, .submitting, .inEngine, .betweenHops, .awaitingAttempt, .finishing, .movedToDownload,
            .completed:
            return .refuse
        }
    }

    // MARK: - Attempts (interceptors)

    /// An attempt waits for the interceptor: the first one before it is
    /// submitted (adapt), or a failed one after its hop ended (attempt failed
    /// → retry scheduled). False when the task is not there (a cancel came
    /// while the hop was judged: the caller completes as it would have).
    mutating func awaitAttempt() -> Bool {
        switch state {
        case .submitting(.run, _), .betweenHops(.run):
            state = .awaitingAttempt(.run)
            return true
        case .submitting(.suspend, _), .betweenHops(.suspend):
            state = .awaitingAttempt(.suspend)
            return true
        case .initialized, .submitting, .inEngine, .betweenHops, .awaitingAttempt, .finishing, .movedToDownload,
            .completed:
            return false
        }
    }

    /// The interceptor is done and the next attempt goes to the engine
    /// (resubmitted), paused if the user suspended the task meanwhile.
    /// False when the task was cancelled meanwhile (it completed already).
    mutating func attemptReady() -> Bool {
        guard case .awaitingAttempt(let intent) = state else { return false }
        state = .submitting(intent, kept: [])
        return true
    }

    /// No further attempt (not retried, or the adapter failed): the task
    /// completes. False when it was cancelled meanwhile.
    mutating func endAttempts() -> Bool {
        guard case .awaitingAttempt(let intent) = state else { return false }
        state = .finishing(intent.visible)
        return true
    }

    // MARK: - Completion

    enum CompleteAction {
        /// Already completed: do nothing (completion is delivered once).
        case none
        /// Deliver the completion, then fire this waiter (if any).
        case deliver(waiter: (any TaskWaiter)?)
    }

    mutating func complete(_ error: TransferError?) -> CompleteAction {
        if case .completed = state { return .none }
        state = .completed(error)
        defer { waiter = nil }
        return .deliver(waiter: waiter)
    }

    enum AttachAction {
        case none
        /// Already completed: fire the waiter now with this error.
        case fire(TransferError?)
    }

    mutating func attach(_ newWaiter: any TaskWaiter) -> AttachAction {
        if case .completed(let error) = state { return .fire(error) }
        waiter = newWaiter
        return .none
    }
}
