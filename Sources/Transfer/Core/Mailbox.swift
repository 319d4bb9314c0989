import Dispatch
import Synchronization

/// Work posted from the engine thread to a serial queue, batched: when the
/// loop finishes many transfers in one pass, the queue is woken once and
/// runs them all, in posting order, instead of once per event.
final class Mailbox: Sendable {
    private let queue: DispatchQueue
    private let pending = Mutex<[@Sendable () -> Void]>([])

    init(queue: DispatchQueue) { self.queue = queue }

    func post(_ work: @escaping @Sendable () -> Void) {
        let wasEmpty = pending.withLock { items -> Bool in
            items.append(work)
            return items.count == 1
        }
        if wasEmpty {
            queue.async { [self] in drain() }
        }
    }

    private func drain() {
        while true {
            let batch = pending.withLock { items -> [@Sendable () -> Void] in
                defer { items.removeAll(keepingCapacity: true) }
                return items
            }
            if batch.isEmpty { return }
            for work in batch { work() }
        }
    }
}
