import Foundation

/// What a data task does after its response head arrived
/// (NSURLSessionResponseDisposition).
public enum ResponseDisposition: Sendable, Hashable {
    case allow
    case cancel
    /// Continue as a download task: the body goes to a file, not to memory.
    case becomeDownload
}

/// What to do with an authentication challenge (NSURLSessionAuthChallengeDisposition).
///
/// For a server-trust challenge, `.useCredential` (any credential) trusts the
/// server whatever the policy decided, `.performDefaultHandling` keeps the
/// policy's decision, and `.cancelAuthenticationChallenge` / `.rejectProtectionSpace`
/// refuse the connection before any request byte is sent.
public enum ChallengeDisposition: Sendable, Hashable {
    case useCredential(Credential)
    case performDefaultHandling
    case cancelAuthenticationChallenge
    case rejectProtectionSpace
}

/// A user/password credential (Basic).
public struct Credential: Sendable, Hashable {
    public var user: String
    public var password: String
    public init(user: String, password: String) {
        self.user = user
        self.password = password
    }
}

/// An authentication challenge: HTTP Basic from a 401, or server trust.
public struct AuthenticationChallenge: Sendable {
    public enum Kind: Sendable, Hashable {
        case httpBasic(realm: String?)
        case serverTrust
    }
    public var kind: Kind
    public var host: String
    public var port: Int
    /// How many times this task was challenged before.
    public var previousFailureCount: Int
    /// The 401 response, for HTTP challenges.
    public var failureResponse: HTTPResponse?
    /// The server's chain and host, for server-trust challenges.
    public var serverTrust: ServerTrust?
    /// What the session's ``SecurityPolicy`` decided, for server-trust challenges;
    /// `.performDefaultHandling` keeps that decision.
    public var policyVerdict: TrustEvaluation?
}

/// Session-level hooks: the closures AFURLSessionManager lets you set for
/// every session, task, data-task and download-task event. All run on the
/// manager's `delegateQueue`, never on the engine thread.
public struct SessionHooks: Sendable {
    public init() {}

    // Session
    public var sessionDidBecomeInvalid: (@Sendable (SessionManager, TransferError?) -> Void)?
    public var sessionDidReceiveChallenge:
        (@Sendable (SessionManager, AuthenticationChallenge) -> ChallengeDisposition)?

    // Task
    public var taskDidReceiveChallenge:
        (@Sendable (SessionManager, TransferTask, AuthenticationChallenge) -> ChallengeDisposition)?
    /// Return the request to follow (possibly changed), or nil to refuse the redirect.
    public var taskWillPerformHTTPRedirection:
        (@Sendable (SessionManager, TransferTask, HTTPResponse, Request) -> Request?)?
    /// A fresh body stream for a streamed upload that must be sent again.
    public var taskNeedNewBodyStream: (@Sendable (SessionManager, TransferTask) -> InputStream?)?
    /// (bytes sent since last call, total sent, total expected)
    public var taskDidSendBodyData: (@Sendable (SessionManager, TransferTask, Int64, Int64, Int64) -> Void)?
    public var taskDidComplete: (@Sendable (SessionManager, TransferTask, TransferError?) -> Void)?
    public var taskDidFinishCollectingMetrics: (@Sendable (SessionManager, TransferTask, TaskMetrics) -> Void)?

    // Data task
    public var dataTaskDidReceiveResponse:
        (@Sendable (SessionManager, DataTask, HTTPResponse) -> ResponseDisposition)?
    public var dataTaskDidBecomeDownloadTask: (@Sendable (SessionManager, DataTask, DownloadTask) -> Void)?
    /// When set, body chunks cross into Swift as they arrive; otherwise none does.
    public var dataTaskDidReceiveData: (@Sendable (SessionManager, DataTask, Data) -> Void)?
    /// Return the response to cache, or nil not to (Transfer has no cache of its
    /// own: the hook lets a caller keep one).
    public var dataTaskWillCacheResponse: (@Sendable (SessionManager, DataTask, HTTPResponse, Data) -> Data?)?

    // Download task
    /// Where to move the finished file (nil: leave it to the task's destination).
    public var downloadTaskDidFinishDownloading: (@Sendable (SessionManager, DownloadTask, URL) -> URL?)?
    /// (bytes written since last call, total written, total expected)
    public var downloadTaskDidWriteData: (@Sendable (SessionManager, DownloadTask, Int64, Int64, Int64) -> Void)?
    /// (offset resumed at, total expected)
    public var downloadTaskDidResume: (@Sendable (SessionManager, DownloadTask, Int64, Int64) -> Void)?
}
