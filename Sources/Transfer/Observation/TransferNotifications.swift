import Foundation
import Synchronization

/// Who listens to Transfer's task notifications on `NotificationCenter.default`.
///
/// Posting a notification per request is the most expensive thing the task
/// layer did for requests nobody watched, and NotificationCenter cannot say
/// whether anyone observes a name. So the rule is: requests of
/// ``SessionManager/data(for:)`` and of the batch API, on a session with no
/// hooks and no delegate, post `Notification.Name.transferTaskDidResume`
/// and `Notification.Name.transferTaskDidComplete` only while
/// someone observes through ``observe(_:object:queue:using:)`` (or an
/// ``ActivityMonitor`` on the default center). Tasks made with `dataTask(with:)`,
/// uploads and downloads post them always.
public enum TransferNotifications {
    private static let observers = Atomic<Int>(0)

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
