import FoundationEssentials

/// What a data task does after its response head arrived
/// (NSURLSessionResponseDisposition).
public enum ResponseDisposition: Sendable, Hashable {
    /// Go on: the body is delivered as the task was set up to.
    case allow
    /// Cancel the task (it fails with ``TransferError/Code/cancelled``).
    case cancel
    /// Continue as a download task: the body goes to a file, not to memory.
    case becomeDownload
}

/// What to do with an authentication challenge (NSURLSessionAuthChallengeDisposition).
///
/// For a server-trust challenge:
/// - `.useCredential(.serverTrust(challenge.serverTrust!))` trusts the server
///   whatever the policy decided (URLSession's `URLCredential(trust:)`). Only a
///   credential made from the trust of this very challenge does: one made from
///   another chain is handled as `.performDefaultHandling`.
/// - `.useCredential` with a user/password credential is handled as
///   `.performDefaultHandling`: the policy's decision stands. A hook written
///   for 401s, which answers every challenge with a password, can therefore
///   never make an untrusted certificate acceptable.
/// - `.performDefaultHandling` keeps the policy's decision.
/// - `.cancelAuthenticationChallenge` / `.rejectProtectionSpace` refuse the
///   connection before any request byte is sent (`serverTrustRejected`).
///
/// For an HTTP challenge (a 401; every scheme reaches the hook), a
/// `.useCredential` with a user/password retries the request once with it,
/// answered by libcurl with the challenge's scheme: Basic, or Digest (RFC
/// 7616, MD5 or SHA-256, with or without `qop=auth`; libcurl asks again
/// without a new password when the server says `stale=true`). A credential
/// that a server already refused for this task is not sent again: the 401
/// is the result, so a hook that always answers the same wrong password
/// costs one retry, not a loop. Bearer and other schemes take no password:
/// a user/password answer, like a server-trust credential, is handled as
/// `.performDefaultHandling` (the 401 is the result). The user/password is
/// sent again only to the origin (scheme, host, port) that asked for it.
/// With Digest the retry costs two requests (libcurl's own challenge round,
/// then its answer), as libcurl starts every transfer without a nonce.
public enum ChallengeDisposition: Sendable, Hashable {
    /// Answer with this credential (see above for what each kind does).
    case useCredential(Credential)
    /// Do what would happen without the hook: the policy's decision, no password.
    case performDefaultHandling
    /// Refuse: the task fails (server trust: `serverTrustRejected`).
    case cancelAuthenticationChallenge
    /// Refuse this protection space; handled as a cancel.
    case rejectProtectionSpace
}

/// A credential: a user/password (Basic or Digest, for 401 challenges), or a server
/// trust (for server-trust challenges, as URLSession's `URLCredential(trust:)`).
public struct Credential: Sendable, Hashable {
    /// The user name (empty for a server-trust credential).
    public var user: String
    /// The password (empty for a server-trust credential).
    public var password: String
    /// The trust this credential was made from by ``serverTrust(_:)``; nil for
    /// a user/password credential.
    public private(set) var serverTrust: ServerTrust?

    /// A user/password credential for HTTP Basic and Digest (401) challenges. It never
    /// answers a server-trust challenge.
    public init(user: String, password: String) {
        self.user = user
        self.password = password
        self.serverTrust = nil
    }

    /// A credential that accepts the server of a server-trust challenge:
    /// pass the challenge's own ``AuthenticationChallenge/serverTrust``.
    public static func serverTrust(_ trust: ServerTrust) -> Credential {
        var credential = Credential(user: "", password: "")
        credential.serverTrust = trust
        return credential
    }
}

