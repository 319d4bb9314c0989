import FoundationEssentials
import HTTPTypes
import Transfer

// Conversions between Transfer's request and response types and those of
// swift-http-types (`HTTPRequest`, `HTTPResponse`, `HTTPFields`), for code
// that meets both: Hummingbird 2 apps, swift-openapi-runtime transports and
// middlewares, anything written against `HTTPTypes`.
//
// Both modules declare a type named `HTTPResponse`. In a file that imports
// both, name it with its module (`Transfer.HTTPResponse`,
// `HTTPTypes.HTTPResponse`) or through Transfer's typealias
// ``Transfer/TransferResponse``; docs/INTEGRATIONS.md has the details.

// MARK: - Header fields

extension Transfer.HTTPHeaders {
    /// The fields of `fields`, in order, repeated names kept as separate
    /// fields, each name spelled as it was given (`HTTPField.Name.rawName`).
    public init(_ fields: HTTPFields) {
        self.init(fields.map { ($0.name.rawName, $0.value) })
    }
}

extension HTTPFields {
    /// The fields of `headers`, in order, repeated names kept as separate
    /// fields, each name spelled as in `headers`.
    ///
    /// A field whose name is not an HTTP token cannot be an `HTTPField` and is
    /// left out (Transfer refuses to send such a field anyway:
    /// ``Transfer/HTTPHeaders/validate(name:value:)``). Values are taken as
    /// `HTTPField(name:value:)` takes them (characters not allowed in a field
    /// value become spaces).
    public init(_ headers: Transfer.HTTPHeaders) {
        self.init()
        for field in headers {
            guard let name = HTTPField.Name(field.name) else { continue }
            append(HTTPField(name: name, value: field.value))
        }
    }
}

// MARK: - Methods

extension Transfer.HTTPMethod {
    /// The method of the same token.
    public init(_ method: HTTPRequest.Method) {
        self.init(rawValue: method.rawValue)
    }
}

extension HTTPRequest.Method {
    /// The method of the same token (Transfer's are upper-cased), or nil when
    /// the token is not a valid method token.
    public init?(_ method: Transfer.HTTPMethod) {
        self.init(method.rawValue)
    }
}

// MARK: - Requests

extension Transfer.Request {
    /// A Transfer request from an `HTTPTypes.HTTPRequest` and a body.
    ///
    /// The URL is `scheme://authority` followed by `path` (which carries the
    /// query); the method and header fields (in order, repeated names kept)
    /// are copied. Every other property keeps its default.
    ///
    /// ```swift
    /// let head = HTTPRequest(method: .post, scheme: "https", authority: "api.example.com",
    ///                        path: "/v1/items?dry-run=1", headerFields: [.contentType: "application/json"])
    /// let request = try Request(head, body: .data(json))
    /// ```
    ///
    /// - Parameters:
    ///   - request: The head; its `scheme` and `authority` must be set (an
    ///     `HTTPRequest` made for a server has none: build the URL yourself
    ///     and use ``Transfer/Request/init(url:method:headers:body:timeoutInterval:cachePolicy:)``,
    ///     then ``Transfer/HTTPHeaders/init(_:)``).
    ///   - body: The body to send, or nil for none.
    /// - Throws: ``TransferError/Code/invalidRequest`` when the scheme or
    ///   authority is missing, or the result is not an http(s) URL.
    public init(_ request: HTTPRequest, body: Body? = nil) throws(TransferError) {
        guard let scheme = request.scheme, let authority = request.authority else {
            throw TransferError(.invalidRequest, "an HTTPRequest without scheme or authority has no URL")
        }
        var path = request.path ?? "/"
        if path.isEmpty { path = "/" }
        if !path.hasPrefix("/") && path != "*" { path = "/" + path }
        let string = "\(scheme)://\(authority)\(path)"
        guard let url = URL(string: string), let urlScheme = url.scheme?.lowercased(),
            urlScheme == "http" || urlScheme == "https", url.host?.isEmpty == false
        else {
            throw TransferError(.invalidRequest, "not an http(s) URL: \(string.debugDescription)")
        }
        self.init(url: url, method: Transfer.HTTPMethod(request.method), headers: Transfer.HTTPHeaders(request.headerFields),
                  body: body)
    }
}

extension HTTPRequest {
    /// The head of a Transfer request: its method, the scheme, authority
    /// (host and port, as in the URL) and path with query of its URL, and
    /// its header fields. The body and Transfer's own properties (timeout,
    /// cache policy, credential...) have no place in an `HTTPRequest`.
    ///
    /// A method token that `HTTPRequest.Method` refuses becomes `GET`; it
    /// cannot happen with the methods Transfer sends.
    public init(_ request: Transfer.Request) {
        let components = URLComponents(url: request.url, resolvingAgainstBaseURL: false)
        var authority = components?.percentEncodedHost ?? ""
        if let port = components?.port { authority += ":\(port)" }
        var path = components?.percentEncodedPath ?? "/"
        if path.isEmpty { path = "/" }
        if let query = components?.percentEncodedQuery { path += "?" + query }
        self.init(method: HTTPRequest.Method(request.method) ?? .get, scheme: request.url.scheme,
                  authority: authority, path: path, headerFields: HTTPFields(request.headers))
    }
}

// MARK: - Responses

extension HTTPTypes.HTTPResponse {
    /// The head of a Transfer response: its status code and header fields
    /// (in order, repeated names kept, names spelled as received).
    ///
    /// Transfer does not keep the reason phrase (HTTP/2 and 3 have none): the
    /// status's `reasonPhrase` is empty. The URL and HTTP version have no
    /// place in an `HTTPTypes.HTTPResponse`.
    public init(_ response: Transfer.HTTPResponse) {
        let code = min(max(response.statusCode, 0), 999)
        self.init(status: .init(code: code), headerFields: HTTPFields(response.headers))
    }
}

extension Transfer.HTTPResponse {
    /// A Transfer response from an `HTTPTypes.HTTPResponse` (for tests,
    /// mocks and middlewares): its status code and header fields, with the
    /// URL it answers, which an `HTTPTypes.HTTPResponse` does not carry.
    public init(_ response: HTTPTypes.HTTPResponse, url: URL, httpVersion: String = "1.1") {
        self.init(url: url, statusCode: response.status.code, headers: Transfer.HTTPHeaders(response.headerFields),
                  httpVersion: httpVersion)
    }

    /// This response's head as an `HTTPTypes.HTTPResponse`; see
    /// `HTTPTypes.HTTPResponse.init(_:)`.
    public var httpTypesResponse: HTTPTypes.HTTPResponse { HTTPTypes.HTTPResponse(self) }
}

extension Transfer.Request {
    /// This request's head as an `HTTPTypes.HTTPRequest`; see `HTTPRequest.init(_:)`.
    public var httpTypesRequest: HTTPRequest { HTTPRequest(self) }
}
