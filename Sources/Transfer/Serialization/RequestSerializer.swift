import FoundationEssentials
import Glibc
import Synchronization

/// Turns a request and its parameters into the request to send
/// (AFNetworking's `AFURLRequestSerialization`).
public protocol RequestSerializer: Sendable {
    /// Returns `request` with `parameters` encoded into it, and this
    /// serializer's default headers added where `request` has none.
    ///
    /// - Throws: ``TransferError/Code/invalidRequest`` when the parameters
    ///   cannot be encoded or a header is invalid.
    func request(bySerializing request: Request, parameters: JSONValue?) throws(TransferError) -> Request
}

/// Builds requests with query-string and form (`application/x-www-form-urlencoded`)
/// parameter encoding: AFNetworking's `AFHTTPRequestSerializer`.
///
/// Parameters of the methods in ``httpMethodsEncodingParametersInURI`` (GET,
/// HEAD and DELETE unless changed) go into the query string; for any other
/// method they become the body, and Content-Type is set to
/// `application/x-www-form-urlencoded` unless the request already has one.
/// See ``QueryString`` for nesting, ordering and escaping.
///
/// ```swift
/// let serializer = HTTPRequestSerializer()
/// serializer.setValue("secret", forHTTPHeaderField: "X-Api-Key")
/// let request = try serializer.request(method: .get, urlString: "https://example.com/search",
///                                      parameters: ["q": "café", "page": 2])
/// // https://example.com/search?page=2&q=caf%C3%A9
/// ```
///
/// A serializer is a reference type, like AFNetworking's, so a session
/// manager and its user share one configuration. Every property is safe to
/// read and write from any thread. Subclasses override
/// ``request(bySerializing:parameters:)``.
open class HTTPRequestSerializer: RequestSerializer, @unchecked Sendable {
    // @unchecked: all mutable state is in `state`, a Protected lock; subclasses keep
    // theirs behind their own lock too.

    /// Replaces the built-in query-string encoding: receives the request and
    /// the parameters, returns the query (or form body) text. Errors other
    /// than ``TransferError`` are wrapped in ``TransferError/Code/invalidRequest``.
    public typealias QueryStringSerialization = @Sendable (Request, JSONValue) throws -> String

    struct Configuration: Sendable {
        var headers: HTTPHeaders
        var stringEncoding: String.Encoding = .utf8
        var httpMethodsEncodingParametersInURI: Set<HTTPMethod> = [.get, .head, .delete]
        var timeoutInterval: TimeInterval = 0
        var cachePolicy: Request.CachePolicy = .useProtocolCachePolicy
        var httpShouldHandleCookies = true
        var queryStringSerialization: QueryStringSerialization?
        var queryStringSerializationStyle: QueryStringSerializationStyle = .default
    }

    private let state: Protected<Configuration>

    /// A serializer with the default headers
    /// (``HTTPRequestSerializer/defaultAcceptLanguage`` and
    /// ``HTTPRequestSerializer/defaultUserAgent``) and AFNetworking's defaults.
    public init() {
        var headers = HTTPHeaders()
        headers["Accept-Language"] = Self.defaultAcceptLanguage
        headers["User-Agent"] = Self.defaultUserAgent
        state = Protected(Configuration(headers: headers))
    }

    var configuration: Configuration { state.withLock { $0 } }

    // MARK: Configuration

    /// The encoding of form bodies and multipart form fields (default UTF-8).
    public var stringEncoding: String.Encoding {
        get { state.withLock { $0.stringEncoding } }
        set { state.withLock { $0.stringEncoding = newValue } }
    }

    /// Methods whose parameters go into the query string (default GET, HEAD, DELETE).
    public var httpMethodsEncodingParametersInURI: Set<HTTPMethod> {
        get { state.withLock { $0.httpMethodsEncodingParametersInURI } }
        set { state.withLock { $0.httpMethodsEncodingParametersInURI = newValue } }
    }

    /// Applied to every request built by ``request(method:urlString:parameters:headers:)``
    /// (0, the default: the session's timeout applies).
    public var timeoutInterval: TimeInterval {
        get { state.withLock { $0.timeoutInterval } }
        set { state.withLock { $0.timeoutInterval = newValue } }
    }

