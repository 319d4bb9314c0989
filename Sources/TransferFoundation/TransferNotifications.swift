import Foundation
import Transfer

/// Who listens to Transfer's task notifications on `NotificationCenter.default`.
///
/// The notifications live in TransferFoundation: the core reports its events
/// to an adapter that this module installs the first time one of its
/// notification names (or ``observe(_:object:queue:using:)``) is used, and
/// the adapter posts them on `NotificationCenter.default`. Until then the core
/// posts nothing and pays one atomic load per event.
///
/// Tasks (`dataTask(with:)`, uploads, downloads) post their notifications
/// always, with the task as the object.
///
/// Requests of `SessionManager.data(for:)` and of the batch API on a session
/// with no hooks and no delegate run without a task (the fast path). They post
/// `Notification.Name.transferTaskDidComplete` with no object once anything in
/// the process has used that name (an observer must, to observe it): from the
/// session's delegate queue, after the caller was resumed, with the request,
/// the response, the error and the `TaskMetrics` in `userInfo` (no body: the
/// caller has it). No opt-in call is needed, and a process that never names
/// the notification pays one atomic load per request for it.
///
/// An observer that needs every request as a task (its notifications with the
/// task as the object, `transferTaskDidResume` too) counts itself through
/// ``observe(_:object:queue:using:)`` or ``beginObserving()`` (an
/// `ActivityMonitor` counts itself too): while it is counted,
/// those requests run as tasks.
public enum TransferNotifications {
    /// The completion name for the library's own posts: using it does not
    /// count as someone naming the public one.
    static let didComplete = Notification.Name("transfer.task.didComplete")
    static let didResume = Notification.Name("transfer.task.didResume")
    static let didSuspend = Notification.Name("transfer.task.didSuspend")
    static let sessionDidInvalidate = Notification.Name("transfer.session.didInvalidate")
    static let downloadDidMoveFile = Notification.Name("transfer.download.didMoveFile")
    static let downloadDidFailToMoveFile = Notification.Name("transfer.download.didFailToMoveFile")
    static let reachabilityDidChange = Notification.Name("transfer.reachability.didChange")

    /// Posts the core's reports on `NotificationCenter.default`, on the reporting thread.
    private static let adapter = TransferEventAdapter { event, object, userInfo in
        NotificationCenter.default.post(name: name(of: event), object: object, userInfo: userInfo)
    }

    private static func name(of event: TransferEvent) -> Notification.Name {
        switch event {
        case .taskDidResume: return didResume
        case .taskDidSuspend: return didSuspend
        case .taskDidComplete: return didComplete
        case .sessionDidInvalidate: return sessionDidInvalidate
        case .downloadDidMoveFile: return downloadDidMoveFile
        case .downloadDidFailToMoveFile: return downloadDidFailToMoveFile
        case .reachabilityDidChange: return reachabilityDidChange
        }
    }

    /// Makes the core post its events on `NotificationCenter.default` from now on.
    static func installAdapter() { TransferEvents.install(adapter) }

    /// A public name's initializer: the core starts posting.
    static func named(_ raw: String) -> Notification.Name {
        installAdapter()
        return Notification.Name(raw)
    }

    /// The public completion name's initializer: someone named the notification.
    static func completionNamed() -> Notification.Name {
        installAdapter()
        TransferEvents.completionNameReferenced()
        return didComplete
    }

    /// True while someone observes through ``observe(_:object:queue:using:)``
    /// (or another counted observer, such as an `ActivityMonitor`).
    public static var isObserved: Bool { TransferEvents.isObserved }

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
    public static func beginObserving() {
        installAdapter()
        TransferEvents.beginObserving()
    }

    /// Ends what one ``beginObserving()`` began; requests stop posting task
    /// notifications once no observer is left.
    public static func endObserving() { TransferEvents.endObserving() }
}

/// A NotificationCenter observer token. @unchecked Sendable: only handed
/// back to the (thread-safe) center, once, by `ObservationToken`.
private struct UncheckedObserver: @unchecked Sendable {
    let value: any NSObjectProtocol
    init(_ value: any NSObjectProtocol) { self.value = value }
}
