import Dispatch
import Synchronization

// The seam between the core and NotificationCenter (issue 27, item 4). The
// core reports what it used to post on `NotificationCenter.default` to one
// process-wide adapter, published once and for good by TransferFoundation the
// first time a notification name (or an observing call) is used; without it,
// a report costs one atomic load. The core's own listeners of task events
// (``ActivityMonitor``'s process-wide count) are served here too, so they need
// no NotificationCenter.

/// What the core reports: the notifications of TransferFoundation, by meaning.
package enum TransferEvent: Sendable {
    case taskDidResume
    case taskDidSuspend
    case taskDidComplete
    case sessionDidInvalidate
    case downloadDidMoveFile
    case downloadDidFailToMoveFile
    case reachabilityDidChange
}

/// The userInfo keys of the reports (TransferFoundation's `TransferNotificationKey` names them publicly).
package enum TransferEventKey {
    package static let responseSerializer = "transfer.complete.responseSerializer"
    package static let responseData = "transfer.complete.responseData"
    package static let serializedResponse = "transfer.complete.serializedResponse"
    package static let error = "transfer.complete.error"
    package static let assetPath = "transfer.complete.assetPath"
    package static let metrics = "transfer.complete.metrics"
    package static let response = "transfer.complete.response"
    package static let request = "transfer.complete.request"
    package static let reachabilityStatus = "transfer.reachability.status"
}

/// Where reports go once installed: TransferFoundation's poster to
/// `NotificationCenter.default`. Called on the thread that reports (the
/// session's delegate queue, a serializer's thread, a monitor's queue).
package final class TransferEventAdapter: Sendable {
    let post: @Sendable (TransferEvent, AnyObject?, [String: Any]) -> Void

    package init(post: @escaping @Sendable (TransferEvent, AnyObject?, [String: Any]) -> Void) {
        self.post = post
    }
}

/// A core listener of the task events (object: the task), synchronous on the reporting thread.
private struct TaskEventListener {
    let id: Int
    let handler: @Sendable (TransferEvent, AnyObject) -> Void
}

/// The process-wide state of the seam.
package enum TransferEvents {
    private static let adapter = AtomicLazyReference<TransferEventAdapter>()
    private static let listenerCount = Atomic<Int>(0)
    private static let listeners = Protected<(next: Int, all: [TaskEventListener])>((0, []))
    /// Counted observers that want every request as a task.
    private static let observers = Atomic<Int>(0)
    /// Set, once and for good, by the first use of the public completion name.
    private static let completionNamed = Atomic<Bool>(false)

    /// Publishes the adapter; the first one installed stays.
    package static func install(_ candidate: TransferEventAdapter) {
        _ = adapter.storeIfNil(candidate)
    }

    /// Whether anything would hear a task event now.
    static var hasTaskAudience: Bool {
        adapter.load() != nil || listenerCount.load(ordering: .relaxed) > 0
    }

    /// Reports `event` to the adapter and, for task events with a task, to the core's listeners.
    static func report(_ event: TransferEvent, object: AnyObject?, userInfo: [String: Any] = [:]) {
        adapter.load()?.post(event, object, userInfo)
        guard let object, listenerCount.load(ordering: .relaxed) > 0 else { return }
        switch event {
        case .taskDidResume, .taskDidSuspend, .taskDidComplete:
            for listener in listeners.withLock({ $0.all }) { listener.handler(event, object) }
        default:
            break
        }
    }

    /// Adds a listener of task resume/suspend/complete reports until the token is cancelled.
    static func listen(_ handler: @escaping @Sendable (TransferEvent, AnyObject) -> Void) -> ObservationToken {
        let id = listeners.withLock { state in
            state.next += 1
            state.all.append(TaskEventListener(id: state.next, handler: handler))
            return state.next
        }
        listenerCount.add(1, ordering: .relaxed)
        // The token runs this once.
        return ObservationToken {
            listeners.withLock { $0.all.removeAll { $0.id == id } }
            listenerCount.subtract(1, ordering: .relaxed)
        }
    }

    /// The public completion name was used: requests without a task post their completion from now on.
    package static func completionNameReferenced() {
        completionNamed.store(true, ordering: .relaxed)
    }

    /// Whether requests without a task post their completion.
    package static var postsTasklessCompletions: Bool { completionNamed.load(ordering: .relaxed) }

    /// True while a counted observer wants every request as a task.
    package static var isObserved: Bool { observers.load(ordering: .relaxed) > 0 }

    /// Counts an observer that wants every request as a task.
    package static func beginObserving() { observers.add(1, ordering: .relaxed) }

    /// Ends what one ``beginObserving()`` began.
    package static func endObserving() { observers.subtract(1, ordering: .relaxed) }

    /// Reports the completion of each request that ran without a task, on `queue`.
    static func postCompletions(_ completions: [CompletedRequest], on queue: DispatchQueue) {
        guard let installed = adapter.load() else { return }
        let batch = UncheckedCompletions(completions)
        queue.async {
            for completed in batch.value {
                var info: [String: Any] = [TransferEventKey.request: completed.request]
                if let response = completed.response { info[TransferEventKey.response] = response }
                if let error = completed.error { info[TransferEventKey.error] = error }
                if let metrics = completed.metrics { info[TransferEventKey.metrics] = metrics }
                installed.post(.taskDidComplete, nil, info)
            }
        }
    }
}

/// Completions handed to the delegate queue. @unchecked Sendable: built on
/// the loop thread and read once on the queue; `CompletedRequest` holds only
/// values.
private struct UncheckedCompletions: @unchecked Sendable {
    let value: [CompletedRequest]
    init(_ value: [CompletedRequest]) { self.value = value }
}
