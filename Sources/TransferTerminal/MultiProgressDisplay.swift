import Dispatch
import FoundationEssentials
import Synchronization
import Transfer

/// Draws a stack of elements (one line each) for parallel transfers and
/// redraws them in place without flicker.
///
/// On a terminal each frame is one `write`: the cursor goes back up over the
/// previous frame (`ESC[nA`), every line is cleared and rewritten
/// (`\r ESC[2K`), and anything below is erased (`ESC[J`). Frames are
/// throttled to ``frameInterval`` however often elements change, and keep
/// coming only while an element animates. When the output is not a terminal
/// no control character is ever written: nothing while running, and the
/// final lines once on ``finish()`` (or nothing, with `.silent`).
public final class MultiProgressDisplay: Sendable {
    /// What to write when the output is not a terminal.
    public enum PlainMode: Sendable {
        /// The final state of every element, one plain line each, on ``finish()``.
        case finalLines
        /// Nothing at all.
        case silent
    }

    private struct State {
        var elements: [any TerminalElement] = []
        var linesOnScreen = 0
        var lastFrame: TimeInterval = -.infinity
        var frameScheduled = false
        var finished = false
        var cursorHidden = false
    }

    private let output: any TerminalOutput
    private let scheduler: any ActivityScheduler
    private let clock: DisplayClock
    private let fixedWidth: Int?
    private let plainMode: PlainMode
    /// The shortest time between two frames.
    public let frameInterval: TimeInterval
    private let state = Protected(State())

    /// Creates a display.
    ///
    /// - Parameters:
    ///   - output: Where frames go; standard error by default.
    ///   - frameInterval: The shortest time between frames (1/15 s by default).
    ///   - width: Columns to draw; the terminal's width (or 80) by default.
    ///   - plainMode: What to write when `output` is not a terminal.
    ///   - scheduler: Times throttled and animation frames (a dispatch queue by default).
    ///   - clock: The time source matching `scheduler`.
    public init(
        output: any TerminalOutput = FileDescriptorOutput(), frameInterval: TimeInterval = 1.0 / 15,
        width: Int? = nil, plainMode: PlainMode = .finalLines,
        scheduler: any ActivityScheduler = DispatchActivityScheduler(
            queue: DispatchQueue(label: "transfer.terminal.frames")),
        clock: DisplayClock = .system
    ) {
        self.output = output
        // Never 0: an animating element asks for the next frame from the
        // current one, which must be later.
        self.frameInterval = max(0.001, frameInterval)
        self.fixedWidth = width
        self.plainMode = plainMode
        self.scheduler = scheduler
        self.clock = clock
    }

    deinit {
        // Never leave the user's terminal without a cursor, even if finish()
        // was not called (an early return, an error path).
        if state.withLock({ $0.cursorHidden }) { output.write("\u{1B}[?25h") }
    }

    /// Whether frames with control sequences are drawn (the output is a terminal).
    public var isInteractive: Bool { output.isTerminal }

    /// The width frames are drawn at.
    public var width: Int { max(1, fixedWidth ?? output.columns ?? 80) }

    /// Appends an element as a new line; its changes now schedule frames.
    public func add(_ element: any TerminalElement) {
        state.withLock { $0.elements.append(element) }
        element.setUpdateHandler { [weak self] in self?.setNeedsDisplay() }
        setNeedsDisplay()
    }

    /// Creates a bar bound to `task`, on this display's clock, and adds it.
    ///
    /// - Returns: The bar (already bound; it detaches when the task completes).
    @discardableResult
    public func addProgressBar(
        for task: any ObservableTransfer, direction: ProgressDirection, label: String = "",
        animated: Bool = false
    ) -> ProgressBar {
        let bar = ProgressBar(label: label, clock: clock)
        bar.bind(to: task, direction: direction, animated: animated)
        add(bar)
        return bar
    }

    /// Prints `message` as a line of its own above the display (a failure, a
    /// notice) without breaking it: on a terminal the frame is erased, the
    /// line written and the frame redrawn below it, in one write; otherwise
    /// the plain line is written.
    public func printAbove(_ message: String) {
        let text = Self.sanitize(message)
        guard output.isTerminal else {
            output.write(text + "\n")
            return
        }
        let width = self.width
        let now = clock.now()
        state.withLock { state in
            guard !state.finished else {
                // The final frame stays; the line goes below it.
                output.write(text + "\n")
                return
            }
            var frame = state.linesOnScreen > 0 ? "\u{1B}[\(state.linesOnScreen)A" : ""
            frame += "\r\u{1B}[J" + text + "\n"
            let lines = state.elements.map { Self.sanitize($0.render(width: max(1, width - 1))) }
            frame += Self.frame(lines: lines, previousLines: 0, hideCursor: !state.cursorHidden)
            state.cursorHidden = true
            state.linesOnScreen = lines.count
            state.lastFrame = now
            output.write(frame)
        }
    }

