import FoundationEssentials
import Logging

/// An HTTP method; any token is allowed, the common ones have names.
public struct HTTPMethod: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral,
    CustomStringConvertible
{
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue.uppercased() }
    /// A method from its token, upper-cased (`HTTPMethod("purge")` is `PURGE`).
    public init(_ rawValue: String) { self.init(rawValue: rawValue) }
    public init(stringLiteral value: String) { self.init(rawValue: value) }
    public var description: String { rawValue }

    /// `GET`.
    public static let get = HTTPMethod("GET")
    /// `HEAD`: the response head only, no body.
    public static let head = HTTPMethod("HEAD")
    /// `POST`.
    public static let post = HTTPMethod("POST")
    /// `PUT`.
    public static let put = HTTPMethod("PUT")
    /// `PATCH`.
    public static let patch = HTTPMethod("PATCH")
    /// `DELETE`.
    public static let delete = HTTPMethod("DELETE")
    /// `OPTIONS`.
    public static let options = HTTPMethod("OPTIONS")
}

/// A request: the Linux spelling of `NSURLRequest` for Transfer.
public struct Request: Sendable, Hashable, CustomStringConvertible {
    /// Where the body comes from.
    public enum Body: Sendable, Hashable {
        /// Bytes held in memory, sent as they are.
        case data(Data)
        /// A file read in large blocks; `length` nil means to the end.
        case file(URL, offset: Int64 = 0, length: Int64? = nil)
        /// A streamed body; the provider is asked again for a fresh stream
        /// after a redirect or an authentication retry.
        case stream(BodyStreamProvider, length: Int64?)
    }

    /// How the session's ``ResponseCache`` may answer a GET
    /// (`NSURLRequestCachePolicy`, URLSession's meaning). Without a cache
    /// (``SessionConfiguration/responseCache`` nil) every policy loads.
    public enum CachePolicy: Sendable, Hashable {
        /// RFC 9111: a fresh entry is used as it is, a stale one with an
        /// `ETag` or `Last-Modified` is revalidated (a 304 completes with the
        /// cached body, status 200), anything else is fetched.
        case useProtocolCachePolicy
        /// Always fetched; the response is still stored.
        case reloadIgnoringLocalCacheData
        /// Any entry is used, however old, unless it says `must-revalidate`
        /// or `no-cache` (then it is revalidated); else fetched.
        case returnCacheDataElseLoad
        /// Any entry is used as with `.returnCacheDataElseLoad`; nothing is
        /// ever sent: with no usable entry the task fails with
        /// ``TransferError/Code/resourceUnavailable``.
        case returnCacheDataDontLoad
    }

    /// A logger for this request's records instead of the session's
    /// (``SessionConfiguration/logger``), as AsyncHTTPClient's
    /// `execute(_:logger:)`: put the request's id in its metadata and every
    /// record the library emits for this request carries it (start,
    /// redirects, retries, completion or failure, libcurl's trace at
    /// `.trace`). Records are redacted as the session's are (``LogRedaction``).
    ///
    /// Its level is read when it is set. At info or above it costs nothing
    /// per request and the request keeps the fast path (see
    /// ``SessionManager/data(for:)``); at debug or below the request runs as
    /// a task so that its events can be logged. nil (the default): the
    /// session's logger. Not part of the request's equality or hash.
    public var logger: Logger? {
        get { loggerSlot.reference?.logger }
        set { loggerSlot.reference = newValue.map(RequestLogger.init) }
    }
    /// The logger with its level read once (nil: the session's).
    var loggerReference: RequestLogger? { loggerSlot.reference }
    private var loggerSlot = RequestLoggerSlot()

