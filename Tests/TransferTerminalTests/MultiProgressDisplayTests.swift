import Dispatch
import Foundation
import Testing
import Transfer

@testable import TransferTerminal

private let events = DispatchQueue(label: "test.display.events")
private let esc = "\u{1B}"

/// A display on a manual clock writing into a buffer.
private func makeDisplay(terminal: Bool, width: Int = 40, plainMode: MultiProgressDisplay.PlainMode = .finalLines)
    -> (MultiProgressDisplay, TerminalBuffer, ManualActivityScheduler)
{
    let clock = ManualActivityScheduler()
    let buffer = TerminalBuffer(isTerminal: terminal, columns: width)
    let display = MultiProgressDisplay(
        output: buffer, frameInterval: 0.1, plainMode: plainMode,
        scheduler: clock, clock: clock.displayClock)
    return (display, buffer, clock)
}

@Suite("Multi-progress display")
struct MultiProgressDisplayTests {
    @Test("a frame backs up over the previous one, clears and rewrites each line, and erases below")
    func frameBytes() {
        let first = MultiProgressDisplay.frame(lines: ["a", "b"], previousLines: 0, hideCursor: true)
        #expect(first == "\(esc)[?25l\r\(esc)[2Ka\n\r\(esc)[2Kb\n\r\(esc)[J")

        let next = MultiProgressDisplay.frame(lines: ["c"], previousLines: 2, showCursor: true)
        #expect(next == "\(esc)[2A\r\(esc)[2Kc\n\r\(esc)[J\(esc)[?25h")
    }

    @Test("parallel bars redraw in place with one write per frame")
    func redrawsInPlace() {
        let (display, buffer, clock) = makeDisplay(terminal: true, width: 80)
        let tasks = [FakeTask(), FakeTask()]
        for (index, task) in tasks.enumerated() {
            let bar = ProgressBar(label: "f\(index)", clock: clock.displayClock)
            bar.bind(to: task, direction: .download, queue: events)
            display.add(bar)
        }
        clock.advance(by: 1)
        let framesBefore = buffer.allWrites.count

        tasks[0].send(50, of: 100)
        #expect(buffer.allWrites.count == framesBefore + 1)

        let frame = buffer.allWrites.last ?? ""
        #expect(frame.hasPrefix("\(esc)[2A"))
        #expect(frame.components(separatedBy: "\r\(esc)[2K").count == 3)
        #expect(frame.contains("f0 ["))
        #expect(frame.contains("50%"))
        // Drawn one column short of the edge: 79 characters per line.
        let drawn = frame.components(separatedBy: "\r\(esc)[2K").dropFirst().map { $0.prefix { $0 != "\n" } }
        #expect(drawn.map(\.count) == [79, 79])
    }

    @Test("changes within the frame interval are coalesced into one later frame")
    func throttlesFrames() {
        let (display, buffer, clock) = makeDisplay(terminal: true)
        let task = FakeTask()
        let bar = ProgressBar(clock: clock.displayClock)
        bar.bind(to: task, direction: .download, queue: events)
        display.add(bar)
        let afterAdd = buffer.allWrites.count
        #expect(afterAdd == 1)

        for done in 1...50 { task.send(Int64(done), of: 100) }
        #expect(buffer.allWrites.count == afterAdd)

        clock.advance(by: 0.1)
        #expect(buffer.allWrites.count == afterAdd + 1)
        #expect(buffer.allWrites.last?.contains(" 50%") == true)
        #expect(clock.pendingCount == 0)
    }

    @Test("a spinning spinner keeps frames coming; a stopped one lets them stop")
    func animationFrames() {
        let (display, buffer, clock) = makeDisplay(terminal: true)
        let task = FakeTask(state: .running)
        let spinner = Spinner(title: "work", clock: clock.displayClock)
        spinner.bind(to: task, queue: events)
        display.add(spinner)

        clock.advance(by: 0.1)
        clock.advance(by: 0.1)
        clock.advance(by: 0.1)
        #expect(buffer.allWrites.count == 4)
        #expect(
            buffer.allWrites.map {
                $0.contains("| work") || $0.contains("/ work") || $0.contains("- work") || $0.contains("\\ work")
            }
            .allSatisfy { $0 })

