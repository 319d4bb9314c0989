import Dispatch
import Synchronization

/// Work posted from the engine thread to a serial queue, batched: events
/// queued during one pass of the event loop are handed over when the pass
/// ends (``flush()``), waking the queue once instead of once per event.
final class Mailbox: Sendable {
    private let queue: DispatchQueue
    private let state = Protected<State>(State())

    private struct State {
        var items: [@Sendable () -> Void] = []
        var scheduled = false
    }

    init(queue: DispatchQueue) { self.queue = queue }

    /// Queues `work`; it runs after the next ``flush()``, in posting order.
    func post(_ work: @escaping @Sendable () -> Void) {
        state.withLock { $0.items.append(work) }
    }

    /// Schedules one drain of everything posted so far (if not already scheduled).
    func flush() {
        let schedule = state.withLock { state -> Bool in
            guard !state.items.isEmpty, !state.scheduled else { return false }
            state.scheduled = true
            return true
        }
        if schedule {
            queue.async { [self] in drain() }
        }
    }

    private func drain() {
        while true {
            let batch = state.withLock { state -> [@Sendable () -> Void] in
                if state.items.isEmpty {
                    state.scheduled = false
                    return []
                }
                defer { state.items.removeAll(keepingCapacity: true) }
                return state.items
            }
            if batch.isEmpty { return }
            for work in batch { work() }
        }
    }
}
