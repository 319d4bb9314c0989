import Dispatch
import Foundation
import Transfer

extension NetworkReachability {
    /// Creates a monitor whose changes are posted as
    /// `Notification.Name.transferReachabilityDidChange` on `notificationCenter`
    /// (on the monitor's queue, after the change handler); nothing happens
    /// until `startMonitoring()`.
    ///
    /// - Parameters:
    ///   - target: What to watch; the default route by default.
    ///   - queue: A serial queue for evaluations, the change handler and the
    ///     notification; a private one by default.
    ///   - notificationCenter: Where `Notification.Name.transferReachabilityDidChange` is posted.
    public convenience init(
        target: Target = .defaultRoute, queue: DispatchQueue? = nil, notificationCenter: NotificationCenter
    ) {
        let center = UncheckedCenter(value: notificationCenter)
        let name = Notification.Name.transferReachabilityDidChange
        self.init(target: target, queue: queue) { monitor, status in
            center.value.post(name: name, object: monitor, userInfo: [NetworkReachability.statusUserInfoKey: status])
        }
    }
}

/// A notification center captured by a monitor's announcer. @unchecked
/// Sendable: NotificationCenter is thread-safe.
private struct UncheckedCenter: @unchecked Sendable {
    let value: NotificationCenter
}