    /// Applied to every request built (default `.useProtocolCachePolicy`).
    public var cachePolicy: Request.CachePolicy {
        get { state.withLock { $0.cachePolicy } }
        set { state.withLock { $0.cachePolicy = newValue } }
    }

    /// Applied to every request built (default true).
    public var httpShouldHandleCookies: Bool {
        get { state.withLock { $0.httpShouldHandleCookies } }
        set { state.withLock { $0.httpShouldHandleCookies = newValue } }
    }

    /// A custom query-string encoding, or nil for the one ``queryStringSerializationStyle`` names.
    public var queryStringSerialization: QueryStringSerialization? {
        get { state.withLock { $0.queryStringSerialization } }
        set { state.withLock { $0.queryStringSerialization = newValue } }
    }

    /// The built-in encoding used when no custom closure is set
    /// (AFNetworking's `queryStringSerializationStyle`; default ``QueryStringSerializationStyle/default``).
    public var queryStringSerializationStyle: QueryStringSerializationStyle {
        state.withLock { $0.queryStringSerializationStyle }
    }

    /// Selects a built-in encoding and removes any custom closure
    /// (AFNetworking's `setQueryStringSerializationWithStyle:`).
    public func setQueryStringSerialization(style: QueryStringSerializationStyle) {
        state.withLock { state in
            state.queryStringSerializationStyle = style
            state.queryStringSerialization = nil
        }
    }

    /// Replaces the built-in encoding with `serialization`; nil goes back to
    /// ``queryStringSerializationStyle`` (AFNetworking's `setQueryStringSerializationWithBlock:`).
    public func setQueryStringSerialization(_ serialization: QueryStringSerialization?) {
        state.withLock { $0.queryStringSerialization = serialization }
    }

    /// The headers added to every request that does not set them itself.
    public var httpRequestHeaders: HTTPHeaders { state.withLock { $0.headers } }

    /// Sets a default header; nil removes it. Names and values are checked
    /// when a request is built (a CR or LF in a value is refused there).
    public func setValue(_ value: String?, forHTTPHeaderField field: String) {
        state.withLock { $0.headers[field] = value }
    }

    /// The value of a default header, case-insensitive.
    public func value(forHTTPHeaderField field: String) -> String? {
        state.withLock { $0.headers[field] }
    }

    /// Sets `Authorization: Basic base64(username:password)` (UTF-8).
    public func setAuthorizationHeader(username: String, password: String) {
        let credentials = Data("\(username):\(password)".utf8).base64EncodedString()
        setValue("Basic \(credentials)", forHTTPHeaderField: "Authorization")
    }

    /// Removes the default `Authorization` header.
    public func clearAuthorizationHeader() {
        setValue(nil, forHTTPHeaderField: "Authorization")
    }

    // MARK: Building requests

    /// Builds a request for `method` and `urlString`, encodes `parameters`, then
    /// sets `headers` over the serializer's (AFHTTPSessionManager's per-call headers).
    ///
    /// - Throws: ``TransferError/Code/invalidRequest`` for a URL that is not
    ///   absolute http(s), parameters that cannot be encoded, or an invalid
    ///   header name or value (CR, LF, NUL).
    public func request(
        method: HTTPMethod, urlString: String, parameters: JSONValue? = nil, headers: HTTPHeaders = [:]
    ) throws(TransferError) -> Request {
        try self.request(
            method: method, url: Request(urlString, method: method).url, parameters: parameters,
            headers: headers)
    }

    /// ``request(method:urlString:parameters:headers:)`` for a URL already
    /// resolved (a session manager's base URL plus a path).
    ///
    /// - Throws: as the `urlString` variant.
    public func request(
        method: HTTPMethod, url: URL, parameters: JSONValue? = nil, headers: HTTPHeaders = [:]
    ) throws(TransferError) -> Request {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            url.host?.isEmpty == false
        else {
            throw TransferError(.invalidRequest, "not an http(s) URL: \(url.absoluteString.debugDescription)", url: url)
        }
        var request = Request(url: url, method: method)
        let configuration = configuration
        request.timeoutInterval = configuration.timeoutInterval
        request.cachePolicy = configuration.cachePolicy
        request.httpShouldHandleCookies = configuration.httpShouldHandleCookies
        request = try self.request(bySerializing: request, parameters: parameters)
        return try Self.overriding(request, with: headers)
    }

