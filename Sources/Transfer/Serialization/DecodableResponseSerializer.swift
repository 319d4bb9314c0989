import FoundationEssentials

/// Validates a JSON response and decodes it as `Value` with a `JSONDecoder`.
///
/// - Acceptable content types: as ``JSONResponseSerializer``.
/// - An empty body decodes as nil when `Value` is an `Optional`, and
///   otherwise throws ``TransferError/Code/serializationFailed``.
/// - A status-code failure is thrown without decoding: an error body rarely
///   has the success type's shape (``TransferError/responseData`` keeps it).
/// - A decoding failure throws ``TransferError/Code/serializationFailed``
///   with the `DecodingError` as ``TransferError/underlyingError``.
public struct DecodableResponseSerializer<Value: Decodable & Sendable>: ResponseSerializer {
    public var acceptableStatusCodes = ResponseValidation.successStatusCodes
    public var acceptableContentTypes: Set<String>? = JSONResponseSerializer.defaultContentTypes
    /// The decoder used for the body.
    public var decoder: JSONDecoder

    /// A serializer that decodes `Value` from JSON with `decoder`.
    public init(_ type: Value.Type = Value.self, decoder: JSONDecoder = JSONDecoder()) {
        self.decoder = decoder
    }

    public func serialize(response: HTTPResponse?, data: Data?, error: TransferError?) throws(TransferError) -> Value {
        if let validationError = try preflight(response: response, data: data, error: error) {
            throw validationError
        }
        guard let data, !data.isEmpty else {
            if let optionalType = Value.self as? any ExpressibleByNilLiteral.Type,
                let empty = optionalType.init(nilLiteral: ()) as? Value
            {
                return empty
            }
            throw ResponseValidation.makeSerializationError(
                "the body is empty; expected \(Value.self)", response: response, data: data)
        }
        do {
            return try decoder.decode(Value.self, from: data)
        } catch {
            throw ResponseValidation.serializationError(
                "the body does not decode as \(Value.self)", reason: error, response: response, data: data)
        }
    }
}