/// What AFNetworking's `authenticationChallengeHandler` returns: an answer
/// now, an answer later, or an error that fails the task.
public enum ChallengeAnswer: Sendable {
    /// Answer now, as ``ChallengeDisposition`` says for the challenge's kind.
    case disposition(ChallengeDisposition)
    /// The handler calls the completion it was given later, once (further
    /// calls are ignored). A 401 waits until then (a cancel of the task ends
    /// the wait); a server-trust challenge waits at most
    /// ``SessionConfiguration/serverTrustChallengeTimeout`` and is refused
    /// without an answer by then, as with ``SessionHooks/sessionDidReceiveChallenge``.
    case deferred
    /// Refuse the challenge and fail the task with this error: a 401 ends the
    /// task at once; a server-trust challenge refuses the handshake, and the
    /// tasks that needed this host and port complete with `error` (its
    /// `underlyingError` is the trust refusal).
    case fail(TransferError)
}

/// The completion a deferring challenge handler calls with its answer.
public typealias ChallengeCompletion = @Sendable (ChallengeDisposition) -> Void

/// An authentication challenge: HTTP from a 401 (Basic, Digest, Bearer or
/// another scheme), or server trust.
public struct AuthenticationChallenge: Sendable {
    /// Which kind of challenge this is.
    public enum Kind: Sendable, Hashable {
        /// A 401 whose preferred challenge is Basic.
        case httpBasic(realm: String?)
        /// A 401 whose preferred challenge is another scheme (Digest when the
        /// server offers it, else the first one it lists).
        case http(scheme: AuthenticationScheme, realm: String?)
        /// A new TLS connection, to trust or refuse.
        case serverTrust
    }
    /// Which kind of challenge this is.
    public var kind: Kind
    /// The scheme of an HTTP challenge (nil for server trust). When a 401
    /// offers several, this is Digest, then Basic, then the first.
    public var scheme: AuthenticationScheme? {
        switch kind {
        case .httpBasic: .basic
        case .http(let scheme, _): scheme
        case .serverTrust: nil
        }
    }
    /// The `realm` of an HTTP challenge, without quotes or control characters.
    public var realm: String? {
        switch kind {
        case .httpBasic(let realm), .http(_, let realm): realm
        case .serverTrust: nil
        }
    }
    /// The host the connection is for.
    public var host: String
    /// The port the connection is for (the server's real port, for
    /// server-trust challenges too).
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
    /// No hooks: every event takes its default.
    public init() {}

    // Session
    /// The session was invalidated and its last task (and last fast-path
    /// request) has ended, once (AFNetworking's
    /// `setSessionDidBecomeInvalidBlock:`); the error is nil. One closure:
    /// setting it replaces the last one. Code that only needs to know when
    /// the session is done can `await` ``SessionManager/waitUntilInvalid()``
    /// or ``SessionManager/shutdown(cancellingTasks:)`` instead, from as
    /// many places as it likes.
    public var sessionDidBecomeInvalid: (@Sendable (SessionManager, TransferError?) -> Void)?
    /// Server-trust challenges (every new TLS connection, when set) and,
    /// without a task-level hook, 401 challenges. See ``ChallengeDisposition``
    /// for what each answer does to each kind. A server-trust challenge holds
    /// up the engine (every transfer of the session) until it is answered, at
    /// most ``SessionConfiguration/serverTrustChallengeTimeout``; with no
    /// answer by then the server is refused (`serverTrustRejected`,
    /// `.challengeTimedOut`) and the late answer is ignored.
    public var sessionDidReceiveChallenge:
        (@Sendable (SessionManager, AuthenticationChallenge) -> ChallengeDisposition)?

    /// AFNetworking's `authenticationChallengeHandler`: 401s before the other
    /// challenge hooks, and server trust unless ``sessionDidReceiveChallenge``
    /// is set (as in AF, where a session-level block takes those). Return an answer,
    /// ``ChallengeAnswer/deferred`` and call the completion later, or an error
    /// that fails the task. The task is nil for server trust (a handshake is
    /// for a connection, which several tasks may share). Server-trust answers
    /// follow ``ChallengeDisposition``: only a credential made from the
    /// challenge's own trust overrides the policy's verdict.
    public var authenticationChallengeHandler:
        (@Sendable (SessionManager, TransferTask?, AuthenticationChallenge, @escaping ChallengeCompletion)
            -> ChallengeAnswer)?

