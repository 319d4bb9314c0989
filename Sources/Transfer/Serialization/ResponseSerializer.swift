import FoundationEssentials

/// Validates a response and turns its body into a value (AFNetworking's
/// `AFURLResponseSerialization` with `AFHTTPResponseSerializer`'s validation).
///
/// A session manager stores one as `any ResponseSerializer` (or
/// ``AnyResponseSerializer``) and, when a task completes, calls
/// ``serializedValue(response:data:error:)`` off the engine thread; generic
/// code calls ``serialize(response:data:error:)`` and gets a typed value.
///
/// Validation errors carry the response, the body and the status code
/// (``TransferError/response``, ``TransferError/responseData``,
/// ``TransferError/httpStatus``). When a body also fails to parse, the
/// parse error is chained as ``TransferError/underlyingError`` of the
/// validation error, so both reach the caller.
public protocol ResponseSerializer: Sendable {
    /// What a successful serialization returns.
    associatedtype SerializedObject: Sendable

    /// Status codes that pass validation (default 200–299).
    var acceptableStatusCodes: StatusCodeSet { get set }
    /// MIME types that pass validation (lower-case, no parameters); nil accepts any.
    var acceptableContentTypes: Set<String>? { get set }

    /// Throws when the status code or content type is not acceptable. A nil
    /// response (not HTTP) passes; an empty body passes the content-type check.
    func validate(response: HTTPResponse?, data: Data?) throws(TransferError)

    /// Validates and decodes a response.
    ///
    /// - Parameters:
    ///   - response: The response head, nil if none arrived.
    ///   - data: The body, nil if none.
    ///   - error: The transfer's own error, if it failed; it is rethrown with
    ///     the response and body attached.
    /// - Throws: ``TransferError/Code/unacceptableStatusCode``,
    ///   ``TransferError/Code/unacceptableContentType``,
    ///   ``TransferError/Code/serializationFailed`` or `error`.
    func serialize(response: HTTPResponse?, data: Data?, error: TransferError?) throws(TransferError)
        -> SerializedObject
}

extension ResponseSerializer {
    public func validate(response: HTTPResponse?, data: Data?) throws(TransferError) {
        try ResponseValidation.validate(
            response: response, data: data, statusCodes: acceptableStatusCodes, contentTypes: acceptableContentTypes)
    }

    /// ``serialize(response:data:error:)`` with the result erased, an optional
    /// result flattened (nil when the serializer produced none): for a session
    /// manager that holds `any ResponseSerializer`.
    public func serializedValue(response: HTTPResponse?, data: Data?, error: TransferError?)
        throws(TransferError) -> (any Sendable)?
    {
        flattenOptional(try serialize(response: response, data: data, error: error))
    }

    /// The common start of `serialize`: rethrows a transfer error, throws a
    /// content-type failure, and returns a status-code failure for the caller
    /// to throw after (optionally) parsing the body to chain a parse error.
    package func preflight(response: HTTPResponse?, data: Data?, error: TransferError?) throws(TransferError)
        -> TransferError?
    {
        if let error { throw ResponseValidation.attaching(response: response, data: data, to: error) }
        do {
            try validate(response: response, data: data)
            return nil
        } catch {
            if error.chainContains(.unacceptableContentType) { throw error }
            return error
        }
    }
}

/// AFNetworking's `AFHTTPResponseSerializer`: validates, then returns the
/// body as it is (empty `Data` when there is none).
public struct HTTPResponseSerializer: ResponseSerializer {
    public var acceptableStatusCodes = ResponseValidation.successStatusCodes
    public var acceptableContentTypes: Set<String>?

    /// A serializer that validates status and, when given, content type.
    public init(acceptableContentTypes: Set<String>? = nil) {
        self.acceptableContentTypes = acceptableContentTypes
    }

    public func serialize(response: HTTPResponse?, data: Data?, error: TransferError?) throws(TransferError) -> Data {
        if let failure = try preflight(response: response, data: data, error: error) { throw failure }
        return data ?? Data()
    }
}

/// The raw body; another name for ``HTTPResponseSerializer``.
public typealias DataResponseSerializer = HTTPResponseSerializer

/// A response serializer of any kind, usable as a stored property.
/// Its properties and validation are the wrapped serializer's.
public struct AnyResponseSerializer: ResponseSerializer {
    /// The wrapped serializer.
    public var base: any ResponseSerializer

    /// Wraps `base`, erasing its type.
    public init(_ base: some ResponseSerializer) {
        if let erased = base as? AnyResponseSerializer {
            self.base = erased.base
        } else {
            self.base = base
        }
    }

    public var acceptableStatusCodes: StatusCodeSet {
        get { base.acceptableStatusCodes }
        set { base.acceptableStatusCodes = newValue }
    }

    public var acceptableContentTypes: Set<String>? {
        get { base.acceptableContentTypes }
        set { base.acceptableContentTypes = newValue }
    }

    public func validate(response: HTTPResponse?, data: Data?) throws(TransferError) {
        try base.validate(response: response, data: data)
    }

    public func serialize(response: HTTPResponse?, data: Data?, error: TransferError?) throws(TransferError)
        -> (any Sendable)?
    {
        try base.serializedValue(response: response, data: data, error: error)
    }
}

/// AFNetworking's validation rules, shared by every serializer.
public enum ResponseValidation {
    /// 200–299.
    public static let successStatusCodes = StatusCodeSet(200..<300)

