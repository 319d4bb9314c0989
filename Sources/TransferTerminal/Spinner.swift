import Dispatch
import FoundationEssentials
import Transfer

/// A spinner bound to a task's state, as seed 002's
/// UIActivityIndicatorView+AFNetworking: it spins while the task runs and
/// stops when the task is suspended or completes; completion also ends the
/// binding, and binding another task drops the previous one.
public final class Spinner: TerminalElement {
    struct Display: Sendable {
        var title: String
        var spinning = false
        var since: TimeInterval = 0
    }

    /// The frames a spinner cycles through.
    public static let asciiFrames = ["|", "/", "-", "\\"]
    /// Frames of a Braille spinner, for terminals that draw Unicode.
    public static let brailleFrames = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]

    private let state: BindingState<Display>
    private let clock: DisplayClock
    /// The frames drawn in turn.
    public let frames: [String]
    /// Seconds per frame.
    public let frameDuration: TimeInterval
    /// What a stopped spinner shows in place of a frame (blank: hidden when stopped).
    public let stoppedSymbol: String

    /// A spinner showing `title`, turning through `frames` every
    /// `frameDuration` seconds, and `stoppedSymbol` once stopped.
    public init(
        title: String = "", frames: [String] = Spinner.asciiFrames, frameDuration: TimeInterval = 0.1,
        stoppedSymbol: String = " ", clock: DisplayClock = .system
    ) {
        self.state = BindingState(Display(title: title))
        self.clock = clock
        self.frames = frames.isEmpty ? Spinner.asciiFrames : frames
        self.frameDuration = frameDuration > 0 ? frameDuration : 0.1
        self.stoppedSymbol = stoppedSymbol
    }

    /// The text shown after the spinner.
    public var title: String {
        get { state.read { $0.title } }
        set { state.set { $0.title = newValue } }
    }

    /// Whether the spinner is turning.
    public var isSpinning: Bool { state.read { $0.spinning } }

    /// Whether the spinner is bound to a task.
    public var isBound: Bool { state.isBound }

    public var isAnimating: Bool { isSpinning }

    /// Spins while `task` runs (`setAnimatingWithStateOfTask:`). A task that
    /// already completed stops the spinner and is not observed.
    ///
    /// - Parameter queue: Where task events are received (a private serial queue by default).
    public func bind(to task: any ObservableTransfer, queue: DispatchQueue? = nil) {
        let queue = queue ?? defaultBindingQueue
        let taskState = task.state
        let now = clock.now()
        let generation = state.rebind(bound: taskState != .completed) { display in
            Self.apply(taskState, to: &display, now: now)
        }
        guard taskState != .completed else { return }
        let token = task.observeState(on: queue) { [weak self] taskState in
            guard let self else { return }
            let now = self.clock.now()
            if taskState == .completed {
                self.state.detach(generation: generation) { Self.apply(.completed, to: &$0, now: now) }
            } else {
                self.state.update(generation: generation) { Self.apply(taskState, to: &$0, now: now) }
            }
        }
        state.attach([token], generation: generation)
        // Completed between the first check and the observation (see ProgressBar).
        if task.state == .completed {
            state.detach(generation: generation) { Self.apply(.completed, to: &$0, now: now) }
        }
    }

    /// Spins while `monitor` reports activity: the terminal's network activity
    /// indicator (AFNetworkActivityIndicatorManager drives the status bar's).
    /// The binding lasts until ``unbind()`` or another `bind`.
    public func bind(to monitor: ActivityMonitor) {
        let active = monitor.isActive
        let now = clock.now()
        let generation = state.rebind(bound: true) { display in
            Self.apply(active ? .running : .suspended, to: &display, now: now)
        }
        let token = monitor.addChangeHandler { [weak self] active in
            guard let self else { return }
            let now = self.clock.now()
            self.state.update(generation: generation) { Self.apply(active ? .running : .suspended, to: &$0, now: now) }
        }
        state.attach([token], generation: generation)
    }

    /// Stops following the task (and stops spinning, as a nil task does in the seed).
    public func unbind() {
        state.detach(generation: nil) { $0.spinning = false }
    }

    /// Starts or stops by hand.
    public func setSpinning(_ spinning: Bool) {
        let now = clock.now()
        state.set { display in
            if spinning, !display.spinning { display.since = now }
            display.spinning = spinning
        }
    }

    public func setUpdateHandler(_ handler: (@Sendable () -> Void)?) { state.setUpdateHandler(handler) }

    /// The symbol shown now: a frame chosen by the time spent spinning, or ``stoppedSymbol``.
    public var currentSymbol: String {
        let now = clock.now()
        let display = state.read { $0 }
        guard display.spinning else { return stoppedSymbol }
        let index = Int(max(0, now - display.since) / frameDuration) % frames.count
        return frames[index]
    }

    public func render(width: Int) -> String {
        let title = state.read { $0.title }
        return TerminalFormat.fit(title.isEmpty ? currentSymbol : currentSymbol + " " + title, width: width)
    }

    private static func apply(_ taskState: TaskState, to display: inout Display, now: TimeInterval) {
        let spinning = taskState == .running
        if spinning, !display.spinning { display.since = now }
        display.spinning = spinning
    }
}