    // Task
    /// A 401 for this task (`setTaskDidReceiveAuthenticationChallengeBlock:`);
    /// return what to do, see ``ChallengeDisposition``.
    public var taskDidReceiveChallenge:
        (@Sendable (SessionManager, TransferTask, AuthenticationChallenge) -> ChallengeDisposition)?
    /// Return the request to follow (possibly changed), or nil to refuse the redirect.
    /// The proposed request has no `Authorization`, `Cookie` or
    /// `Proxy-Authorization` header when the redirect changes scheme, host or
    /// port; what the hook returns is sent as it is.
    public var taskWillPerformHTTPRedirection:
        (@Sendable (SessionManager, TransferTask, HTTPResponse, Request) -> Request?)?
    /// A fresh body source for a streamed upload that must be sent again
    /// (TransferFoundation's `taskNeedNewBodyStream` sets it with an `InputStream`).
    public var taskNeedNewBodySource: (@Sendable (SessionManager, TransferTask) -> (any BodySource)?)?
    /// (bytes sent since last call, total sent, total expected)
    public var taskDidSendBodyData: (@Sendable (SessionManager, TransferTask, Int64, Int64, Int64) -> Void)?
    /// A task finished, with nil or its error (`setTaskDidCompleteBlock:`).
    public var taskDidComplete: (@Sendable (SessionManager, TransferTask, TransferError?) -> Void)?
    /// A task's metrics, before its completion (`setTaskDidFinishCollectingMetricsBlock:`).
    public var taskDidFinishCollectingMetrics: (@Sendable (SessionManager, TransferTask, TaskMetrics) -> Void)?

    // Data task
    /// A data task's response head arrived (`setDataTaskDidReceiveResponseBlock:`):
    /// return what to do with the body.
    public var dataTaskDidReceiveResponse:
        (@Sendable (SessionManager, DataTask, HTTPResponse) -> ResponseDisposition)?
    /// A data task continued as a download task (`setDataTaskDidBecomeDownloadTaskBlock:`).
    public var dataTaskDidBecomeDownloadTask: (@Sendable (SessionManager, DataTask, DownloadTask) -> Void)?
    /// When set, body chunks cross into Swift as they arrive; otherwise none does
    /// (`setDataTaskDidReceiveDataBlock:`). Runs on the delegate queue, in order; throws nothing.
    ///
    /// The chunks are the only copy of the body: the task's completion handler gets empty
    /// `Data()` and the will-cache hook is not called, unless
    /// ``SessionConfiguration/accumulatesStreamedBody`` is set. A slow hook holds the transfer
    /// back: when 1 MiB of chunks waits for it, the engine pauses the transfer until half has
    /// been delivered. ``SessionManager/stream(for:bufferSize:)`` gives one request's chunks
    /// as an async sequence instead; its tasks do not call this hook.
    public var dataTaskDidReceiveData: (@Sendable (SessionManager, DataTask, Data) -> Void)?
    /// Decides what the session's ``ResponseCache`` stores for a response it
    /// would store (`setDataTaskWillCacheResponseBlock:`): return the data to
    /// store (the body as received, or other bytes, served from then on), or
    /// nil to store nothing. Runs on ``SessionManager/delegateQueue``, before
    /// the task's completion; never called without a cache, for a response
    /// the cache rules refuse (no-store, a POST, a discarded body), or for a
    /// 304 that refreshes an entry.
    public var dataTaskWillCacheResponse: (@Sendable (SessionManager, DataTask, HTTPResponse, Data) -> Data?)?

    // Download task
    /// Where to move the finished file (nil: leave it to the task's destination).
    public var downloadTaskDidFinishDownloading: (@Sendable (SessionManager, DownloadTask, URL) -> URL?)?
    /// (bytes written since last call, total written, total expected)
    public var downloadTaskDidWriteData: (@Sendable (SessionManager, DownloadTask, Int64, Int64, Int64) -> Void)?
    /// (offset resumed at, total expected)
    public var downloadTaskDidResume: (@Sendable (SessionManager, DownloadTask, Int64, Int64) -> Void)?
}
