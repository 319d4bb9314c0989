import FoundationEssentials
import Glibc

/// The one error type of Transfer. Codes are open (new ones do not break a
/// `switch` with a default), and the underlying curl, errno, TLS and HTTP
/// detail is kept.
public struct TransferError: Error, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// What went wrong, by kind: compare with the static members
    /// (`error.code == .timedOut`). Its ``name`` is stable and safe to log.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's name, as spelled in Swift (`"timedOut"`).
        public let name: String
        fileprivate init(_ name: String) { self.name = name }
        public var description: String { name }

        /// Bad URL, unsupported scheme, bad header or method, unreadable input file.
        public static let invalidRequest = Code("invalidRequest")
        /// Name resolution failed, connection refused or unreachable.
        public static let cannotConnect = Code("cannotConnect")
        /// No byte for longer than the request's idle timeout, or the whole
        /// transfer over ``SessionConfiguration/timeoutIntervalForResource``.
        public static let timedOut = Code("timedOut")
        /// TLS handshake failed, untrusted chain, expired, hostname mismatch.
        public static let tlsFailure = Code("tlsFailure")
        /// The security policy (pins) refused the server.
        public static let serverTrustRejected = Code("serverTrustRejected")
        /// More redirects than ``SessionConfiguration/maxRedirects``.
        public static let tooManyRedirects = Code("tooManyRedirects")
        /// A redirect to a scheme other than http/https, or refused by a hook.
        public static let redirectRefused = Code("redirectRefused")
        /// A response serializer refused the status code (``httpStatus`` has it;
        /// AFNetworking's `NSURLErrorBadServerResponse` from validation).
        public static let unacceptableStatusCode = Code("unacceptableStatusCode")
        /// A response serializer refused the `Content-Type`.
        public static let unacceptableContentType = Code("unacceptableContentType")
        /// A response serializer could not decode the body (``underlyingError``
        /// has the decoder's error; ``responseData`` the body).
        public static let serializationFailed = Code("serializationFailed")
        /// The body ended before its announced length, or the connection died inside it.
        public static let truncatedResponse = Code("truncatedResponse")
        /// The server closed the connection without sending a byte of response
        /// (what a restarting server or a closed keep-alive connection looks
        /// like; curl's "empty reply"). Retried by ``RetryPolicy`` by default.
        public static let emptyResponse = Code("emptyResponse")
        /// The server sent something that is not HTTP: a refused status line, an
        /// unparseable `Location`, headers over libcurl's limit, broken chunked framing.
        public static let badResponse = Code("badResponse")
        /// The task was cancelled (``TransferTask/cancel()``, a cancelled
        /// `Progress`, an invalidated session, or a response hook's `.cancel`).
        public static let cancelled = Code("cancelled")
        /// Writing, moving or reading a local file failed (errno in ``systemErrno``).
        public static let fileError = Code("fileError")
        /// The downloaded file's SHA-256 is not ``DownloadOptions/expectedSHA256``.
        public static let checksumMismatch = Code("checksumMismatch")
        /// Resume data that is corrupt, foreign or of an unknown version.
        public static let invalidResumeData = Code("invalidResumeData")
        /// The session was invalidated; no new task can be created.
        public static let sessionInvalidated = Code("sessionInvalidated")
        /// Any other transport failure (``curlCode`` says which).
        public static let transport = Code("transport")
        /// The response body is larger than the limit (``SessionConfiguration/maximumResponseBodySize``,
        /// ``DownloadOptions/maximumFileSize``), or it decodes to more than
        /// ``SessionConfiguration/maximumDecompressionRatio`` bytes per byte received (a
        /// decompression bomb). The transfer was cut before the excess was stored.
        public static let responseTooLarge = Code("responseTooLarge")
        /// The proxy refused the request (a `CONNECT` answered with other than 2xx, a 407
        /// because credentials were missing or wrong, a SOCKS refusal) or its name does not
        /// resolve. ``message`` has the proxy's answer.
        public static let proxyFailure = Code("proxyFailure")
        /// A data task's response hook answered `.becomeDownload`: the body went
        /// to a file. ``TransferError/downloadTask`` and ``TransferError/fileURL``
        /// say which task and where.
        public static let becameDownload = Code("becameDownload")
        /// A ``RequestAdapter`` threw before an attempt (``underlyingError`` has its error).
        public static let requestAdaptationFailed = Code("requestAdaptationFailed")
        /// A ``RequestRetrier`` answered `.doNotRetryWithError` (``underlyingError`` has its error).
        public static let requestRetryFailed = Code("requestRetryFailed")
        /// The request's ``Request/CachePolicy`` forbade loading
        /// (`.returnCacheDataDontLoad`) and the response cache had no usable
        /// response (URLError's `resourceUnavailable`).
        public static let resourceUnavailable = Code("resourceUnavailable")
        /// This process ran out of file descriptors: a socket or a file could not be
        /// opened (`EMFILE`: the open-file limit `RLIMIT_NOFILE`, `ulimit -n`, is reached;
        /// `ENFILE`: the system's file table is full). ``systemErrno`` says which and
        /// ``message`` names the limit. A local condition, not the server's fault: not
        /// retried by ``RetryPolicy`` by default. The engine already keeps its connections
        /// within the limit (see ``SessionConfiguration/maxTotalConnections``), so this
        /// means the rest of the process holds the descriptors.
        public static let tooManyOpenFiles = Code("tooManyOpenFiles")
        /// A bug in Transfer: please report it.
        public static let internalError = Code("internalError")
    }

    /// The kind of failure; switch on it.
    public var code: Code
    /// A sentence for people: what failed, with the detail we know.
    public var message: String
    /// libcurl's `CURLcode`, when libcurl reported the failure.
    public var curlCode: Int32?
    /// The `errno` of a failed system call (files, sockets), when one did.
    public var systemErrno: Int32?
    /// Why server trust failed (``TrustFailureReason``), when it did.
    public var tlsReason: Int32?
    /// OpenSSL's X509_V_ERR_* code when the chain did not validate.
    public var verifyError: Int32?
    /// The response's status code, when a response head arrived.
    public var httpStatus: Int?
    /// The URL of the request that failed (the last hop after redirects).
    public var url: URL?
    /// The response and body, for validation and serialization errors.
    public var response: HTTPResponse?
    /// The response body, for validation and serialization errors (AFNetworking's
    /// `AFNetworkingOperationFailingURLResponseDataErrorKey`).
    public var responseData: Data?
    /// The error underneath, e.g. a decoder's or an adapter's.
    public var underlyingError: (any Error & Sendable)?
    /// For ``Code/becameDownload`` (and a failure of the download that took
    /// over): the task that continued the transfer, and the file it wrote.
    public var downloadTask: DownloadTask?
    /// The file a download wrote or was writing, when there is one.
    public var fileURL: URL?

    /// An error of `code` with `message`; Transfer's own APIs fill in the
    /// other fields. For adapters, retriers and serializers of your own.
    public init(_ code: Code, _ message: String, url: URL? = nil, underlying: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.url = url
        self.underlyingError = underlying
    }

    public var description: String { "TransferError.\(code.name): \(message)" }

    public var debugDescription: String {
        var parts = [description]
        if let url { parts.append("url=\(url.absoluteString)") }
        if let curlCode { parts.append("curl=\(curlCode)") }
        if let systemErrno { parts.append("errno=\(systemErrno)") }
        if let tlsReason { parts.append("tls=\(tlsReason)") }
        if let verifyError { parts.append("verify=\(verifyError)") }
        if let httpStatus { parts.append("status=\(httpStatus)") }
        if let underlyingError { parts.append("underlying=\(underlyingError)") }
        return parts.joined(separator: " ")
    }
}

extension TransferError: Equatable {
    /// Two errors are equal when code, message and the numeric details match.
    public static func == (lhs: TransferError, rhs: TransferError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message && lhs.curlCode == rhs.curlCode
            && lhs.systemErrno == rhs.systemErrno && lhs.httpStatus == rhs.httpStatus
    }
}
