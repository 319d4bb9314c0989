import Foundation

extension Notification.Name {
    /// A task was resumed (object: the task).
    public static let transferTaskDidResume = Notification.Name("transfer.task.didResume")
    /// A task was suspended (object: the task).
    public static let transferTaskDidSuspend = Notification.Name("transfer.task.didSuspend")
    /// A task completed (object: the task; userInfo: see ``TransferNotificationKey``).
    /// A request of ``SessionManager/data(for:)`` or of the batch API that ran
    /// without a task posts it too, with no object (see ``TransferNotifications``).
    ///
    /// The first use of this name by an observer is what makes those requests
    /// post: until then the fast path pays one atomic load for it.
    public static let transferTaskDidComplete = TransferNotifications.referenced(TransferNotifications.didComplete)
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
    /// The ``Request`` as sent: set on the completions of requests that ran
    /// without a task (the notification has no object then).
    public static let request = "transfer.complete.request"
}
