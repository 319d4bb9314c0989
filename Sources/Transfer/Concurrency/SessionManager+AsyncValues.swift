import FoundationEssentials

/// Validated, decoded requests in one call (Alamofire's
/// `validate().serializingDecodable(T.self).value`).
///
/// Each sends the request through ``SessionManager/data(for:)`` (so a request
/// with no body and nobody observing takes the fast path and makes no task),
/// then validates and serializes in the calling Swift task. Cancelling the
/// Swift task cancels the transfer (``TransferError/Code/cancelled``).
extension SessionManager {
    /// Sends `request` and returns what `serializer` makes of the response,
    /// after its validation (acceptable status codes and content types).
    ///
    /// ```swift
    /// var serializer = StringResponseSerializer()
    /// serializer.acceptableStatusCodes = StatusCodeSet(200..<300).union([404])
    /// let text = try await session.value(for: request, using: serializer)
    /// ```
    ///
    /// - Throws: ``TransferError``: a transport failure,
    ///   ``TransferError/Code/unacceptableStatusCode`` or
    ///   ``TransferError/Code/unacceptableContentType`` (with
    ///   ``TransferError/response`` and ``TransferError/responseData``), or the
    ///   serializer's ``TransferError/Code/serializationFailed``.
    public func value<Serializer: ResponseSerializer>(for request: Request, using serializer: Serializer)
        async throws(TransferError) -> Serializer.SerializedObject
    {
        let (data, response) = try await data(for: request)
        return try serializer.serialize(response: response, data: data, error: nil)
    }

    /// Sends `request`, validates the response (status 200–299 and a JSON
    /// content type: ``JSONResponseSerializer/defaultContentTypes``) and
    /// decodes the body as `type`.
    ///
    /// ```swift
    /// let user = try await session.decodable(User.self, for: Request("https://api.example.com/me"))
    /// let created = try await session.decodable(Created.self,
    ///                                            for: Request(url).withJSONBody(newUser))
    /// ```
    ///
    /// - Parameters:
    ///   - type: The type to decode.
    ///   - request: The request to send; see ``Request/withJSONBody(_:encoder:)``
    ///     for a JSON body.
    ///   - decoder: The decoder for the body.
    ///   - acceptableStatusCodes: The statuses that pass; others throw without decoding.
    ///   - acceptableContentTypes: The MIME types a non-empty body may have
    ///     (add `application/problem+json` and the like here); nil accepts any.
    /// - Throws: as ``value(for:using:)``; an empty body decodes only as an `Optional`.
    public func decodable<T: Decodable & Sendable>(
        _ type: T.Type = T.self, for request: Request, decoder: JSONDecoder = JSONDecoder(),
        acceptableStatusCodes: StatusCodeSet = ResponseValidation.successStatusCodes,
        acceptableContentTypes: Set<String>? = JSONResponseSerializer.defaultContentTypes
    ) async throws(TransferError) -> T {
        var serializer = DecodableResponseSerializer(type, decoder: decoder)
        serializer.acceptableStatusCodes = acceptableStatusCodes
        serializer.acceptableContentTypes = acceptableContentTypes
        return try await value(for: request, using: serializer)
    }

    /// Sends `request` and returns the body once the response passed
    /// validation: ``data(for:)`` with the checks of ``ResponseValidation``.
    ///
    /// - Parameters:
    ///   - request: The request to send.
    ///   - statusCodes: The statuses that pass (default 200–299).
    ///   - contentTypes: The MIME types a non-empty body may have; nil accepts any.
    /// - Throws: as ``value(for:using:)``.
    public func validatedData(
        for request: Request, statusCodes: StatusCodeSet = ResponseValidation.successStatusCodes,
        contentTypes: Set<String>? = nil
    ) async throws(TransferError) -> (Data, HTTPResponse) {
        let (data, response) = try await data(for: request)
        try ResponseValidation.validate(response: response, data: data, statusCodes: statusCodes,
                                        contentTypes: contentTypes)
        return (data, response)
    }

    /// Uploads `form` as a streamed `multipart/form-data` body and returns
    /// the response body (Alamofire's `upload(multipartFormData:to:)`).
    /// A GET request is sent as POST. Status codes are not checked: decode
    /// with ``decodable(_:for:decoder:acceptableStatusCodes:acceptableContentTypes:)`` and
    /// `Request.withMultipartBody(_:)` to validate.
    ///
    /// - Throws: ``TransferError``: an invalid part or boundary
    ///   (``TransferError/Code/invalidRequest``), a file part that cannot be
    ///   read, or a transport failure.
    public func upload(multipartFormData form: MultipartFormData, for request: Request)
        async throws(TransferError) -> (Data, HTTPResponse)
    {
        try await data(for: request.withMultipartBody(form))
    }

    /// ``upload(multipartFormData:for:)`` with the form built by `build`,
    /// which runs once, at once, on the calling task.
    public func upload(
        for request: Request, multipartFormData build: (inout MultipartFormData) throws -> Void
    ) async throws(TransferError) -> (Data, HTTPResponse) {
        try await data(for: request.withMultipartBody(build))
    }
}
