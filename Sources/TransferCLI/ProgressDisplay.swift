import Dispatch
import Dispatch
import FoundationEssentials
import Glibc
import Transfer
import TransferTerminal

/// `--progress`: resolved once against whether stderr is a terminal.
enum ProgressStyle: Sendable, Equatable {
    case none, bar, percent, spinner

    init?(flag: String, silent: Bool) {
        switch flag {
        case "none": self = .none
        case "bar": self = .bar
        case "percent": self = .percent
        case "spinner": self = .spinner
        case "auto": self = Terminal.stderrIsTerminal ? .bar : .none
        default: return nil
        }
        if silent { self = .none }
    }
}

/// One line per running transfer on stderr, drawn by TransferTerminal's
/// `MultiProgressDisplay` with a `ProgressBar`, `PercentLabel` or `Spinner`
/// bound to each transfer.
///
/// On a terminal the running lines are redrawn in place and each finished
/// transfer leaves one final line above them. On a pipe or file no control
/// character is written: only the final line of each transfer.
final class ProgressDisplay: Sendable {
    private let style: ProgressStyle
    private let display: MultiProgressDisplay?
    private let elements = Protected<[Int: Element]>([:])

    private struct Element: Sendable {
        var view: any TerminalElement
        var transfer: any ObservableTransfer
        var direction: ProgressDirection
    }

    init(style: ProgressStyle) {
        self.style = style
        display = style == .none ? nil
            : MultiProgressDisplay(output: FileDescriptorOutput(fileDescriptor: STDERR_FILENO), plainMode: .silent)
    }

    /// Whether anything is drawn (false for `--progress none` and for `auto`
    /// off a terminal): callers skip making labels when it is not.
    var isActive: Bool { display != nil }

    /// Starts showing `task` under `label`.
    func add(id: Int, label: String, task: any ObservableTransfer, direction: ProgressDirection) {
        guard let display else { return }
        let label = Self.fit(Terminal.printable(label), width: 20)
        let view: any TerminalElement
        switch style {
        case .none:
            return
        case .bar:
            let bar = ProgressBar(label: label)
            bar.bind(to: task, direction: direction)
            view = bar
        case .percent:
            let percent = PercentLabel(prefix: label + " ")
            percent.bind(to: task, direction: direction)
            view = percent
        case .spinner:
            let spinner = Spinner(title: label)
            spinner.bind(to: task)
            view = spinner
        }
        elements.withLock { $0[id] = Element(view: view, transfer: task, direction: direction) }
        display.add(view)
    }

    /// Replaces the running line of `id` with its final line, printed once.
    func finish(id: Int, succeeded: Bool) {
        guard let display, let element = elements.withLock({ $0.removeValue(forKey: id) }) else { return }
        // The binding may not have seen the last report yet: show the final counts.
        if let bar = element.view as? ProgressBar {
            bar.unbind()
            bar.setProgress(element.transfer.progress(element.direction))
        } else if let spinner = element.view as? Spinner {
            spinner.unbind()
            spinner.setSpinning(false)
        }
        let line = element.view.render(width: display.isInteractive ? max(20, display.width - 1) : 100)
        display.remove(element.view)
        display.printAbove(Self.trimmingTrailingWhitespace(line) + (succeeded ? "" : "  failed"))
    }

    /// `line` without trailing white space (the Unicode White_Space property,
    /// which is what the regular expression `\s+$` matched, without building
    /// one per finished transfer).
    static func trimmingTrailingWhitespace(_ line: String) -> String {
        var scalars = line.unicodeScalars[...]
        while let last = scalars.last, last.properties.isWhitespace { scalars.removeLast() }
        return String(scalars)
    }

    /// Pads or shortens (keeping the end, where names differ) to `width`
    /// characters, so the bars of parallel transfers line up.
    private static func fit(_ text: String, width: Int) -> String {
        if text.count <= width { return text + String(repeating: " ", count: width - text.count) }
        return "..." + text.suffix(width - 3)
    }

    /// Stops drawing and leaves the cursor below the last line.
    func stop() {
        display?.finish()
    }
}
