import Foundation
import Transfer

extension Notification.Name {
    /// A task was resumed (object: the task).
    public static let transferTaskDidResume = TransferNotifications.named("transfer.task.didResume")
    /// A task was suspended (object: the task).
    public static let transferTaskDidSuspend = TransferNotifications.named("transfer.task.didSuspend")
    /// A task completed (object: the task; userInfo: see ``TransferNotificationKey``).
    /// A request of `SessionManager.data(for:)` or of the batch API that ran
    /// without a task posts it too, with no object (see ``TransferNotifications``).
    ///
    /// The first use of this name by an observer is what makes those requests
    /// post: until then the fast path pays one atomic load for it.
    public static let transferTaskDidComplete = TransferNotifications.completionNamed()
    /// A session was invalidated (object: the session manager).
    public static let transferSessionDidInvalidate = TransferNotifications.named("transfer.session.didInvalidate")
    /// A download was moved to its destination (object: the task).
    public static let transferDownloadDidMoveFile = TransferNotifications.named("transfer.download.didMoveFile")
    /// Moving a download to its destination failed (object: the task; userInfo error).
    public static let transferDownloadDidFailToMoveFile = TransferNotifications.named(
        "transfer.download.didFailToMoveFile")
    /// A `NetworkReachability` monitor saw its status change (object: the
    /// monitor; userInfo: `NetworkReachability.statusUserInfoKey` holds the
    /// new `ReachabilityStatus`). Posted on the monitor's queue.
    public static let transferReachabilityDidChange = TransferNotifications.named("transfer.reachability.didChange")
}

/// Keys of the userInfo of `Notification.Name.transferTaskDidComplete`,
/// as AFNetworking's AFNetworkingTaskDidComplete*Key.
public enum TransferNotificationKey {
    /// The response serializer used (AFNetworking's `AFNetworkingTaskDidCompleteResponseSerializerKey`).
    public static let responseSerializer = TransferEventKey.responseSerializer
    /// The response body (`AFNetworkingTaskDidCompleteResponseDataKey`).
    public static let responseData = TransferEventKey.responseData
    /// The serialized response (`AFNetworkingTaskDidCompleteSerializedResponseKey`).
    public static let serializedResponse = TransferEventKey.serializedResponse
    /// The `TransferError`, if the task failed (`AFNetworkingTaskDidCompleteErrorKey`).
    public static let error = TransferEventKey.error
    /// The downloaded file's URL (`AFNetworkingTaskDidCompleteAssetPathKey`).
    public static let assetPath = TransferEventKey.assetPath
    /// The task's `TaskMetrics` (`AFNetworkingTaskDidCompleteSessionTaskMetrics`).
    public static let metrics = TransferEventKey.metrics
    /// The `HTTPResponse`.
    public static let response = TransferEventKey.response
    /// The `Request` as sent: set on the completions of requests that ran
    /// without a task (the notification has no object then).
    public static let request = TransferEventKey.request
}
