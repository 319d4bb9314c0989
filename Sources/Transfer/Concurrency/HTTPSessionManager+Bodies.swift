import FoundationEssentials
import Glibc

/// A body chosen per call instead of by ``HTTPSessionManager/requestSerializer``:
/// one manager sends form parameters (its serializer) and JSON values (these
/// calls) side by side.
extension HTTPSessionManager {
    /// POSTs `body` as JSON to `path` and decodes the response as `type`.
    ///
    /// The request gets the request serializer's defaults (headers, timeout,
    /// cache policy) and `headers` over them, then `body` encoded by `encoder`
    /// with `Content-Type: application/json`. The response is validated with
    /// the acceptable status codes and content types of
    /// ``HTTPSessionManager/responseSerializer``, as the `as:` verbs do.
    ///
    /// ```swift
    /// let created = try await api.post("users", json: NewUser(name: "Ada"), as: Created.self)
    /// ```
    ///
    /// - Throws: ``TransferError``: an unencodable body or bad path
    ///   (``TransferError/Code/invalidRequest``), a transport failure, an
    ///   unacceptable status or content type, or a body that does not decode.
    public func post<T: Decodable & Sendable>(
        _ path: String, json body: some Encodable, headers: HTTPHeaders? = nil, as type: T.Type,
        encoder: JSONEncoder = JSONEncoder(), decoder: JSONDecoder = JSONDecoder()
    ) async throws(TransferError) -> T {
        try await send(.post, path, json: body, headers: headers, as: type, encoder: encoder, decoder: decoder)
    }

    /// PUTs `body` as JSON to `path` and decodes the response as `type`;
    /// see ``post(_:json:headers:as:encoder:decoder:)``.
    public func put<T: Decodable & Sendable>(
        _ path: String, json body: some Encodable, headers: HTTPHeaders? = nil, as type: T.Type,
        encoder: JSONEncoder = JSONEncoder(), decoder: JSONDecoder = JSONDecoder()
    ) async throws(TransferError) -> T {
        try await send(.put, path, json: body, headers: headers, as: type, encoder: encoder, decoder: decoder)
    }

    /// PATCHes `path` with `body` as JSON and decodes the response as `type`;
    /// see ``post(_:json:headers:as:encoder:decoder:)``.
    public func patch<T: Decodable & Sendable>(
        _ path: String, json body: some Encodable, headers: HTTPHeaders? = nil, as type: T.Type,
        encoder: JSONEncoder = JSONEncoder(), decoder: JSONDecoder = JSONDecoder()
    ) async throws(TransferError) -> T {
        try await send(.patch, path, json: body, headers: headers, as: type, encoder: encoder, decoder: decoder)
    }

    private func send<T: Decodable & Sendable>(
        _ method: HTTPMethod, _ path: String, json body: some Encodable, headers: HTTPHeaders?, as type: T.Type,
        encoder: JSONEncoder, decoder: JSONDecoder
    ) async throws(TransferError) -> T {
        var request = try self.request(method: method, path: path, parameters: nil, headers: headers)
        // The serializer may have set a form Content-Type for the empty
        // parameters; the JSON body brings its own unless `headers` set one.
        if headers?["Content-Type"] == nil { request.headers["Content-Type"] = nil }
        request = try request.withJSONBody(body, encoder: encoder)
        let current = responseSerializer
        var serializer = DecodableResponseSerializer(type, decoder: decoder)
        serializer.acceptableStatusCodes = current.acceptableStatusCodes
        serializer.acceptableContentTypes = current.acceptableContentTypes
        return try await session.value(for: request, using: serializer)
    }
}
