import Dispatch
import FoundationEssentials
import Transfer

/// A progress bar bound to a task's upload or download progress, as
/// UIProgressView+AFNetworking binds a progress view (seed 003).
///
/// With a known total it shows `label [=====>    ]  42%  4.2 MiB/10.0 MiB  1.2 MiB/s  ETA 0:05`;
/// with an unknown total, bytes and rate only: `label  4.2 MiB  1.2 MiB/s`.
/// When the task completes the bar shows the final progress and detaches
/// itself; ``bind(to:direction:animated:queue:)`` again drops the old task.
///
/// ```swift
/// let bar = ProgressBar(label: "file.iso")
/// bar.bind(to: task, direction: .download, animated: true)
/// display.add(bar)
/// ```
public final class ProgressBar: TerminalElement {
    struct Display: Sendable {
        var label: String
        var progress: TransferProgress?
        var animated = false
        /// The fraction the bar eases from, towards `progress`'s, since `start`.
        var fromFraction = 0.0
        var start: TimeInterval = -.infinity
        var completed = false
    }

    private let state: BindingState<Display>
    private let clock: DisplayClock
    /// How long an animated change takes to reach its value.
    public let animationDuration: TimeInterval

    /// Creates an unbound bar.
    ///
    /// - Parameters:
    ///   - label: Text in front of the bar (e.g. the file name).
    ///   - animationDuration: How long animated changes ease, in seconds.
    ///   - clock: The time source for rates of easing (the system clock by default).
    public init(label: String = "", animationDuration: TimeInterval = 0.25, clock: DisplayClock = .system) {
        self.state = BindingState(Display(label: label))
        self.clock = clock
        self.animationDuration = max(0, animationDuration)
    }

    /// The text shown before the bar.
    public var label: String {
        get { state.read { $0.label } }
        set { state.set { $0.label = newValue } }
    }

    /// The last progress the bar received (nil before any).
    public var progress: TransferProgress? { state.read { $0.progress } }

    /// Whether the bar follows a task right now.
    public var isBound: Bool { state.isBound }

    /// Whether the bar's task was seen completing (the bar then shows its final value).
    public var isCompleted: Bool { state.read { $0.completed } }

    /// Binds the bar to one direction of `task`'s progress, dropping any
    /// previous binding. A task that already completed is not observed: the
    /// bar shows its final progress once.
    ///
    /// - Parameters:
    ///   - task: The task to follow.
    ///   - direction: `.upload` (bytes sent) or `.download` (bytes received).
    ///   - animated: Whether changes ease over ``animationDuration``.
    ///   - queue: Where the task's events are received (a private serial queue by default).
    public func bind(
        to task: any ObservableTransfer, direction: ProgressDirection, animated: Bool = false,
        queue: DispatchQueue? = nil
    ) {
        let queue = queue ?? defaultBindingQueue
        let completed = task.state == .completed
        let initial = task.progress(direction)
        let now = clock.now()
        let generation = state.rebind(bound: !completed) { display in
            display.animated = animated
            display.completed = completed
            display.progress = initial
            display.fromFraction = initial.fractionCompleted ?? 0
            display.start = now
        }
        guard !completed else { return }
        let progressToken = task.observeProgress(direction, on: queue) { [weak self] progress in
            self?.receive(progress, generation: generation)
        }
        let finish: @Sendable () -> Void = { [weak self, weak task] in
            // The last progress report and the completion come through two
            // observations; read the final counts so the bar ends exact.
            let final = task?.progress(direction)
            self?.state.detach(generation: generation) { display in
                if let final { display.progress = final }
                display.completed = true
            }
        }
        let stateToken = task.observeState(on: queue) { taskState in
            if taskState == .completed { finish() }
        }
        state.attach([progressToken, stateToken], generation: generation)
        // Completed between the first check and the observation: a finished
        // task takes no observers, so no .completed would ever arrive.
        if task.state == .completed { finish() }
    }

    /// Stops following the task early; the bar keeps showing its last value.
    public func unbind() {
        state.detach(generation: nil)
    }

    /// Sets the progress by hand (UIProgressView's `setProgress(_:animated:)`).
    public func setProgress(_ progress: TransferProgress, animated: Bool = false) {
        let now = clock.now()
        state.set { display in
            Self.apply(progress, to: &display, animated: animated, now: now, duration: animationDuration)
        }
    }

