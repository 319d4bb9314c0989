import FoundationEssentials

/// Per-request bodies: each request chooses its own encoding, so one session
/// (or one ``HTTPSessionManager``) sends JSON, form and multipart bodies side
/// by side (Alamofire's `encoder:` argument per request).
///
/// Each returns a copy of the request with the body and its `Content-Type`
/// (a `Content-Type` already set is kept); a GET becomes a POST, as the
/// `upload` calls do; any other method is kept.
extension Request {
    /// The request with `value` encoded as a JSON body (`application/json`).
    ///
    /// ```swift
    /// let request = try Request("https://api.example.com/v1/login").withJSONBody(login)
    /// ```
    ///
    /// - Parameters:
    ///   - value: The body, encoded with `encoder` as it is (its keys in the
    ///     encoder's order, dates and data in its strategies).
    ///   - encoder: The encoder to use.
    /// - Throws: ``TransferError/Code/invalidRequest`` when `value` cannot be
    ///   encoded; the encoder's error is the underlying error.
    public func withJSONBody(_ value: some Encodable, encoder: JSONEncoder = JSONEncoder())
        throws(TransferError) -> Request
    {
        let data: Data
        do {
            data = try encoder.encode(value)
        } catch {
            throw TransferError(.invalidRequest, "the body cannot be encoded as JSON: \(error)", url: url,
                                underlying: error)
        }
        var request = bodyCarrying()
        request.body = .data(data)
        if request.headers["Content-Type"] == nil { request.headers["Content-Type"] = "application/json" }
        return request
    }

    /// The request with `value` as an `application/x-www-form-urlencoded`
    /// body, encoded as ``HTTPRequestSerializer`` encodes parameters
    /// (nested values as `a[b]=c`, arrays as `a[]=1&a[]=2`). For DELETE and
    /// HEAD, which carry parameters in the URI, the values go in the query.
    ///
    /// - Throws: ``TransferError/Code/invalidRequest`` when `value` cannot be
    ///   encoded.
    public func withFormBody(_ value: some Encodable) throws(TransferError) -> Request {
        let original = bodyCarrying()
        var request = try HTTPRequestSerializer().request(bySerializing: original, encodable: value)
        // The serializer also adds its default headers (Accept-Language):
        // only the body's type is taken, the request's headers stay its own.
        let type = request.headers["Content-Type"]
        request.headers = original.headers
        if request.headers["Content-Type"] == nil { request.headers["Content-Type"] = type }
        return request
    }

    /// The request with `form` as a streamed `multipart/form-data` body, with
    /// its `Content-Type` (boundary included) and `Content-Length`. Files
    /// are read as the body goes out, never whole into memory.
    ///
    /// - Throws: ``TransferError/Code/invalidRequest`` when a part header or
    ///   the boundary is invalid.
    public func withMultipartBody(_ form: MultipartFormData) throws(TransferError) -> Request {
        var request = bodyCarrying()
        request.headers["Content-Type"] = nil
        return try form.request(byFinalizing: request)
    }

    /// The request with a `multipart/form-data` body built by `build`.
    ///
    /// ```swift
    /// let request = try Request("https://example.com/avatar").withMultipartBody { form in
    ///     form.append(formField: "ada", name: "user")
    ///     try form.append(fileURL: avatar, name: "avatar")
    /// }
    /// ```
    ///
    /// - Parameter build: Runs once, at once, on the calling thread.
    /// - Throws: What `build` throws as a ``TransferError``; any other error
    ///   as ``TransferError/Code/invalidRequest`` with it underneath; or as
    ///   ``withMultipartBody(_:)``.
    public func withMultipartBody(_ build: (inout MultipartFormData) throws -> Void) throws(TransferError) -> Request {
        var form = MultipartFormData()
        do {
            try build(&form)
        } catch let error as TransferError {
            throw error
        } catch {
            throw TransferError(.invalidRequest, "building the multipart body failed: \(error)", url: url,
                                underlying: error)
        }
        return try withMultipartBody(form)
    }

    /// A copy that may carry a body: GET becomes POST (URLSession's rule for
    /// upload tasks); any other method stays. The one place of that rule.
    func bodyCarrying() -> Request {
        var request = self
        if request.method == .get { request.method = .post }
        return request
    }
}
