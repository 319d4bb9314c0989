import Foundation

extension Notification.Name {
    /// A task was resumed (object: the task).
    public static let transferTaskDidResume = Notification.Name("transfer.task.didResume")
    /// A task was suspended (object: the task).
    public static let transferTaskDidSuspend = Notification.Name("transfer.task.didSuspend")
    /// A task completed (object: the task; userInfo: see ``TransferNotificationKey``).
    public static let transferTaskDidComplete = Notification.Name("transfer.task.didComplete")
    /// A session was invalidated (object: the session manager).
    public static let transferSessionDidInvalidate = Notification.Name("transfer.session.didInvalidate")
    /// A download was moved to its destination (object: the task).
    public static let transferDownloadDidMoveFile = Notification.Name("transfer.download.didMoveFile")
    /// Moving a download to its destination failed (object: the task; userInfo error).
    public static let transferDownloadDidFailToMoveFile = Notification.Name("transfer.download.didFailToMoveFile")
}

/// Keys of the userInfo of `Notification.Name.transferTaskDidComplete`,
/// as AFNetworking's AFNetworkingTaskDidComplete*Key.
public enum TransferNotificationKey {
    /// The response serializer used (AFNetworking's `AFNetworkingTaskDidCompleteResponseSerializerKey`).
    public static let responseSerializer = "transfer.complete.responseSerializer"
    /// The response body (`AFNetworkingTaskDidCompleteResponseDataKey`).
    public static let responseData = "transfer.complete.responseData"
    /// The serialized response (`AFNetworkingTaskDidCompleteSerializedResponseKey`).
    public static let serializedResponse = "transfer.complete.serializedResponse"
    /// The ``TransferError``, if the task failed (`AFNetworkingTaskDidCompleteErrorKey`).
    public static let error = "transfer.complete.error"
    /// The downloaded file's URL (`AFNetworkingTaskDidCompleteAssetPathKey`).
    public static let assetPath = "transfer.complete.assetPath"
    /// The task's ``TaskMetrics`` (`AFNetworkingTaskDidCompleteSessionTaskMetrics`).
    public static let metrics = "transfer.complete.metrics"
    /// The ``HTTPResponse``.
    public static let response = "transfer.complete.response"
}
