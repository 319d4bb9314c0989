import Dispatch
import FoundationEssentials

// The end of every task, fanned out: monitors and the logger, hooks and the
// delegate, the completion handlers (raw, then serialized off the delegate
// queue), the notification, then the async waiter.

extension SessionManager {
    /// Once per task, on the delegate queue: hooks, delegate, notification,
    /// completion handler (queued), then the async waiter.
    ///
    /// A data task that became a download gets no `taskDidComplete` hook or
    /// delegate call (as with URLSession, those went to the download task);
    /// its notification, observers, completion handler and waiter still run.
    func taskDidComplete(_ task: TransferTask, error: TransferError?, outcome: Outcome?, waiter: (any TaskWaiter)?) {
        let handedOver = !(task is DownloadTask) && error?.downloadTask != nil
        announceCompletion(of: task, metrics: outcome?.metrics, error: error, handedOver: handedOver)

        var userInfo: [String: Any] = [:]
        if let error { userInfo[TransferEventKey.error] = error }
        if let metrics = outcome?.metrics { userInfo[TransferEventKey.metrics] = metrics }
        if let response = task.response { userInfo[TransferEventKey.response] = response }

        // Out of the task lists before anyone hears of the completion.
        forget(task)
        if let data = task as? DataTask {
            data.callCompletion(error: error, hasWaiter: waiter != nil)
            if let body = data.resultData { userInfo[TransferEventKey.responseData] = body }
            // The response serializer (AF's) runs off this queue; it queues
            // the serialized handler, posts the notification, then wakes the waiter.
            data.deliverSerialized(error: error, userInfo: userInfo, waiter: waiter)
            return
        } else {
            userInfo[TransferEventKey.responseSerializer] = responseSerializer
            if let download = task as? DownloadTask {
                download.callCompletion(error: error)
                if let url = download.fileURL {
                    userInfo[TransferEventKey.assetPath] = url
                    // As AF: a download's serialized response is its file.
                    userInfo[TransferEventKey.serializedResponse] = url
                }
            }
            // As AF: posted after the completion handler was queued.
            postNotification(.taskDidComplete, task: task, userInfo: userInfo)
        }
        waiter?.taskDidComplete(task, error: error)
    }

    /// The observers' part of a task's end, on the delegate queue: monitors
    /// and the logger, the request instruments, then hooks and the delegate.
    /// Every kind of task comes through here (a segmented download too).
    ///
    /// - Parameters:
    ///   - handedOver: A data task that became a download: no monitor, hook
    ///     or delegate completion (they went to the download task).
    ///   - asRequest: Report the task to `.completion` monitors as one
    ///     request; false for a task whose wire requests were reported each.
    func announceCompletion(of task: TransferTask, metrics: TaskMetrics?, error: TransferError?,
                            handedOver: Bool = false, asRequest: Bool = true)
    {
        let (hooks, delegate) = state.withLock { ($0.hooks, $0.delegate) }
        if !handedOver { observation.taskDidComplete(task, metrics: metrics, error: error, asRequest: asRequest) }
        if !task.requestObservers.isEmpty {
            let completed = CompletedRequest(request: task.originalRequest, response: task.response,
                                             metrics: metrics, error: error,
                                             taskIdentifier: task.taskIdentifier)
            for observer in task.requestObservers { observer.requestDidComplete(completed) }
        }
        if let metrics {
            hooks.taskDidFinishCollectingMetrics?(self, task, metrics)
            delegate?.session(self, task: task, didFinishCollecting: metrics)
        }
        if !handedOver {
            hooks.taskDidComplete?(self, task, error)
            delegate?.session(self, task: task, didCompleteWithError: error)
        }
    }

    /// Runs `body` on the completion queue, inside the completion group.
    func runCompletion(_ body: @escaping @Sendable () -> Void) {
        let (queue, group) = state.withLock { ($0.completionQueue, $0.completionGroup) }
        (queue ?? Self.defaultCompletionQueue).async(group: group, execute: body)
    }

    /// Where response serializers run: concurrent (JSON from many tasks is
    /// parsed at once), never the serial delegate queue; inside the
    /// completion group, since a serialized handler follows.
    func runSerialization(_ body: @escaping @Sendable () -> Void) {
        let group = state.withLock { $0.completionGroup }
        Self.serializationQueue.async(group: group, execute: body)
    }

    private static let serializationQueue = DispatchQueue(label: "transfer.serialization", attributes: .concurrent)

    func postTaskNotification(_ event: TransferEvent, task: TransferTask) {
        postNotification(event, task: task, userInfo: [:])
    }

    /// - Parameter fromAnyQueue: Post on the calling thread (a task's last
    ///   notification, after serialization); otherwise from the delegate queue.
    func postNotification(_ event: TransferEvent, task: TransferTask, userInfo: [String: Any],
                          fromAnyQueue: Bool = false)
    {
        // Nobody listens (TransferFoundation's notifications unused, no
        // process-wide ActivityMonitor): no hop.
        guard TransferEvents.hasTaskAudience else { return }
        // Reporting from the delegate queue keeps notifications in the order
        // of the events they describe.
        let info = UncheckedUserInfo(value: userInfo)
        let post: @Sendable () -> Void = { TransferEvents.report(event, object: task, userInfo: info.value) }
        if fromAnyQueue || DispatchQueue.getSpecific(key: queueKey) != nil {
            post()
        } else {
            delegateQueue.async(execute: post)
        }
    }
}
