import Foundation
import Synchronization

/// Who listens to Transfer's task notifications on `NotificationCenter.default`.
///
/// Tasks (`dataTask(with:)`, uploads, downloads) post their notifications
/// always, with the task as the object.
///
/// Requests of ``SessionManager/data(for:)`` and of the batch API on a session
/// with no hooks and no delegate run without a task (the fast path). They post
/// `Notification.Name.transferTaskDidComplete` with no object once anything in
/// the process has used that name (an observer must, to observe it): from the
/// session's delegate queue, after the caller was resumed, with the request,
/// the response, the error and the ``TaskMetrics`` in `userInfo` (no body: the
/// caller has it). No opt-in call is needed, and a process that never names
/// the notification pays one atomic load per request for it.
///
/// An observer that needs every request as a task (its notifications with the
/// task as the object, `transferTaskDidResume` too) counts itself through
/// ``observe(_:object:queue:using:)`` or ``beginObserving()`` (an
/// ``ActivityMonitor`` on the default center does): while it is counted,
/// those requests run as tasks.
public enum TransferNotifications {
    private static let observers = Atomic<Int>(0)
    /// Set, once and for good, by the first use of the public completion name.
    private static let completionNamed = Atomic<Bool>(false)

    /// The completion name for the library's own posts: using it does not
    /// count as someone observing.
    static let didComplete = Notification.Name("transfer.task.didComplete")

    /// The public name's initializer: someone named the notification.
    static func referenced(_ name: Notification.Name) -> Notification.Name {
        completionNamed.store(true, ordering: .relaxed)
        return name
    }

    /// Whether requests without a task post their completion.
    static var postsTasklessCompletions: Bool { completionNamed.load(ordering: .relaxed) }

    /// Posts the completion of each request that ran without a task, on `queue`.
    static func postCompletions(_ completions: [CompletedRequest], on queue: DispatchQueue) {
        let batch = UncheckedCompletions(completions)
        queue.async {
            for completed in batch.value {
                var info: [String: Any] = [TransferNotificationKey.request: completed.request]
                if let response = completed.response { info[TransferNotificationKey.response] = response }
                if let error = completed.error { info[TransferNotificationKey.error] = error }
                if let metrics = completed.metrics { info[TransferNotificationKey.metrics] = metrics }
                NotificationCenter.default.post(name: didComplete, object: nil, userInfo: info)
            }
        }
    }

    /// True while someone observes through ``observe(_:object:queue:using:)``.
    public static var isObserved: Bool { observers.load(ordering: .relaxed) > 0 }

    /// Observes `name` on `NotificationCenter.default`, and makes every request
    /// post its task notifications until the token is cancelled.
    ///
    /// - Returns: A token; cancel it to stop observing.
    public static func observe(_ name: Notification.Name, object: AnyObject? = nil, queue: OperationQueue? = nil,
                               using handler: @escaping @Sendable (Notification) -> Void) -> ObservationToken
    {
        beginObserving()
        let observer = UncheckedObserver(NotificationCenter.default.addObserver(forName: name, object: object,
                                                                                 queue: queue, using: handler))
        return ObservationToken {
            NotificationCenter.default.removeObserver(observer.value)
            endObserving()
        }
    }

    /// Counts an observer of the task notifications that registered with
    /// NotificationCenter itself; balance with ``endObserving()``.
    public static func beginObserving() { observers.add(1, ordering: .relaxed) }

    /// Ends what one ``beginObserving()`` began; requests stop posting task
    /// notifications once no observer is left.
    public static func endObserving() { observers.subtract(1, ordering: .relaxed) }
}

/// A NotificationCenter observer token. @unchecked Sendable: only handed
/// back to the (thread-safe) center, once, by ``ObservationToken``.
private struct UncheckedObserver: @unchecked Sendable {
    let value: any NSObjectProtocol
    init(_ value: any NSObjectProtocol) { self.value = value }
}

/// Completions handed to the delegate queue. @unchecked Sendable: built on
/// the loop thread and read once on the queue; `CompletedRequest` holds only
/// values.
private struct UncheckedCompletions: @unchecked Sendable {
    let value: [CompletedRequest]
    init(_ value: [CompletedRequest]) { self.value = value }
}
