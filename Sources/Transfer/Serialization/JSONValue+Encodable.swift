import FoundationEssentials

extension JSONValue {
    /// The JSON value of any `Encodable`, so that typed parameters can go
    /// through every request serializer: ``HTTPRequestSerializer`` puts them in
    /// the query string or a form body, ``JSONRequestSerializer`` in a JSON
    /// body (Alamofire's `URLEncodedFormParameterEncoder` and
    /// `JSONParameterEncoder`).
    ///
    /// ```swift
    /// struct Search: Encodable { var q: String; var page: Int }
    /// let request = try HTTPRequestSerializer().request(
    ///     method: .get, urlString: "https://example.com/search",
    ///     parameters: try JSONValue(encoding: Search(q: "swift", page: 2)))
    /// ```
    ///
    /// `encoder` decides dates, data, keys and non-finite numbers (its
    /// `outputFormatting` does not matter).
    ///
    /// - Throws: ``TransferError/Code/invalidRequest`` when `value` cannot be
    ///   encoded (the encoder's error is the underlying error).
    public init(encoding value: some Encodable, encoder: JSONEncoder = JSONEncoder()) throws(TransferError) {
        let data: Data
        do {
            data = try encoder.encode(value)
        } catch {
            throw TransferError(
                .invalidRequest, "the parameters cannot be encoded: \(error)", underlying: error)
        }
        do {
            self = try JSONDecoder().decode(JSONValue.self, from: data)
        } catch {
            throw TransferError(
                .invalidRequest, "the encoded parameters are not JSON: \(error)", underlying: error)
        }
    }
}

extension RequestSerializer {
    /// Returns `request` with `parameters` encoded into it as this serializer
    /// encodes a ``JSONValue`` (query string, form or JSON body).
    ///
    /// - Throws: ``TransferError/Code/invalidRequest`` when the parameters
    ///   cannot be encoded or the request is invalid.
    public func request(bySerializing request: Request, encodable parameters: some Encodable)
        throws(TransferError) -> Request
    {
        try self.request(bySerializing: request, parameters: JSONValue(encoding: parameters))
    }
}