    /// Throws ``TransferError/Code/unacceptableContentType`` when the body is
    /// not empty and its MIME type is missing or not in `contentTypes`, and
    /// ``TransferError/Code/unacceptableStatusCode`` when the status is not in
    /// `statusCodes`. When both fail, the status error is thrown with the
    /// content-type error as its underlying error. A nil response passes.
    public static func validate(
        response: HTTPResponse?, data: Data?, statusCodes: StatusCodeSet, contentTypes: Set<String>?
    ) throws(TransferError) {
        guard let response else { return }
        var failure: TransferError?
        if let contentTypes, let data, !data.isEmpty {
            let mimeType = response.mimeType
            let accepted = mimeType.map { type in contentTypes.contains { $0.lowercased() == type } } ?? false
            if !accepted {
                failure = makeError(
                    .unacceptableContentType,
                    "Request failed: unacceptable content-type: \(mimeType ?? "none")", response: response, data: data)
            }
        }
        if !statusCodes.contains(response.statusCode) {
            var statusError = makeError(
                .unacceptableStatusCode,
                "Request failed: \(reasonPhrase(for: response.statusCode)) (\(response.statusCode))",
                response: response, data: data)
            statusError.underlyingError = failure
            failure = statusError
        }
        if let failure { throw failure }
    }

    static func makeError(_ code: TransferError.Code, _ message: String, response: HTTPResponse?, data: Data?)
        -> TransferError
    {
        attaching(response: response, data: data, to: TransferError(code, message, url: response?.url))
    }

    /// `error` with the response, body, status and URL filled in where missing.
    static func attaching(response: HTTPResponse?, data: Data?, to error: TransferError) -> TransferError {
        var result = error
        if result.response == nil { result.response = response }
        if result.responseData == nil { result.responseData = data }
        if result.httpStatus == nil { result.httpStatus = response?.statusCode }
        if result.url == nil { result.url = response?.url }
        return result
    }

    /// A ``TransferError/Code/serializationFailed`` error with the parser's reason.
    package static func serializationError(
        _ what: String, reason: any Error, response: HTTPResponse?, data: Data?
    ) -> TransferError {
        makeSerializationError("\(what): \(reason)", underlying: reason, response: response, data: data)
    }

    static func makeSerializationError(
        _ message: String, underlying: (any Error)? = nil, response: HTTPResponse?, data: Data?
    ) -> TransferError {
        var error = makeError(.serializationFailed, message, response: response, data: data)
        error.underlyingError = underlying
        return error
    }

    /// The status line text AFNetworking takes from `NSHTTPURLResponse`, lower-case.
    public static func reasonPhrase(for statusCode: Int) -> String {
        switch statusCode {
        case 100: return "continue"
        case 101: return "switching protocols"
        case 200: return "no error"
        case 201: return "created"
        case 202: return "accepted"
        case 203: return "non-authoritative information"
        case 204: return "no content"
        case 205: return "reset content"
        case 206: return "partial content"
        case 300: return "multiple choices"
        case 301: return "moved permanently"
        case 302: return "found"
        case 303: return "see other"
        case 304: return "not modified"
        case 307: return "temporary redirect"
        case 308: return "permanent redirect"
        case 400: return "bad request"
        case 401: return "unauthorized"
        case 402: return "payment required"
        case 403: return "forbidden"
        case 404: return "not found"
        case 405: return "method not allowed"
        case 406: return "unacceptable"
        case 407: return "proxy authentication required"
        case 408: return "request timed out"
        case 409: return "conflict"
        case 410: return "no longer exists"
        case 411: return "length required"
        case 412: return "precondition failed"
        case 413: return "request too large"
        case 414: return "requested URL too long"
        case 415: return "unsupported media type"
        case 416: return "requested range not satisfiable"
        case 417: return "expectation failed"
        case 422: return "unprocessable entity"
        case 429: return "too many requests"
        case 500: return "internal server error"
        case 501: return "unimplemented"
        case 502: return "bad gateway"
        case 503: return "service unavailable"
        case 504: return "gateway timed out"
        case 505: return "HTTP version not supported"
        case 100..<200: return "informational"
        case 200..<300: return "success"
        case 300..<400: return "redirected"
        case 400..<500: return "client error"
        case 500..<600: return "server error"
        default: return "unknown status"
        }
    }
}

extension TransferError {
    /// True when this error or one in its ``underlyingError`` chain has `code`.
    public func chainContains(_ code: Code) -> Bool {
        var current: TransferError? = self
        while let error = current {
            if error.code == code { return true }
            current = error.underlyingError as? TransferError
        }
        return false
    }

    /// This error with `error` appended at the end of its underlying chain
    /// (through nested ``TransferError``s; a foreign underlying error ends the
    /// chain and is kept, `error` then goes nowhere).
    package func chaining(_ error: TransferError) -> TransferError {
        var result = self
        if let underlying = result.underlyingError {
            guard let nested = underlying as? TransferError else { return result }
            result.underlyingError = nested.chaining(error)
        } else {
            result.underlyingError = error
        }
        return result
    }
}

/// Recognises an `Optional` hidden inside `any Sendable`.
private protocol OptionalInspecting {
    var isNone: Bool { get }
}

extension Optional: OptionalInspecting {
    fileprivate var isNone: Bool { self == nil }
}

/// nil for an `Optional.none` inside `value`, otherwise `value` (a cast such as
/// `value as? JSONValue` sees through a wrapped `Optional.some`).
func flattenOptional(_ value: any Sendable) -> (any Sendable)? {
    if let optional = value as? any OptionalInspecting, optional.isNone { return nil }
    return value
}
