import Dispatch
import Foundation
import Synchronization
import TestSupport
import Transfer
import TransferTerminal

/// A task driven event by event by the test. Events reach observers through
/// `queue.sync`, so when `send`/`setState` return every handler has run.
final class FakeTask: ObservableTransfer {
    private struct Observer<Value>: @unchecked Sendable {
        // @unchecked: handlers are @Sendable closures; the struct only pairs
        // them with their queue and id, and lives inside `inner`'s lock.
        let id: Int
        let direction: ProgressDirection?
        let queue: DispatchQueue
        let handler: @Sendable (Value) -> Void
    }

    private struct Inner: Sendable {
        var state: TaskState
        var progress: [ProgressDirection: TransferProgress] = [:]
        var nextID = 0
        var progressObservers: [Observer<TransferProgress>] = []
        var stateObservers: [Observer<TaskState>] = []
    }

    private let inner: Locked<Inner>

    init(state: TaskState = .running) { inner = Locked(Inner(state: state)) }

    var state: TaskState { inner.withLock { $0.state } }

    func progress(_ direction: ProgressDirection) -> TransferProgress {
        inner.withLock { $0.progress[direction] } ?? TransferProgress(completedUnitCount: 0, totalUnitCount: -1)
    }

    /// Observations not yet cancelled or ended.
    var observerCount: Int { inner.withLock { $0.progressObservers.count + $0.stateObservers.count } }

    func observeProgress(
        _ direction: ProgressDirection, on queue: DispatchQueue,
        _ handler: @escaping @Sendable (TransferProgress) -> Void
    ) -> ObservationToken {
        let id = inner.withLock { inner in
            inner.nextID += 1
            inner.progressObservers.append(
                Observer(id: inner.nextID, direction: direction, queue: queue, handler: handler))
            return inner.nextID
        }
        return ObservationToken { [weak self] in self?.inner.withLock { $0.progressObservers.removeAll { $0.id == id } }
        }
    }

    func observeState(on queue: DispatchQueue, _ handler: @escaping @Sendable (TaskState) -> Void) -> ObservationToken {
        let id = inner.withLock { inner in
            inner.nextID += 1
            inner.stateObservers.append(Observer(id: inner.nextID, direction: nil, queue: queue, handler: handler))
            return inner.nextID
        }
        return ObservationToken { [weak self] in self?.inner.withLock { $0.stateObservers.removeAll { $0.id == id } } }
    }

    /// Reports progress of `direction` to its observers.
    func send(_ completed: Int64, of total: Int64, elapsed: TimeInterval = 1, direction: ProgressDirection = .download)
    {
        let progress = TransferProgress(completedUnitCount: completed, totalUnitCount: total, elapsed: elapsed)
        let observers = inner.withLock { inner in
            inner.progress[direction] = progress
            return inner.progressObservers.filter { $0.direction == direction }
        }
        for observer in observers { observer.queue.sync { observer.handler(progress) } }
    }

    /// Changes the state; `.completed` ends every observation, as real tasks do.
    func setState(_ state: TaskState) {
        let observers = inner.withLock { inner in
            inner.state = state
            let observers = inner.stateObservers
            if state == .completed {
                inner.stateObservers = []
                inner.progressObservers = []
            }
            return observers
        }
        for observer in observers { observer.queue.sync { observer.handler(state) } }
    }
}

/// A hand-driven clock for displays: `DisplayClock` over a manual scheduler's time.
extension ManualActivityScheduler {
    var displayClock: DisplayClock { DisplayClock { [self] in self.now } }
}

/// A task that completes while the binding is registering its observers and,
/// like a real finished task, then accepts observers that never fire.
final class CompletingTask: ObservableTransfer {
    private let completed = Locked(false)

    var state: TaskState { completed.withLock { $0 } ? .completed : .running }

    func progress(_ direction: ProgressDirection) -> TransferProgress {
        completed.withLock { $0 }
            ? TransferProgress(completedUnitCount: 8, totalUnitCount: 8, elapsed: 1)
            : TransferProgress(completedUnitCount: 0, totalUnitCount: 8)
    }

    func observeProgress(
        _ direction: ProgressDirection, on queue: DispatchQueue,
        _ handler: @escaping @Sendable (TransferProgress) -> Void
    ) -> ObservationToken {
        completed.withLock { $0 = true }
        return ObservationToken {}
    }

    func observeState(on queue: DispatchQueue, _ handler: @escaping @Sendable (TaskState) -> Void) -> ObservationToken {
        completed.withLock { $0 = true }
        return ObservationToken {}
    }
}
