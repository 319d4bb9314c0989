import Dispatch
import Foundation
import Testing
import Transfer
import TransferFoundation

@testable import TransferTerminal

private let events = DispatchQueue(label: "test.events")
private let mib: Int64 = 1024 * 1024

@Suite("Progress bar bindings")
struct ProgressBarTests {
    @Test("a known total shows bar, percentage, bytes, rate and ETA")
    func rendersKnownTotal() {
        let task = FakeTask()
        let bar = ProgressBar(label: "file.bin", clock: ManualActivityScheduler().displayClock)
        bar.bind(to: task, direction: .download, queue: events)

        task.send(42 * mib / 10 + 1, of: 10 * mib, elapsed: 2)

        let line = bar.render(width: 80)
        #expect(line.count == 80)
        #expect(line.hasPrefix("file.bin [=========>"))
        #expect(line.contains("  42%  4.2 MiB/10.0 MiB  2.1 MiB/s  ETA 0:03"))
    }

    @Test("the bar fills in proportion at a given width")
    func barProportion() {
        let bar = ProgressBar(clock: ManualActivityScheduler().displayClock)
        bar.setProgress(TransferProgress(completedUnitCount: 50, totalUnitCount: 100, elapsed: 1))

        // 60 columns: 36 of numbers, 2 brackets, 22 cells of which 11 are filled.
        #expect(bar.render(width: 60) == "[==========>           ]   50%  50 B/100 B  50 B/s  ETA 0:01")
    }

    @Test("an unknown total shows bytes and rate and no percentage")
    func rendersUnknownTotal() {
        let task = FakeTask()
        let bar = ProgressBar(label: "stream", clock: ManualActivityScheduler().displayClock)
        bar.bind(to: task, direction: .download, queue: events)

        task.send(3 * mib, of: -1, elapsed: 3)

        let line = bar.render(width: 50)
        #expect(line.count == 50)
        #expect(line.hasPrefix("stream  3.0 MiB  1.0 MiB/s"))
        #expect(!line.contains("%"))
        #expect(!line.contains("["))
    }

    @Test("a narrow width drops the bar but keeps the numbers, cut to the width")
    func narrowWidth() {
        let bar = ProgressBar(label: "x", clock: ManualActivityScheduler().displayClock)
        bar.setProgress(TransferProgress(completedUnitCount: 1, totalUnitCount: 4, elapsed: 1))

        #expect(bar.render(width: 20) == "x  25%  1 B/4 B  1 B")
    }

    @Test("the upload binding follows bytes sent, not bytes received")
    func uploadDirection() {
        let task = FakeTask()
        let bar = ProgressBar(clock: ManualActivityScheduler().displayClock)
        bar.bind(to: task, direction: .upload, queue: events)

        task.send(9, of: 10, direction: .download)
        #expect(bar.progress?.completedUnitCount == 0)

        task.send(3, of: 10, direction: .upload)
        #expect(bar.progress?.completedUnitCount == 3)
    }

    @Test("completion shows the final counts and detaches the bar")
    func detachesOnCompletion() {
        let task = FakeTask()
        let bar = ProgressBar(clock: ManualActivityScheduler().displayClock)
        bar.bind(to: task, direction: .download, queue: events)
        task.send(10, of: 100)
        #expect(task.observerCount == 2)

        task.send(100, of: 100)
        task.setState(.completed)

        #expect(!bar.isBound)
        #expect(bar.isCompleted)
        #expect(task.observerCount == 0)
        #expect(bar.progress?.completedUnitCount == 100)
        #expect(bar.render(width: 60).contains("100%"))
    }

    @Test("rebinding drops the old task's observations")
    func rebindingDropsOldTask() {
        let first = FakeTask()
        let second = FakeTask()
        let bar = ProgressBar(clock: ManualActivityScheduler().displayClock)
        bar.bind(to: first, direction: .download, queue: events)

        bar.bind(to: second, direction: .download, queue: events)
        #expect(first.observerCount == 0)
        #expect(second.observerCount == 2)

        second.send(20, of: 100)
        first.send(90, of: 100)
        #expect(bar.progress?.completedUnitCount == 20)
    }

    @Test("unbinding early keeps the last value and stops following")
    func unbindEarly() {
        let task = FakeTask()
        let bar = ProgressBar(clock: ManualActivityScheduler().displayClock)
        bar.bind(to: task, direction: .download, queue: events)
        task.send(30, of: 100)

        bar.unbind()
        task.send(60, of: 100)

        #expect(!bar.isBound)
        #expect(task.observerCount == 0)
        #expect(bar.progress?.completedUnitCount == 30)
    }

