import Dispatch
import Foundation
import Transfer

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

/// Draws one line per running transfer on stderr.
///
/// On a terminal: redrawn in place ten times a second (cursor up, erase
/// line), finished transfers leave a final line above the running ones. On a
/// pipe or file: no control characters at all, only plain lines ("name 40%")
/// at every tenth and at the end.
///
/// Stand-in until the TransferTerminal bindings (terminal branch) land: the
/// runner only calls `add`, `finish` and `stop`, so swapping the drawing is
/// local to this file.
final class ProgressDisplay: @unchecked Sendable {
    // @unchecked Sendable: every mutable field is touched only on `queue`.
    private struct Entry {
        var label: String
        var task: any ObservableTransfer
        var direction: ProgressDirection
        var lastTenth = -1
    }

    private let style: ProgressStyle
    private let interactive: Bool
    private let queue = DispatchQueue(label: "transfer.cli.progress")
    private var entries: [Int: Entry] = [:]
    private var order: [Int] = []
    private var drawnLines = 0
    private var frame = 0
    private var timer: DispatchSourceTimer?

    init(style: ProgressStyle) {
        self.style = style
        interactive = Terminal.stderrIsTerminal
    }

    var isActive: Bool { style != .none }

    /// Starts showing `task` under `label`.
    func add(id: Int, label: String, task: any ObservableTransfer, direction: ProgressDirection) {
        guard isActive else { return }
        queue.async { [self] in
            entries[id] = Entry(label: Terminal.printable(label), task: task, direction: direction)
            order.append(id)
            if timer == nil {
                let timer = DispatchSource.makeTimerSource(queue: queue)
                timer.schedule(deadline: .now(), repeating: .milliseconds(100))
                timer.setEventHandler { [weak self] in self?.redraw() }
                timer.resume()
                self.timer = timer
            }
        }
    }

    /// Draws the final state of `id` once and stops showing it.
    func finish(id: Int, succeeded: Bool) {
        guard isActive else { return }
        queue.sync {
            guard let entry = entries.removeValue(forKey: id) else { return }
            order.removeAll { $0 == id }
            let line = render(entry, finished: true, succeeded: succeeded)
            if interactive {
                Terminal.writeStderr(eraseDrawn() + line + "\u{1B}[K\n" + activeLines())
            } else {
                Terminal.writeStderr(line + "\n")
            }
        }
    }

    /// Stops the timer and leaves the cursor below the last line.
    func stop() {
        guard isActive else { return }
        queue.sync {
            timer?.cancel()
            timer = nil
            if interactive { Terminal.writeStderr(eraseDrawn()) }
        }
    }

    // MARK: - Drawing (on `queue`)

    private func redraw() {
        frame += 1
        if interactive {
            Terminal.writeStderr(eraseDrawn() + activeLines())
        } else {
            plainTick()
        }
    }

    /// Moves up over the lines drawn last time, erasing them.
    private func eraseDrawn() -> String {
        guard drawnLines > 0 else { return "\r" }
        let text = "\u{1B}[\(drawnLines)A\r\u{1B}[J"
        drawnLines = 0
        return text
    }

    private func activeLines() -> String {
        var text = ""
        for id in order {
            guard let entry = entries[id] else { continue }
            text += render(entry, finished: false, succeeded: true) + "\u{1B}[K\n"
            drawnLines += 1
        }
        return text
    }

    /// Plain lines for pipes: one per tenth reached, no control characters.
    private func plainTick() {
        for id in order {
            guard var entry = entries[id] else { continue }
            let progress = entry.task.progress(entry.direction)
            guard let fraction = progress.fractionCompleted else { continue }
            let tenth = Int(fraction * 10)
            if tenth > entry.lastTenth && tenth < 10 {
                entry.lastTenth = tenth
                entries[id] = entry
                Terminal.writeStderr("\(entry.label) \(tenth * 10)%\n")
            }
        }
    }

    private func render(_ entry: Entry, finished: Bool, succeeded: Bool) -> String {
        let progress = entry.task.progress(entry.direction)
        let done = Self.bytes(progress.completedUnitCount)
        let rate = Self.bytes(Int64(progress.bytesPerSecond)) + "/s"
        let columns = interactive ? Terminal.stderrColumns : 80
        let fraction = finished && succeeded ? 1.0 : progress.fractionCompleted
        let percent = fraction.map { String(format: "%3d%%", Int($0 * 100)) } ?? "   ?"
        let label = Self.fit(entry.label, width: max(10, min(30, columns / 4)))
        let mark = finished ? (succeeded ? "done" : "FAILED") : ""

        switch style {
        case .none:
            return ""
        case .percent:
            return "\(label) \(percent) \(mark)"
        case .spinner:
            let glyphs = ["|", "/", "-", "\\"]
            let glyph = finished ? (succeeded ? "+" : "x") : glyphs[frame % glyphs.count]
            return "\(glyph) \(label) \(done) \(rate)"
        case .bar:
            var tail = " \(percent) \(done)"
            if progress.totalUnitCount > 0 { tail += "/" + Self.bytes(progress.totalUnitCount) }
            tail += " \(rate)"
            if !finished, let eta = progress.estimatedTimeRemaining, eta.isFinite {
                tail += " ETA " + Self.duration(eta)
            }
            if finished { tail += " " + mark }
            // Fixed columns so the bars of parallel transfers line up.
            tail = tail.padding(toLength: max(tail.count, 46), withPad: " ", startingAt: 0)
            let width = max(10, columns - label.count - tail.count - 4)
            let filled: Int
            if let fraction {
                filled = Int(Double(width) * fraction)
            } else {
                filled = -1
            }
            var bar = ""
            if filled >= 0 {
                bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
            } else {
                // Unknown total: a moving marker instead of a fill.
                let position = frame % width
                bar = String(repeating: "-", count: position) + "<=>"
                    + String(repeating: "-", count: max(0, width - position - 3))
                bar = String(bar.prefix(width))
            }
            return "\(label) [\(bar)]\(tail)"
        }
    }

    private static func fit(_ text: String, width: Int) -> String {
        if text.count <= width { return text.padding(toLength: width, withPad: " ", startingAt: 0) }
        return "..." + text.suffix(width - 3)
    }

    static func bytes(_ count: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(max(0, count))
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(Int(value)) B" : String(format: "%.1f", value) + " " + units[unit]
    }

    private static func duration(_ seconds: Double) -> String {
        let total = Int(min(seconds, 359_999))
        return total >= 3600 ? String(format: "%d:%02d:%02d", total / 3600, total / 60 % 60, total % 60)
            : String(format: "%d:%02d", total / 60, total % 60)
    }
}