        task.setState(.completed)
        clock.advance(by: 1)
        let settled = buffer.allWrites.count
        clock.advance(by: 1)
        #expect(buffer.allWrites.count == settled)
        #expect(clock.pendingCount == 0)
    }

    @Test("finish draws the final frame and shows the cursor again")
    func finishOnTerminal() {
        let (display, buffer, clock) = makeDisplay(terminal: true)
        let bar = ProgressBar(label: "done", clock: clock.displayClock)
        display.add(bar)
        bar.setProgress(TransferProgress(completedUnitCount: 10, totalUnitCount: 10, elapsed: 1))

        display.finish()
        display.finish()
        clock.advance(by: 1)

        #expect(buffer.allWrites.first?.hasPrefix("\(esc)[?25l") == true)
        #expect(buffer.allWrites.last?.hasSuffix("\(esc)[?25h") == true)
        #expect(buffer.allWrites.last?.contains("100%") == true)
        #expect(buffer.allWrites.filter { $0.contains("?25h") }.count == 1)
    }

    @Test("not a terminal: no control characters, only the final plain lines")
    func plainOutput() {
        let (display, buffer, clock) = makeDisplay(terminal: false, width: 80)
        let task = FakeTask()
        let bar = ProgressBar(label: "log.txt", clock: clock.displayClock)
        bar.bind(to: task, direction: .download, queue: events)
        display.add(bar)
        display.add(Spinner(title: "idle", clock: clock.displayClock))

        task.send(5, of: 10)
        clock.advance(by: 1)
        #expect(buffer.allWrites.isEmpty)

        task.send(10, of: 10)
        task.setState(.completed)
        display.finish()

        #expect(buffer.allWrites.count == 1)
        let text = buffer.contents
        #expect(!text.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" })
        let lines = text.split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines.first?.hasPrefix("log.txt [") == true)
        #expect(lines.first?.contains("100%") == true)
        #expect(lines.last == "  idle")  // a stopped spinner keeps its column
    }

    @Test("not a terminal in silent mode: nothing at all")
    func silentOutput() {
        let (display, buffer, clock) = makeDisplay(terminal: false, plainMode: .silent)
        display.add(PercentLabel(prefix: "x"))
        clock.advance(by: 1)
        display.finish()
        #expect(buffer.allWrites.isEmpty)
    }

    @Test("control characters in a label cannot reach the terminal")
    func sanitizesLabels() {
        let (display, buffer, clock) = makeDisplay(terminal: true)
        let bar = ProgressBar(label: "evil\(esc)[31m\nname", clock: clock.displayClock)
        display.add(bar)

        let frame = buffer.allWrites.last ?? ""
        #expect(frame.contains("evil?[31m?name"))
        #expect(!frame.contains("\(esc)[31m"))
    }

    @Test("removing an element shrinks the next frame")
    func removeElement() {
        let (display, buffer, clock) = makeDisplay(terminal: true)
        let a = PercentLabel(prefix: "a")
        let b = PercentLabel(prefix: "b")
        display.add(a)
        clock.advance(by: 1)
        display.add(b)
        clock.advance(by: 1)

        display.remove(a)
        clock.advance(by: 1)

        #expect(display.elements.count == 1)
        let frame = buffer.allWrites.last ?? ""
        #expect(frame.hasPrefix("\(esc)[2A"))
        #expect(frame.components(separatedBy: "\r\(esc)[2K").count == 2)
        #expect(frame.contains("b "))
    }
}

@Suite("Multi-progress display messages")
struct MultiProgressDisplayMessageTests {
    @Test("a message printed above the bars erases the frame, writes the line and redraws, in one write")
    func printAboveOnTerminal() {
        let (display, buffer, clock) = makeDisplay(terminal: true, width: 80)
        let task = FakeTask()
        let bar = display.addProgressBar(for: task, direction: .download, label: "a")
        task.send(1, of: 2)
        clock.advance(by: 1)
        let before = buffer.allWrites.count

        display.printAbove("error: b failed")

        #expect(buffer.allWrites.count == before + 1)
        let write = buffer.allWrites.last ?? ""
        #expect(write.hasPrefix("\(esc)[1A\r\(esc)[J" + "error: b failed\n\r\(esc)[2Ka ["))
        #expect(bar.isBound)
        #expect(task.observerCount == 2)
    }

    @Test("a message on a non-terminal is a plain line")
    func printAbovePlain() {
        let (display, buffer, _) = makeDisplay(terminal: false)
        display.add(PercentLabel())

        display.printAbove("note: \(esc)[2Jhi")

        #expect(buffer.allWrites == ["note: ?[2Jhi\n"])
    }
}

@Suite("Multi-progress display lifetime")
struct MultiProgressDisplayLifetimeTests {
    @Test("a display dropped without finish() shows the cursor again")
    func deinitRestoresCursor() {
        let buffer = TerminalBuffer(isTerminal: true, columns: 40)
        let clock = ManualActivityScheduler()
        do {
            let display = MultiProgressDisplay(output: buffer, scheduler: clock, clock: clock.displayClock)
            display.add(PercentLabel(prefix: "x"))
        }
        #expect(buffer.allWrites.first?.hasPrefix("\u{1B}[?25l") == true)
        #expect(buffer.allWrites.last == "\u{1B}[?25h")
    }
}