    @Test("binding to a completed task shows its final progress without observing it")
    func completedTaskIsNotObserved() {
        let task = FakeTask()
        task.send(100, of: 100)
        task.setState(.completed)
        let bar = ProgressBar(clock: ManualActivityScheduler().displayClock)

        bar.bind(to: task, direction: .download, queue: events)

        #expect(!bar.isBound)
        #expect(task.observerCount == 0)
        #expect(bar.progress?.completedUnitCount == 100)
    }

    @Test("animated changes ease towards the new value; plain ones jump")
    func animation() {
        let clock = ManualActivityScheduler()
        let task = FakeTask()
        let bar = ProgressBar(animationDuration: 0.2, clock: clock.displayClock)
        bar.bind(to: task, direction: .download, animated: true, queue: events)

        task.send(100, of: 100)
        #expect(bar.displayedFraction == 0)
        #expect(bar.isAnimating)

        clock.advance(by: 0.1)
        let midway = bar.displayedFraction ?? -1
        #expect(midway > 0 && midway < 1)

        clock.advance(by: 0.1)
        #expect(bar.displayedFraction == 1)
        #expect(!bar.isAnimating)

        bar.setProgress(TransferProgress(completedUnitCount: 50, totalUnitCount: 100), animated: false)
        #expect(bar.displayedFraction == 0.5)
        #expect(!bar.isAnimating)
    }

    @Test("completion ends an animation at the final value at once")
    func completionSnaps() {
        let clock = ManualActivityScheduler()
        let task = FakeTask()
        let bar = ProgressBar(animationDuration: 0.5, clock: clock.displayClock)
        bar.bind(to: task, direction: .download, animated: true, queue: events)
        task.send(10, of: 100)
        clock.advance(by: 1)

        task.send(100, of: 100)
        #expect(bar.isAnimating)
        task.setState(.completed)

        #expect(bar.displayedFraction == 1)
        #expect(!bar.isAnimating)
        #expect(bar.render(width: 60).hasPrefix("[=====================]  100%"))
    }
}

@Suite("Percent label bindings")
struct PercentLabelTests {
    @Test("the label shows the truncated whole percentage")
    func showsPercentage() {
        let task = FakeTask()
        let label = PercentLabel()
        label.bind(to: task, direction: .download, queue: events)
        #expect(label.text == "")

        task.send(429, of: 1000)

        #expect(label.text == "42%")
        #expect(label.render(width: 6) == "42%   ")
    }

    @Test("an unknown total leaves the text unchanged")
    func unknownTotal() {
        let task = FakeTask()
        let label = PercentLabel(prefix: "a")
        label.bind(to: task, direction: .upload, queue: events)
        task.send(5, of: 10, direction: .upload)

        task.send(7, of: -1, direction: .upload)

        #expect(label.text == "50%")
        #expect(label.render(width: 5) == "a 50%")
    }

    @Test("completion shows 100% and ends the observation; rebinding drops the old task")
    func completionAndRebinding() {
        let first = FakeTask()
        let label = PercentLabel()
        label.bind(to: first, direction: .download, queue: events)
        first.send(100, of: 100)
        first.setState(.completed)
        #expect(label.text == "100%")
        #expect(!label.isBound)
        #expect(first.observerCount == 0)

        let second = FakeTask()
        let third = FakeTask()
        label.bind(to: second, direction: .download, queue: events)
        label.bind(to: third, direction: .download, queue: events)
        second.send(90, of: 100)
        third.send(10, of: 100)
        #expect(label.text == "10%")
        #expect(second.observerCount == 0)
    }
}

@Suite("Spinner bindings")
struct SpinnerTests {
    @Test("a spinner spins while its task runs and stops when it is suspended")
    func followsState() {
        let clock = ManualActivityScheduler()
        let task = FakeTask(state: .running)
        let spinner = Spinner(title: "GET /", clock: clock.displayClock)
        spinner.bind(to: task, queue: events)

        #expect(spinner.isSpinning)
        #expect(spinner.render(width: 8) == "| GET / ")
        clock.advance(by: 0.1)
        #expect(spinner.currentSymbol == "/")
        clock.advance(by: 0.25)
        #expect(spinner.currentSymbol == "\\")

        task.setState(.suspended)
        #expect(!spinner.isSpinning)
        #expect(spinner.render(width: 8) == "  GET / ")

        task.setState(.running)
        #expect(spinner.isSpinning)
        #expect(spinner.currentSymbol == "|")
    }

