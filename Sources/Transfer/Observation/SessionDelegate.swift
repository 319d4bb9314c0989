import FoundationEssentials

/// One object instead of many closures: the delegate methods of
/// URLSession/AFURLSessionManager. Every method has a default that does
/// nothing (or the default disposition). Called on the manager's
/// `delegateQueue`, after the matching ``SessionHooks`` closure.
public protocol SessionDelegate: AnyObject, Sendable {
    /// Whether data tasks should deliver body chunks to
    /// `session(_:dataTask:didReceive:)` (default false: bodies stay in C
    /// until completion). When true the chunks are the only copy: the
    /// completion gets empty `Data()` unless
    /// ``SessionConfiguration/accumulatesStreamedBody`` is set.
    var wantsDataChunks: Bool { get }
    /// Whether server-trust challenges go to
    /// `session(_:didReceive:)` (default false: a delegate that does not
    /// answer them costs new TLS connections nothing, and a busy delegate
    /// queue cannot hold handshakes up).
    var wantsServerTrustChallenges: Bool { get }
    /// The session was invalidated and its last task has ended; called once.
    /// `error` is nil (invalidation is always asked for, as with
    /// ``SessionManager/finishTasksAndInvalidate()``).
    func session(_ session: SessionManager, didBecomeInvalidWithError error: TransferError?)
    /// The task finished: `error` nil on success, else why (any ``TransferError/Code``).
    func session(_ session: SessionManager, task: TransferTask, didCompleteWithError error: TransferError?)
    /// The task's ``TaskMetrics``, just before its completion.
    func session(_ session: SessionManager, task: TransferTask, didFinishCollecting metrics: TaskMetrics)
    /// A 401 for this task (and server trust when the session-level method
    /// is not asked). Return what to do; see ``ChallengeDisposition``.
    func session(_ session: SessionManager, task: TransferTask, didReceive challenge: AuthenticationChallenge)
        -> ChallengeDisposition
    /// Server-trust challenges (URLSession's session-level challenge), when
    /// no challenge hook is set and ``wantsServerTrustChallenges`` is true.
    /// Then every new TLS connection asks it, on the delegate queue, bounded
    /// by ``SessionConfiguration/serverTrustChallengeTimeout``.
    func session(_ session: SessionManager, didReceive challenge: AuthenticationChallenge) -> ChallengeDisposition
    /// A redirect: return the request to follow (possibly changed), or nil
    /// to refuse it (the task then completes with the 3xx response).
    func session(_ session: SessionManager, task: TransferTask, willPerformRedirection response: HTTPResponse,
                 newRequest: Request) -> Request?
    /// Upload progress: bytes since the last call, total sent, total expected (-1 unknown).
    func session(_ session: SessionManager, task: TransferTask, didSendBodyData bytesSent: Int64,
                 totalBytesSent: Int64, totalBytesExpectedToSend: Int64)
    /// The response head of a data task: allow it, cancel the task, or
    /// turn it into a download.
    func session(_ session: SessionManager, dataTask: DataTask, didReceive response: HTTPResponse) -> ResponseDisposition
    /// A chunk of a data task's body, in order; only when ``wantsDataChunks``.
    func session(_ session: SessionManager, dataTask: DataTask, didReceive data: Data)
    /// A data task continued as `downloadTask` after `.becomeDownload`.
    func session(_ session: SessionManager, dataTask: DataTask, didBecome downloadTask: DownloadTask)
    /// A download finished at `location`, a temporary file you may move
    /// before this returns.
    func session(_ session: SessionManager, downloadTask: DownloadTask, didFinishDownloadingTo location: URL)
    /// Download progress: bytes since the last call, total written, total expected (-1 unknown).
    func session(_ session: SessionManager, downloadTask: DownloadTask, didWriteData bytesWritten: Int64,
                 totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64)
    /// A download resumed from resume data at `fileOffset`.
    func session(_ session: SessionManager, downloadTask: DownloadTask, didResumeAtOffset fileOffset: Int64,
                 expectedTotalBytes: Int64)
}

extension SessionDelegate {
    public var wantsDataChunks: Bool { false }
    public var wantsServerTrustChallenges: Bool { false }
    public func session(_ session: SessionManager, didBecomeInvalidWithError error: TransferError?) {}
    public func session(_ session: SessionManager, task: TransferTask, didCompleteWithError error: TransferError?) {}
    public func session(_ session: SessionManager, task: TransferTask, didFinishCollecting metrics: TaskMetrics) {}
    public func session(_ session: SessionManager, task: TransferTask, didReceive challenge: AuthenticationChallenge)
        -> ChallengeDisposition
    { .performDefaultHandling }
    public func session(_ session: SessionManager, didReceive challenge: AuthenticationChallenge)
        -> ChallengeDisposition
    { .performDefaultHandling }
    public func session(_ session: SessionManager, task: TransferTask, willPerformRedirection response: HTTPResponse,
                        newRequest: Request) -> Request?
    { newRequest }
    public func session(_ session: SessionManager, task: TransferTask, didSendBodyData bytesSent: Int64,
                        totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {}
    public func session(_ session: SessionManager, dataTask: DataTask, didReceive response: HTTPResponse)
        -> ResponseDisposition
    { .allow }
    public func session(_ session: SessionManager, dataTask: DataTask, didReceive data: Data) {}
    public func session(_ session: SessionManager, dataTask: DataTask, didBecome downloadTask: DownloadTask) {}
    public func session(_ session: SessionManager, downloadTask: DownloadTask, didFinishDownloadingTo location: URL) {}
    public func session(_ session: SessionManager, downloadTask: DownloadTask, didWriteData bytesWritten: Int64,
                        totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64) {}
    public func session(_ session: SessionManager, downloadTask: DownloadTask, didResumeAtOffset fileOffset: Int64,
                        expectedTotalBytes: Int64) {}
}
