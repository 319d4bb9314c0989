import FoundationEssentials
import Glibc

/// async/await verbs. Each builds the request like its closure twin, runs the
/// task, and serializes the response in the calling Swift task (never on the
/// engine thread or a session queue). Cancelling the Swift task cancels the
/// transfer, which then throws ``TransferError/Code/cancelled``.
///
/// Two shapes per verb:
/// - `as: T.self` decodes the body with a ``DecodableResponseSerializer``
///   that takes its acceptable status codes and content types from
///   ``HTTPSessionManager/responseSerializer``;
/// - without `as:`, the value is the response serializer's (a ``JSONValue``
///   by default) together with the response.
///
/// Every variant throws ``TransferError``: a request that cannot be built
/// (``TransferError/Code/invalidRequest``), a transport failure, an
/// unacceptable status or content type (with ``TransferError/response`` and
/// ``TransferError/responseData`` attached), or a body that does not decode
/// (``TransferError/Code/serializationFailed``).
extension HTTPSessionManager {
    /// A value and the response it came from.
    public typealias Serialized = (value: (any Sendable)?, response: HTTPResponse)

    // MARK: Decoded

    /// GETs `path` and decodes the body as `type`.
    public func get<T: Decodable & Sendable>(
        _ path: String, parameters: JSONValue? = nil, headers: HTTPHeaders? = nil, as type: T.Type,
        decoder: JSONDecoder = JSONDecoder()
    ) async throws(TransferError) -> T {
        try await decoded(.get, path, parameters, headers, type, decoder)
    }

    /// POSTs `parameters` to `path` and decodes the body as `type`.
    public func post<T: Decodable & Sendable>(
        _ path: String, parameters: JSONValue? = nil, headers: HTTPHeaders? = nil, as type: T.Type,
        decoder: JSONDecoder = JSONDecoder()
    ) async throws(TransferError) -> T {
        try await decoded(.post, path, parameters, headers, type, decoder)
    }

    /// PUTs `parameters` to `path` and decodes the body as `type`.
    public func put<T: Decodable & Sendable>(
        _ path: String, parameters: JSONValue? = nil, headers: HTTPHeaders? = nil, as type: T.Type,
        decoder: JSONDecoder = JSONDecoder()
    ) async throws(TransferError) -> T {
        try await decoded(.put, path, parameters, headers, type, decoder)
    }

    /// PATCHes `path` with `parameters` and decodes the body as `type`.
    public func patch<T: Decodable & Sendable>(
        _ path: String, parameters: JSONValue? = nil, headers: HTTPHeaders? = nil, as type: T.Type,
        decoder: JSONDecoder = JSONDecoder()
    ) async throws(TransferError) -> T {
        try await decoded(.patch, path, parameters, headers, type, decoder)
    }

    /// DELETEs `path` and decodes the body as `type`.
    public func delete<T: Decodable & Sendable>(
        _ path: String, parameters: JSONValue? = nil, headers: HTTPHeaders? = nil, as type: T.Type,
        decoder: JSONDecoder = JSONDecoder()
    ) async throws(TransferError) -> T {
        try await decoded(.delete, path, parameters, headers, type, decoder)
    }

    // MARK: With the current response serializer

    /// GETs `path`; the value is ``HTTPSessionManager/responseSerializer``'s.
    public func get(_ path: String, parameters: JSONValue? = nil, headers: HTTPHeaders? = nil)
        async throws(TransferError) -> Serialized
    {
        try await serialized(.get, path, parameters, headers)
    }

    /// Sends HEAD and returns the response head once it passed validation.
    public func head(_ path: String, parameters: JSONValue? = nil, headers: HTTPHeaders? = nil)
        async throws(TransferError) -> HTTPResponse
    {
        try await serialized(.head, path, parameters, headers).response
    }