    /// Encodes `parameters` into `request` as query string or form body.
    open func request(bySerializing request: Request, parameters: JSONValue?) throws(TransferError) -> Request {
        try queryOrFormRequest(request, parameters: parameters)
    }

    /// This class's encoding, whatever a subclass overrides: the query string
    /// for the methods that encode parameters in the URI, a form body otherwise.
    final func queryOrFormRequest(_ request: Request, parameters: JSONValue?) throws(TransferError) -> Request {
        let configuration = configuration
        var result = Self.addingDefaultHeaders(configuration.headers, to: request)
        var query: String? = nil
        if let parameters {
            query = try Self.query(for: request, parameters: parameters, configuration: configuration)
        }
        if configuration.httpMethodsEncodingParametersInURI.contains(request.method) {
            if let query, !query.isEmpty {
                result.url = try Self.appending(query: query, to: result.url)
            }
        } else {
            // An empty string is a valid form body (AFNetworking #2864).
            if result.headers["Content-Type"] == nil {
                result.headers["Content-Type"] = "application/x-www-form-urlencoded"
            }
            guard let body = (query ?? "").data(using: configuration.stringEncoding) else {
                throw TransferError(
                    .invalidRequest, "the form body cannot be encoded as \(configuration.stringEncoding)",
                    url: request.url)
            }
            result.body = .data(body)
        }
        try result.headers.validate()
        return result
    }

    // MARK: Helpers for subclasses

    /// What a serializer that writes its parameters as a body does: in the
    /// URL for the methods that encode parameters there (as this class
    /// does), otherwise the default headers, then `encode(parameters)` as the
    /// body with `contentType` unless the request names one.
    package func request(_ request: Request, parameters: JSONValue?, contentType: String,
                 encode: (JSONValue) throws(TransferError) -> Data) throws(TransferError) -> Request
    {
        let configuration = configuration
        if configuration.httpMethodsEncodingParametersInURI.contains(request.method) {
            return try queryOrFormRequest(request, parameters: parameters)
        }
        var result = Self.addingDefaultHeaders(configuration.headers, to: request)
        if let parameters {
            if result.headers["Content-Type"] == nil { result.headers["Content-Type"] = contentType }
            result.body = .data(try encode(parameters))
        }
        try result.headers.validate()
        return result
    }

    /// `request` with each default header added unless the request already has it.
    public static func addingDefaultHeaders(_ defaults: HTTPHeaders, to request: Request) -> Request {
        var result = request
        for field in defaults where !result.headers.contains(field.name) {
            result.headers.add(name: field.name, value: field.value)
        }
        return result
    }

    /// `request` with `headers` replacing fields of the same name, all fields validated.
    static func overriding(_ request: Request, with headers: HTTPHeaders) throws(TransferError) -> Request {
        var result = request
        for field in headers { result.headers.replaceOrAdd(name: field.name, value: field.value) }
        try result.headers.validate()
        return result
    }

    static func query(
        for request: Request, parameters: JSONValue, configuration: Configuration
    ) throws(TransferError) -> String {
        guard let custom = configuration.queryStringSerialization else {
            return try configuration.queryStringSerializationStyle.string(from: parameters)
        }
        do {
            return try custom(request, parameters)
        } catch let error as TransferError {
            throw error
        } catch {
            throw TransferError(
                .invalidRequest, "the query string serialization failed: \(error)", url: request.url,
                underlying: error)
        }
    }

    /// `url` with `query` appended to its query (before any fragment).
    static func appending(query: String, to url: URL) throws(TransferError) -> URL {
        var text = url.absoluteString
        var fragment = ""
        if let hash = text.firstIndex(of: "#") {
            fragment = String(text[hash...])
            text = String(text[..<hash])
        }
        if !text.contains("?") {
            text += "?"
        } else if !text.hasSuffix("?") && !text.hasSuffix("&") {
            text += "&"
        }
        text += query + fragment
        guard let result = URL(string: text) else {
            throw TransferError(.invalidRequest, "the query string makes an invalid URL: \(text.debugDescription)")
        }
        return result
    }
}
