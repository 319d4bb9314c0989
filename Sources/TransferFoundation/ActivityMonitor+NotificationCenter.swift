import Dispatch
import Foundation
import Synchronization
import Transfer

// ActivityMonitor's NotificationCenter sources: the core monitor counts the
// process's tasks through the core's event seam; these count the task
// notifications of any center (tests post their own on a private one).

extension ActivityMonitor {
    /// Creates a monitor that counts the task notifications of `center`
    /// right away (nil: nothing until a source is added).
    ///
    /// - Parameters:
    ///   - activationDelay: How long activity must last before `isActive` turns true.
    ///   - completionDelay: How long idleness must last before `isActive` turns false.
    ///   - scheduler: The clock for both delays; a dispatch queue by default.
    ///   - center: A notification center to count tasks from right away (nil: none yet).
    public convenience init(
        activationDelay: TimeInterval = ActivityMonitor.defaultActivationDelay,
        completionDelay: TimeInterval = ActivityMonitor.defaultCompletionDelay,
        scheduler: any ActivityScheduler = DispatchActivityScheduler(),
        observing center: NotificationCenter?
    ) {
        self.init(activationDelay: activationDelay, completionDelay: completionDelay, scheduler: scheduler,
                  countingProcessTasks: false)
        if let center { observe(center) }
    }

    /// Counts the tasks announced on `center` (task notifications whose object
    /// is an `ObservableTransfer`), optionally only those `include` accepts.
    /// Call it once per source; cancel the token to stop counting that source.
    @discardableResult
    public func observe(
        _ center: NotificationCenter,
        where include: (@Sendable (any ObservableTransfer) -> Bool)? = nil
    ) -> ObservationToken {
        let names: [(Notification.Name, Bool)] = [
            (.transferTaskDidResume, true), (.transferTaskDidSuspend, false), (.transferTaskDidComplete, false),
        ]
        let registrations = names.map { name, starts in
            NotificationRegistration(center: center, name: name) { [weak self] notification in
                guard let task = notification.object as? any ObservableTransfer else { return }
                if let include, !include(task) { return }
                if starts { self?.taskDidStart(task) } else { self?.taskDidStop(task) }
            }
        }
        let token = ObservationToken { for registration in registrations { registration.remove() } }
        addSource(token)
        return token
    }
}

/// One block observer on a notification center. `@unchecked Sendable`:
/// the opaque observer token is only handed back to the (thread-safe)
/// center, once, guarded by `removed`.
private final class NotificationRegistration: @unchecked Sendable {
    private let center: NotificationCenter
    private let observer: any NSObjectProtocol
    private let removed = Atomic<Bool>(false)

    init(center: NotificationCenter, name: Notification.Name, handler: @escaping @Sendable (Notification) -> Void) {
        self.center = center
        // queue nil: the handler runs synchronously on the posting thread.
        self.observer = center.addObserver(forName: name, object: nil, queue: nil, using: handler)
        // Requests on the fast path post only while someone listens.
        if center === NotificationCenter.default { TransferNotifications.beginObserving() }
    }

    func remove() {
        if !removed.exchange(true, ordering: .acquiringAndReleasing) {
            center.removeObserver(observer)
            if center === NotificationCenter.default { TransferNotifications.endObserving() }
        }
    }

    deinit { remove() }
}
