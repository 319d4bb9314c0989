import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing
import TransferFoundation

@testable import Transfer

/// A task that only has an identity and a state: what the monitor counts.
private final class CountedTask: ObservableTransfer {
    let state: TaskState = .running
    func progress(_ direction: ProgressDirection) -> TransferProgress {
        TransferProgress(completedUnitCount: 0, totalUnitCount: -1)
    }
    func observeProgress(
        _ direction: ProgressDirection, on queue: DispatchQueue,
        _ handler: @escaping @Sendable (TransferProgress) -> Void
    ) -> ObservationToken {
        ObservationToken {}
    }
    func observeState(on queue: DispatchQueue, _ handler: @escaping @Sendable (TaskState) -> Void) -> ObservationToken {
        ObservationToken {}
    }
}

/// Records what `onChange` reports.
private final class ChangeLog: Sendable {
    private let values = Locked<[Bool]>([])
    var all: [Bool] { values.withLock { $0 } }
    func record(_ value: Bool) { values.withLock { $0.append(value) } }
}

/// A monitor on a manual clock that listens to nothing but what the test feeds it.
private func makeMonitor(activation: TimeInterval = 1.0, completion: TimeInterval = 0.17)
    -> (ActivityMonitor, ManualActivityScheduler, ChangeLog)
{
    let clock = ManualActivityScheduler()
    let monitor = ActivityMonitor(
        activationDelay: activation, completionDelay: completion,
        scheduler: clock, observing: nil)
    let log = ChangeLog()
    monitor.onChange = { log.record($0) }
    return (monitor, clock, log)
}

@Suite("Activity monitor timing")
struct ActivityMonitorTimingTests {
    @Test("the defaults are AFNetworking's: 1 s to activate, 0.17 s to deactivate")
    func defaults() {
        let monitor = ActivityMonitor(observing: nil)
        #expect(monitor.activationDelay == 1.0)
        #expect(monitor.completionDelay == 0.17)
        #expect(monitor.isEnabled)
        #expect(!monitor.isActive)
    }

    @Test("activity is reported only once the activation delay has passed")
    func activatesAfterDelay() {
        let (monitor, clock, log) = makeMonitor()
        let task = CountedTask()

        monitor.taskDidStart(task)
        clock.advance(by: 0.99)
        #expect(!monitor.isActive)
        #expect(log.all.isEmpty)

        clock.advance(by: 0.01)
        #expect(monitor.isActive)
        #expect(log.all == [true])
    }

    @Test("a request shorter than the activation delay is never shown")
    func shortRequestDoesNotFlicker() {
        let (monitor, clock, log) = makeMonitor()
        let task = CountedTask()

        monitor.taskDidStart(task)
        clock.advance(by: 0.5)
        monitor.taskDidStop(task)
        clock.advance(by: 5)

        #expect(!monitor.isActive)
        #expect(log.all.isEmpty)
        #expect(clock.pendingCount == 0)
    }

    @Test("inactivity is reported only once the completion delay has passed")
    func deactivatesAfterCompletionDelay() {
        let (monitor, clock, log) = makeMonitor()
        let task = CountedTask()
        monitor.taskDidStart(task)
        clock.advance(by: 1)

        monitor.taskDidStop(task)
        clock.advance(by: 0.16)
        #expect(monitor.isActive)

        clock.advance(by: 0.01)
        #expect(!monitor.isActive)
        #expect(log.all == [true, false])
    }

    @Test("a task starting within the completion delay keeps activity on without a flicker")
    func backToBackRequestsStayActive() {
        let (monitor, clock, log) = makeMonitor()
        let first = CountedTask()
        let second = CountedTask()
        monitor.taskDidStart(first)
        clock.advance(by: 1)

        monitor.taskDidStop(first)
        clock.advance(by: 0.1)
        monitor.taskDidStart(second)
        clock.advance(by: 5)

        #expect(monitor.isActive)
        #expect(log.all == [true])

        monitor.taskDidStop(second)
        clock.advance(by: 0.17)
        #expect(log.all == [true, false])
    }

    @Test("custom delays are honoured")
    func customDelays() {
        let (monitor, clock, log) = makeMonitor(activation: 0.25, completion: 2)
        let task = CountedTask()

        monitor.taskDidStart(task)
        clock.advance(by: 0.25)
        monitor.taskDidStop(task)
        clock.advance(by: 1.9)
        #expect(log.all == [true])

        clock.advance(by: 0.1)
        #expect(log.all == [true, false])
    }

    @Test("disabling while active reports inactive at once; re-enabling waits the activation delay again")
    func disableAndEnable() {
        let (monitor, clock, log) = makeMonitor()
        let task = CountedTask()
        monitor.taskDidStart(task)
        clock.advance(by: 1)

        monitor.isEnabled = false
        #expect(!monitor.isActive)
        #expect(log.all == [true, false])
        #expect(monitor.activityCount == 1)

        monitor.isEnabled = true
        clock.advance(by: 0.5)
        #expect(!monitor.isActive)
        clock.advance(by: 0.5)
        #expect(monitor.isActive)
        #expect(log.all == [true, false, true])
    }
}