    /// Removes an element (its line disappears on the next frame).
    public func remove(_ element: any TerminalElement) {
        let removed = state.withLock { state -> Bool in
            let before = state.elements.count
            state.elements.removeAll { $0 === element }
            return state.elements.count != before
        }
        if removed {
            element.setUpdateHandler(nil)
            setNeedsDisplay()
        }
    }

    /// The elements, top to bottom.
    public var elements: [any TerminalElement] { state.withLock { $0.elements } }

    /// Every element rendered at `width`, one line each (no control characters).
    public func renderLines(width: Int) -> [String] {
        elements.map { Self.sanitize($0.render(width: width)) }
    }

    /// Asks for a frame: drawn now if the last one is older than
    /// ``frameInterval``, otherwise once when it is. Does nothing when the
    /// output is not a terminal or after ``finish()``.
    public func setNeedsDisplay() {
        guard output.isTerminal else { return }
        let now = clock.now()
        let delay: TimeInterval? = state.withLock { state in
            guard !state.finished, !state.frameScheduled else { return nil }
            state.frameScheduled = true
            return max(0, state.lastFrame + frameInterval - now)
        }
        guard let delay else { return }
        if delay == 0 {
            drawScheduledFrame()
        } else {
            _ = scheduler.schedule(after: delay) { [weak self] in self?.drawScheduledFrame() }
        }
    }

    private func drawScheduledFrame() {
        let animating = drawFrame(final: false, clearScheduled: true)
        if animating { setNeedsDisplay() }
    }

    /// Draws the last frame (on a terminal: and shows the cursor again; not a
    /// terminal: the plain final lines) and stops drawing. Idempotent.
    public func finish() {
        if output.isTerminal {
            _ = drawFrame(final: true, clearScheduled: false)
            return
        }
        let lines: [String]? = state.withLock { state in
            guard !state.finished else { return nil }
            state.finished = true
            return state.elements.map { Self.sanitize($0.render(width: width)) }
        }
        guard let lines, plainMode == .finalLines, !lines.isEmpty else { return }
        // Trailing padding is for overwriting a terminal line; a log wants none.
        output.write(lines.map { Self.trimmingTrailingSpaces($0) + "\n" }.joined())
    }

    /// Builds and writes one frame under the lock (frames never interleave).
    /// Returns whether an element still animates.
    private func drawFrame(final: Bool, clearScheduled: Bool) -> Bool {
        let width = self.width
        let now = clock.now()
        return state.withLock { state -> Bool in
            if clearScheduled { state.frameScheduled = false }
            guard !state.finished else { return false }
            // One column short of the edge: writing the last column leaves some
            // terminals in a pending wrap that the next line would double.
            let lines = state.elements.map { Self.sanitize($0.render(width: max(1, width - 1))) }
            let frame = Self.frame(
                lines: lines, previousLines: state.linesOnScreen,
                hideCursor: !state.cursorHidden && !final, showCursor: final && state.cursorHidden)
            if !state.cursorHidden && !final { state.cursorHidden = true }
            if final {
                state.finished = true
                state.cursorHidden = false
            }
            state.linesOnScreen = lines.count
            state.lastFrame = now
            output.write(frame)
            return !final && state.elements.contains { $0.isAnimating }
        }
    }

    /// The bytes of one terminal frame: back up over `previousLines`, rewrite
    /// each line after clearing it, erase whatever remains below.
    static func frame(lines: [String], previousLines: Int, hideCursor: Bool = false, showCursor: Bool = false) -> String
    {
        var frame = hideCursor ? "\u{1B}[?25l" : ""
        // ESC[0A would still move one line up on most terminals: only when > 0.
        if previousLines > 0 { frame += "\u{1B}[\(previousLines)A" }
        for line in lines { frame += "\r\u{1B}[2K" + line + "\n" }
        frame += "\r\u{1B}[J"
        if showCursor { frame += "\u{1B}[?25h" }
        return frame
    }

    /// Replaces control characters (a file name may carry ESC or a newline)
    /// with "?", so an element can neither inject sequences nor break the line count.
    static func sanitize(_ line: String) -> String {
        guard
            line.unicodeScalars.contains(where: {
                $0.value < 0x20 || $0.value == 0x7F || (0x80..<0xA0).contains($0.value)
            })
        else { return line }
        return String(
            String.UnicodeScalarView(
                line.unicodeScalars.map { scalar in
                    scalar.value < 0x20 || scalar.value == 0x7F || (0x80..<0xA0).contains(scalar.value) ? "?" : scalar
                }))
    }

    static func trimmingTrailingSpaces(_ line: String) -> String {
        var line = Substring(line)
        while line.last == " " { line = line.dropLast() }
        return String(line)
    }
}
