import Foundation

/// Validates and parses JSON into a ``JSONValue`` (AFNetworking's
/// `AFJSONResponseSerializer`).
///
/// - Acceptable content types: `application/json`, `text/json`, `text/javascript`.
/// - An empty body, or a single space (Rails' `head :ok`), gives nil without error.
/// - Invalid JSON throws ``TransferError/Code/serializationFailed`` with the
///   parser's error as ``TransferError/underlyingError``.
/// - With an unacceptable status code the body is still parsed, so a parse
///   failure is chained under the status error.
/// - ``removesKeysWithNullValues`` drops null members and null array elements
///   at every depth.
public struct JSONResponseSerializer: ResponseSerializer {
    /// The content types accepted by default.
    public static let defaultContentTypes: Set<String> = ["application/json", "text/json", "text/javascript"]

    public var acceptableStatusCodes = ResponseValidation.successStatusCodes
    public var acceptableContentTypes: Set<String>? = JSONResponseSerializer.defaultContentTypes
    /// `JSONSerialization` reading options (`.fragmentsAllowed`, `.json5Allowed`,
    /// `.topLevelDictionaryAssumed`; the mutability options mean nothing for
    /// value types). Default none.
    public var readingOptions: JSONSerialization.ReadingOptions
    /// Drop keys whose value is `null` (AFNetworking's `removesKeysWithNullValues`).
    public var removesKeysWithNullValues: Bool

    /// A JSON serializer with `readingOptions`.
    public init(readingOptions: JSONSerialization.ReadingOptions = [], removesKeysWithNullValues: Bool = false) {
        self.readingOptions = readingOptions
        self.removesKeysWithNullValues = removesKeysWithNullValues
    }

    public func serialize(response: HTTPResponse?, data: Data?, error: TransferError?) throws(TransferError)
        -> JSONValue?
    {
        let validationError = try preflight(response: response, data: data, error: error)
        guard let data, !data.isEmpty, data != Self.singleSpace else {
            if let validationError { throw validationError }
            return nil
        }
        let value: JSONValue
        do {
            value = try Self.parse(data, options: readingOptions)
        } catch {
            let parseError = ResponseValidation.serializationError(
                "the body is not valid JSON", reason: error, response: response, data: data)
            throw validationError.map { $0.chaining(parseError) } ?? parseError
        }
        if let validationError { throw validationError }
        return removesKeysWithNullValues ? value.removingNullValues() : value
    }

    private static let singleSpace = Data(" ".utf8)

    /// Parses `data` with `JSONSerialization` and converts the result.
    public static func parse(_ data: Data, options: JSONSerialization.ReadingOptions = []) throws -> JSONValue {
        let object = try JSONSerialization.jsonObject(with: data, options: options)
        return try JSONValue(any: object)
    }
}