    /// `POST` of `parameters` as the request serializer encodes them; returns
    /// the serialized response. Throws a ``TransferError`` (transport, status or
    /// serialization). AFNetworking's `POST:parameters:headers:progress:success:failure:`.
    public func post(_ path: String, parameters: JSONValue? = nil, headers: HTTPHeaders? = nil)
        async throws(TransferError) -> Serialized
    {
        try await serialized(.post, path, parameters, headers)
    }

    /// POSTs a streamed `multipart/form-data` body (see
    /// ``HTTPSessionManager/POST(_:parameters:headers:constructingBody:progress:success:failure:)``).
    public func post(
        _ path: String, parameters: JSONValue? = nil, headers: HTTPHeaders? = nil,
        constructingBody: (inout MultipartFormData) throws -> Void
    ) async throws(TransferError) -> Serialized {
        let request = try multipartFormRequest(
            method: .post, path: path, parameters: parameters, headers: headers, constructingBody: constructingBody)
        let exchange = try await send(session.uploadTask(withStreamedRequest: request))
        return try Self.finish(exchange, with: responseSerializer, url: request.url)
    }

    /// `PUT`, as ``post(_:parameters:headers:)``.
    public func put(_ path: String, parameters: JSONValue? = nil, headers: HTTPHeaders? = nil)
        async throws(TransferError) -> Serialized
    {
        try await serialized(.put, path, parameters, headers)
    }

    /// `PATCH`, as ``post(_:parameters:headers:)``.
    public func patch(_ path: String, parameters: JSONValue? = nil, headers: HTTPHeaders? = nil)
        async throws(TransferError) -> Serialized
    {
        try await serialized(.patch, path, parameters, headers)
    }

    /// `DELETE`, as ``post(_:parameters:headers:)``.
    public func delete(_ path: String, parameters: JSONValue? = nil, headers: HTTPHeaders? = nil)
        async throws(TransferError) -> Serialized
    {
        try await serialized(.delete, path, parameters, headers)
    }

    // MARK: Shared

    /// What a finished task left: its response, body and transfer error.
    private struct Exchange: Sendable {
        var response: HTTPResponse?
        var data: Data?
        var error: TransferError?
    }

    private func decoded<T: Decodable & Sendable>(
        _ method: HTTPMethod, _ path: String, _ parameters: JSONValue?, _ headers: HTTPHeaders?, _ type: T.Type,
        _ decoder: JSONDecoder
    ) async throws(TransferError) -> T {
        let request = try self.request(method: method, path: path, parameters: parameters, headers: headers)
        let exchange = try await send(session.dataTask(with: request))
        let current = responseSerializer
        var serializer = DecodableResponseSerializer(type, decoder: decoder)
        serializer.acceptableStatusCodes = current.acceptableStatusCodes
        serializer.acceptableContentTypes = current.acceptableContentTypes
        return try serializer.serialize(response: exchange.response, data: exchange.data, error: exchange.error)
    }

    private func serialized(
        _ method: HTTPMethod, _ path: String, _ parameters: JSONValue?, _ headers: HTTPHeaders?
    ) async throws(TransferError) -> Serialized {
        let request = try self.request(method: method, path: path, parameters: parameters, headers: headers)
        let exchange = try await send(session.dataTask(with: request))
        return try Self.finish(exchange, with: responseSerializer, url: request.url)
    }

    private static func finish(_ exchange: Exchange, with serializer: any ResponseSerializer, url: URL)
        throws(TransferError) -> Serialized
    {
        let value = try serializer.serializedValue(
            response: exchange.response, data: exchange.data, error: exchange.error)
        guard let response = exchange.response else {
            throw TransferError(.badResponse, "the task completed without a response", url: url)
        }
        return (value, response)
    }

    /// Resumes `task` and waits for it; the transfer's own error is returned
    /// in the exchange, for the serializer to attach the response and body.
    private func send(_ task: DataTask) async throws(TransferError) -> Exchange {
        try await session.run(task) { _, resume in
            DataTask.Waiter { response, data, error in
                resume(.success(Exchange(response: response, data: data, error: error)))
            }
        }
    }
}