    private func receive(_ progress: TransferProgress, generation: Int) {
        let now = clock.now()
        let duration = animationDuration
        state.update(generation: generation) { display in
            Self.apply(progress, to: &display, animated: display.animated, now: now, duration: duration)
        }
    }

    private static func apply(
        _ progress: TransferProgress, to display: inout Display, animated: Bool,
        now: TimeInterval, duration: TimeInterval
    ) {
        let current = shownFraction(display, now: now, duration: duration)
        let target = progress.fractionCompleted ?? 0
        display.progress = progress
        // Ease forwards only; a drop (a restarted transfer) is shown at once.
        if animated, duration > 0, target > current {
            display.fromFraction = current
            display.start = now
        } else {
            display.fromFraction = target
            display.start = -.infinity
        }
    }

    private static func shownFraction(_ display: Display, now: TimeInterval, duration: TimeInterval) -> Double {
        let target = display.progress?.fractionCompleted ?? 0
        // A completed task shows its final value at once: the last frame of a
        // display is often drawn right after completion, mid-ease.
        guard !display.completed, duration > 0, now < display.start + duration else { return target }
        let t = max(0, (now - display.start) / duration)
        // Ease-out: fast at first, settling on the value.
        let eased = 1 - (1 - t) * (1 - t)
        return display.fromFraction + (target - display.fromFraction) * eased
    }

    /// The fraction the bar draws now (between the old and new value while easing).
    public var displayedFraction: Double? {
        let now = clock.now()
        return state.read { display in
            display.progress?.fractionCompleted == nil
                ? nil : Self.shownFraction(display, now: now, duration: animationDuration)
        }
    }

    public var isAnimating: Bool {
        let now = clock.now()
        return state.read { display in
            !display.completed && display.start.isFinite && now < display.start + animationDuration
                && display.fromFraction != (display.progress?.fractionCompleted ?? 0)
        }
    }

    public func setUpdateHandler(_ handler: (@Sendable () -> Void)?) { state.setUpdateHandler(handler) }

    public func render(width: Int) -> String {
        let now = clock.now()
        let duration = animationDuration
        let display = state.read { $0 }
        return Self.render(display, width: width, now: now, duration: duration)
    }

    static func render(_ display: Display, width: Int, now: TimeInterval, duration: TimeInterval) -> String {
        let head = display.label.isEmpty ? "" : display.label + " "
        guard let progress = display.progress else {
            return TerminalFormat.fit(head + "waiting", width: width)
        }
        var stats: [String] = []
        let done = TerminalFormat.bytes(progress.completedUnitCount)
        let rate = TerminalFormat.rate(progress.bytesPerSecond)
        guard let fraction = progress.fractionCompleted else {
            // Unknown total: no percentage, no bar, just what is known.
            stats = [done, rate]
            return TerminalFormat.fit(head + " " + stats.joined(separator: "  "), width: width)
        }
        stats.append(TerminalFormat.percent(fraction).leftPadded(to: 4))
        stats.append("\(done)/\(TerminalFormat.bytes(progress.totalUnitCount))")
        stats.append(rate)
        if display.completed || fraction >= 1 {
            stats.append("in " + TerminalFormat.duration(progress.elapsed))
        } else {
            stats.append("ETA " + TerminalFormat.duration(progress.estimatedTimeRemaining))
        }
        let tail = "  " + stats.joined(separator: "  ")
        let barWidth = width - TerminalFormat.columns(head) - tail.count - 2
        guard barWidth >= 5 else { return TerminalFormat.fit(head + tail.dropFirst(2), width: width) }
        let shown = shownFraction(display, now: now, duration: duration)
        return TerminalFormat.fit(head + "[" + bar(shown, width: barWidth) + "]" + tail, width: width)
    }

    /// `=====>    ` for `fraction` of `width` cells; all `=` when full.
    static func bar(_ fraction: Double, width: Int) -> String {
        let filled = Int((min(1, max(0, fraction)) * Double(width)).rounded(.down))
        if filled >= width { return String(repeating: "=", count: width) }
        if filled == 0 { return String(repeating: " ", count: width) }
        return String(repeating: "=", count: filled - 1) + ">" + String(repeating: " ", count: width - filled)
    }
}

extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
