import Foundation

/// One object instead of many closures: the delegate methods of
/// URLSession/AFURLSessionManager. Every method has a default that does
/// nothing (or the default disposition). Called on the manager's
/// `delegateQueue`, after the matching ``SessionHooks`` closure.
public protocol SessionDelegate: AnyObject, Sendable {
    /// Whether data tasks should deliver body chunks to
    /// `session(_:dataTask:didReceive:)` (default false: bodies stay in C
    /// until completion).
    var wantsDataChunks: Bool { get }
    /// Whether server-trust challenges go to
    /// `session(_:didReceive:)` (default false: a delegate that does not
    /// answer them costs new TLS connections nothing, and a busy delegate
    /// queue cannot hold handshakes up).
    var wantsServerTrustChallenges: Bool { get }
    func session(_ session: SessionManager, didBecomeInvalidWithError error: TransferError?)
    func session(_ session: SessionManager, task: TransferTask, didCompleteWithError error: TransferError?)
    func session(_ session: SessionManager, task: TransferTask, didFinishCollecting metrics: TaskMetrics)
    func session(_ session: SessionManager, task: TransferTask, didReceive challenge: AuthenticationChallenge)
        -> ChallengeDisposition
    /// Server-trust challenges (URLSession's session-level challenge), when
    /// no challenge hook is set and ``wantsServerTrustChallenges`` is true.
    /// Then every new TLS connection asks it, on the delegate queue, bounded
    /// by ``SessionConfiguration/serverTrustChallengeTimeout``.
    func session(_ session: SessionManager, didReceive challenge: AuthenticationChallenge) -> ChallengeDisposition
    func session(_ session: SessionManager, task: TransferTask, willPerformRedirection response: HTTPResponse,
                 newRequest: Request) -> Request?
    func session(_ session: SessionManager, task: TransferTask, didSendBodyData bytesSent: Int64,
                 totalBytesSent: Int64, totalBytesExpectedToSend: Int64)
    func session(_ session: SessionManager, dataTask: DataTask, didReceive response: HTTPResponse) -> ResponseDisposition
    func session(_ session: SessionManager, dataTask: DataTask, didReceive data: Data)
    func session(_ session: SessionManager, dataTask: DataTask, didBecome downloadTask: DownloadTask)
    func session(_ session: SessionManager, downloadTask: DownloadTask, didFinishDownloadingTo location: URL)
    func session(_ session: SessionManager, downloadTask: DownloadTask, didWriteData bytesWritten: Int64,
                 totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64)
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