    @Test("a suspended task starts the spinner stopped; completion stops and detaches it")
    func completionDetaches() {
        let task = FakeTask(state: .suspended)
        let spinner = Spinner(clock: ManualActivityScheduler().displayClock)
        spinner.bind(to: task, queue: events)
        #expect(!spinner.isSpinning)
        #expect(spinner.isBound)

        task.setState(.running)
        #expect(spinner.isSpinning)
        task.setState(.completed)

        #expect(!spinner.isSpinning)
        #expect(!spinner.isBound)
        #expect(task.observerCount == 0)
    }

    @Test("rebinding follows only the new task; unbinding stops the spinner")
    func rebinding() {
        let first = FakeTask(state: .running)
        let second = FakeTask(state: .suspended)
        let spinner = Spinner(clock: ManualActivityScheduler().displayClock)
        spinner.bind(to: first, queue: events)

        spinner.bind(to: second, queue: events)
        #expect(!spinner.isSpinning)
        #expect(first.observerCount == 0)

        first.setState(.suspended)
        first.setState(.running)
        #expect(!spinner.isSpinning)

        second.setState(.running)
        #expect(spinner.isSpinning)
        spinner.unbind()
        #expect(!spinner.isSpinning)
        #expect(second.observerCount == 0)
    }
}

@Suite("Terminal text width")
struct TerminalWidthTests {
    @Test("wide characters count two columns, so a Chinese file name keeps the line at its width")
    func wideCharacters() {
        #expect(TerminalFormat.columns("abc") == 3)
        #expect(TerminalFormat.columns("下载.zip") == 8)
        #expect(TerminalFormat.columns("e\u{301}") == 1)
        #expect(TerminalFormat.fit("下载", width: 3) == "下 ")

        let bar = ProgressBar(label: "下载文件", clock: ManualActivityScheduler().displayClock)
        bar.setProgress(TransferProgress(completedUnitCount: 1, totalUnitCount: 2, elapsed: 1))
        let line = bar.render(width: 60)
        #expect(TerminalFormat.columns(line) == 60)
        #expect(line.hasPrefix("下载文件 ["))
    }

    @Test("bytes, rates and durations read the way the bars print them")
    func formats() {
        #expect(TerminalFormat.bytes(512) == "512 B")
        #expect(TerminalFormat.bytes(1536) == "1.5 KiB")
        #expect(TerminalFormat.bytes(10 * 1024 * 1024) == "10.0 MiB")
        #expect(TerminalFormat.rate(0) == "0 B/s")
        #expect(TerminalFormat.duration(4.2) == "0:05")
        #expect(TerminalFormat.duration(3723) == "1:02:03")
        #expect(TerminalFormat.duration(nil) == "--:--")
        #expect(TerminalFormat.percent(0.999) == "99%")
    }
}

@Suite("Spinner bound to an activity monitor")
struct SpinnerActivityTests {
    @Test("the spinner follows the monitor's delayed activity and stops following when unbound")
    func followsMonitor() {
        let clock = ManualActivityScheduler()
        let monitor = ActivityMonitor(scheduler: clock, observing: nil)
        let spinner = Spinner(clock: clock.displayClock)
        let other = Spinner(clock: clock.displayClock)
        spinner.bind(to: monitor)
        other.bind(to: monitor)
        let task = FakeTask()

        monitor.taskDidStart(task)
        clock.advance(by: 0.5)
        #expect(!spinner.isSpinning)
        clock.advance(by: 0.5)
        #expect(spinner.isSpinning)
        #expect(other.isSpinning)

        spinner.unbind()
        monitor.taskDidStop(task)
        clock.advance(by: 0.17)
        #expect(!other.isSpinning)

        monitor.taskDidStart(task)
        clock.advance(by: 1)
        #expect(other.isSpinning)
        #expect(!spinner.isSpinning)
    }
}

@Suite("Bindings racing completion")
struct BindingCompletionRaceTests {
    @Test("a task that completes while being bound still detaches every element with its final value")
    func completesDuringBind() {
        let clock = ManualActivityScheduler().displayClock
        let bar = ProgressBar(clock: clock)
        let label = PercentLabel()
        let spinner = Spinner(clock: clock)

        bar.bind(to: CompletingTask(), direction: .download)
        label.bind(to: CompletingTask(), direction: .download)
        spinner.bind(to: CompletingTask())

        #expect(!bar.isBound)
        #expect(bar.isCompleted)
        #expect(bar.progress?.completedUnitCount == 8)
        #expect(!label.isBound)
        #expect(label.text == "100%")
        #expect(!spinner.isBound)
        #expect(!spinner.isSpinning)
    }
}