    /// The absolute http or https URL to fetch.
    public var url: URL
    /// The method (default `GET`).
    public var method: HTTPMethod
    /// Headers sent with the request; they win over the session's
    /// ``SessionConfiguration/httpAdditionalHeaders``.
    public var headers: HTTPHeaders
    /// The body, or nil for none. Upload tasks take theirs from the call that creates them.
    public var body: Body?
    /// The idle timeout of this request, as `URLRequest.timeoutInterval`:
    /// seconds without a byte sent or received before the task fails with
    /// ``TransferError/Code/timedOut``; 0 (the default) uses
    /// ``SessionConfiguration/timeoutIntervalForRequest``. It is not a limit
    /// on the whole transfer: that is
    /// ``SessionConfiguration/timeoutIntervalForResource``.
    public var timeoutInterval: TimeInterval
    /// The cache policy (default `.useProtocolCachePolicy`); see ``CachePolicy``.
    public var cachePolicy: CachePolicy
    /// Send the session's cookies and store the ones the response sets (default true).
    public var httpShouldHandleCookies: Bool
    /// This request's own interceptor, run after the session's
    /// (``SessionConfiguration/interceptor``).
    public var interceptor: (any RequestInterceptor)? {
        get { interceptorReference?.value }
        set { interceptorReference = newValue.map(InterceptorReference.init) }
    }
    private var interceptorReference: InterceptorReference?
    /// Whether ``interceptor`` is set, without copying it out of its box.
    var hasInterceptor: Bool { interceptorReference != nil }
    /// The page this request is for, which ``CookieStore/AcceptPolicy/onlyFromMainDocumentDomain`` compares with.
    public var mainDocumentURL: URL?
    /// A user/password libcurl answers the server's 401 with, before any
    /// challenge hook (URLSession's credential for the protection space;
    /// curl's `-u` with `--digest` or `--anyauth`). libcurl waits for the
    /// challenge, answers it once in a scheme of ``credentialSchemes`` the
    /// server offers (Digest before Basic), and returns the 401 that refuses
    /// it: a wrong password costs exactly two requests. Sent only to the
    /// origin (scheme, host, port) of the task's first request. To send Basic
    /// up front instead, use ``HTTPHeaders/Field/authorization(username:password:)``.
    public var credential: Credential?
    /// The schemes ``credential`` may answer: `[.basic, .digest]` by default;
    /// `[.digest]` is curl's `--digest`. Other schemes are ignored.
    public var credentialSchemes: Set<AuthenticationScheme> = [.basic, .digest]

    /// A request for `url`; nothing is checked until a task is made from it (a
    /// bad URL then fails the task with ``TransferError/Code/invalidRequest``).
    public init(url: URL, method: HTTPMethod = .get, headers: HTTPHeaders = [:], body: Body? = nil,
                timeoutInterval: TimeInterval = 0, cachePolicy: CachePolicy = .useProtocolCachePolicy)
    {
        self.url = url
        self.method = method
        self.headers = headers
        self.body = body
        self.timeoutInterval = timeoutInterval
        self.cachePolicy = cachePolicy
        self.httpShouldHandleCookies = true
    }

    /// Parses `string` as a URL; throws ``TransferError/Code/invalidRequest``
    /// when it is not an absolute http or https URL.
    public init(_ string: String, method: HTTPMethod = .get) throws(TransferError) {
        guard let url = URL(string: string), let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https", url.host?.isEmpty == false
        else {
            throw TransferError(.invalidRequest, "not an http(s) URL: \(string.debugDescription)")
        }
        self.init(url: url, method: method)
    }

    /// `headers[name]`, as URLRequest spells it.
    public func value(forHTTPHeaderField name: String) -> String? { headers[name] }

    /// Sets (or with nil removes) a header, as URLRequest spells it.
    public mutating func setValue(_ value: String?, forHTTPHeaderField name: String) {
        headers[name] = value
    }

    public var description: String { "\(method) \(url.absoluteString)" }
}

/// Supplies a fresh ``BodySource`` for a streamed upload body, each time the
/// body has to be sent from the start.
///
/// TransferFoundation adds `init(_:)` and `makeStream` with Foundation's
/// `InputStream`.
public struct BodyStreamProvider: Sendable, Hashable {
    private let id = UUID()
    /// Called each time the body must be sent from the start; returns a
    /// new source, read from its first byte.
    public let makeSource: @Sendable () -> (any BodySource)?
    /// A provider that calls `makeSource` for each fresh body.
    // Disfavoured: `BodyStreamProvider { nil }` stays TransferFoundation's
    // InputStream initializer where both are visible, as it was.
    @_disfavoredOverload
    public init(source makeSource: @escaping @Sendable () -> (any BodySource)?) { self.makeSource = makeSource }
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.id == rhs.id }
    public func hash(into hasher: inout Hasher) { hasher.combine(id) }
}

/// Where a request keeps its logger: equal to every other slot, so that a
/// logger changes neither a request's equality nor its hash (it does not
/// change what is sent).
struct RequestLoggerSlot: Sendable, Hashable {
    var reference: RequestLogger?
    static func == (lhs: RequestLoggerSlot, rhs: RequestLoggerSlot) -> Bool { true }
    func hash(into hasher: inout Hasher) {}
}

/// A request's own logger and its level, read once (``Request/logger``).
final class RequestLogger: Sendable {
    let logger: Logger
    let logsDebug: Bool
    let logsTrace: Bool

    init(_ logger: Logger) {
        self.logger = logger
        logsDebug = logger.logLevel <= .debug
        logsTrace = logger.logLevel == .trace
    }
}