@Suite("Activity monitor counting")
struct ActivityMonitorCountingTests {
    @Test("each task counts once and the count never goes below zero")
    func countsEachTaskOnce() {
        let (monitor, _, _) = makeMonitor()
        let task = CountedTask()

        monitor.taskDidStart(task)
        monitor.taskDidStart(task)
        #expect(monitor.activityCount == 1)

        monitor.taskDidStop(task)
        monitor.taskDidStop(task)
        monitor.taskDidStop(CountedTask())
        monitor.decrementActivityCount()
        #expect(monitor.activityCount == 0)

        monitor.incrementActivityCount()
        monitor.taskDidStart(task)
        #expect(monitor.activityCount == 2)
    }

    @Test("resume, suspend and complete notifications drive the count")
    func countsFromNotifications() {
        let center = NotificationCenter()
        let clock = ManualActivityScheduler()
        let monitor = ActivityMonitor(scheduler: clock, observing: center)
        let first = CountedTask()
        let second = CountedTask()

        center.post(name: .transferTaskDidResume, object: first)
        center.post(name: .transferTaskDidResume, object: second)
        center.post(name: .transferTaskDidResume, object: first)
        #expect(monitor.activityCount == 2)

        center.post(name: .transferTaskDidSuspend, object: first)
        #expect(monitor.activityCount == 1)
        center.post(name: .transferTaskDidComplete, object: second)
        #expect(monitor.activityCount == 0)

        clock.advance(by: 1)
        center.post(name: .transferTaskDidResume, object: "not a task")
        #expect(monitor.activityCount == 0)
    }

    @Test("several sources are counted, a filter excludes tasks, and stopping ends counting")
    func severalSourcesAndFilter() {
        let centerA = NotificationCenter()
        let centerB = NotificationCenter()
        let monitor = ActivityMonitor(scheduler: ManualActivityScheduler(), observing: nil)
        let excluded = CountedTask()
        let excludedID = ObjectIdentifier(excluded)
        monitor.observe(centerA)
        let tokenB = monitor.observe(centerB, where: { ObjectIdentifier($0) != excludedID })

        centerA.post(name: .transferTaskDidResume, object: CountedTask())
        centerB.post(name: .transferTaskDidResume, object: CountedTask())
        centerB.post(name: .transferTaskDidResume, object: excluded)
        #expect(monitor.activityCount == 2)

        tokenB.cancel()
        centerB.post(name: .transferTaskDidResume, object: CountedTask())
        #expect(monitor.activityCount == 2)

        monitor.stopObserving()
        centerA.post(name: .transferTaskDidResume, object: CountedTask())
        #expect(monitor.activityCount == 2)
    }

    @Test("concurrent starts and stops from many threads end at zero and inactive")
    func threadSafety() {
        let (monitor, clock, log) = makeMonitor()
        let tasks = (0..<64).map { _ in CountedTask() }

        DispatchQueue.concurrentPerform(iterations: tasks.count) { index in
            monitor.taskDidStart(tasks[index])
            monitor.incrementActivityCount()
        }
        #expect(monitor.activityCount == 128)
        clock.advance(by: 1)
        DispatchQueue.concurrentPerform(iterations: tasks.count) { index in
            monitor.taskDidStop(tasks[index])
            monitor.decrementActivityCount()
        }
        clock.advance(by: 1)

        #expect(monitor.activityCount == 0)
        #expect(!monitor.isActive)
        #expect(log.all == [true, false])
    }
}

@Suite("Activity schedulers")
struct ActivitySchedulerTests {
    @Test("the manual scheduler runs actions in due order, including ones scheduled while advancing")
    func manualOrder() {
        let clock = ManualActivityScheduler()
        let order = Locked<[String]>([])
        _ = clock.schedule(after: 2) { order.withLock { $0.append("b") } }
        _ = clock.schedule(after: 1) {
            order.withLock { $0.append("a") }
            _ = clock.schedule(after: 0.5) { order.withLock { $0.append("a+0.5") } }
        }
        let cancelled = clock.schedule(after: 1.2) { order.withLock { $0.append("cancelled") } }
        cancelled.cancel()

        clock.advance(by: 3)

        #expect(order.withLock { $0 } == ["a", "a+0.5", "b"])
        #expect(clock.now == 3)
    }

    @Test("the dispatch scheduler runs an action and skips a cancelled one")
    func dispatchScheduler() {
        let scheduler = DispatchActivityScheduler()
        let ran = Locked<[String]>([])
        let done = DispatchSemaphore(value: 0)

        let cancelled = scheduler.schedule(after: 0.01) { ran.withLock { $0.append("cancelled") } }
        cancelled.cancel()
        _ = scheduler.schedule(after: 0.05) {
            ran.withLock { $0.append("ran") }
            done.signal()
        }

        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(ran.withLock { $0 } == ["ran"])
    }
}
