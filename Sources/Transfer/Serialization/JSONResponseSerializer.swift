import FoundationEssentials

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
    /// Reading options (`.fragmentsAllowed`, `.json5Allowed`,
    /// `.topLevelDictionaryAssumed`; the mutability options mean nothing for
    /// value types). Default none.
    public var readingOptions: JSONReadingOptions
    /// Drop keys whose value is `null` (AFNetworking's `removesKeysWithNullValues`).
    public var removesKeysWithNullValues: Bool

    /// A JSON serializer with `readingOptions`.
    public init(readingOptions: JSONReadingOptions = [], removesKeysWithNullValues: Bool = false) {
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

    /// Parses `data` as one JSON value.
    ///
    /// Strict RFC 8259 by default (the core's own parser): an integer that
    /// fits an `Int` is ``JSONValue/int(_:)``, any other number a
    /// ``JSONValue/double(_:)``. `.topLevelDictionaryAssumed` reads a text
    /// that does not start with `{` as the members of an object. With
    /// `.json5Allowed` the text goes through `JSONDecoder` instead.
    ///
    /// - Throws: ``JSONParseError`` (or the decoder's error) for text that is
    ///   not JSON, or a top-level scalar without `.fragmentsAllowed`.
    public static func parse(_ data: Data, options: JSONReadingOptions = []) throws -> JSONValue {
        let fragments = options.contains(.fragmentsAllowed)
        guard options.contains(.json5Allowed) else {
            let blanks: Set<UInt8> = [0x20, 0x0A, 0x0D, 0x09]
            if options.contains(.topLevelDictionaryAssumed),
                data.first(where: { !blanks.contains($0) }) != UInt8(ascii: "{")
            {
                var members = Data("{".utf8)
                members.append(data)
                members.append(UInt8(ascii: "}"))
                return try JSONParser.parse(members, fragmentsAllowed: false)
            }
            return try JSONParser.parse(data, fragmentsAllowed: fragments)
        }
        let value = try JSONOptionMapping.decoder(for: options).decode(JSONValue.self, from: data)
        guard JSONOptionMapping.allowsTopLevel(value, fragmentsAllowed: fragments) else {
            throw JSONParseError(
                offset: 0, reason: "the top level is not an array or an object (fragments are not allowed)")
        }
        return value
    }
}

/// How ``JSONResponseSerializer`` reads JSON (the options of Foundation's
/// `JSONSerialization.ReadingOptions`, with the same raw values;
/// TransferFoundation converts one into the other).
public struct JSONReadingOptions: OptionSet, Sendable, Hashable {
    public let rawValue: UInt

    /// A reading option with this raw value.
    public init(rawValue: UInt) { self.rawValue = rawValue }

    /// Accepted for compatibility; values are immutable anyway.
    public static let mutableContainers = JSONReadingOptions(rawValue: 1 << 0)
    /// Accepted for compatibility; values are immutable anyway.
    public static let mutableLeaves = JSONReadingOptions(rawValue: 1 << 1)
    /// The top level may be a string, number, boolean or null.
    public static let fragmentsAllowed = JSONReadingOptions(rawValue: 1 << 2)
    /// JSON5 syntax (comments, trailing commas, unquoted keys, ...).
    public static let json5Allowed = JSONReadingOptions(rawValue: 1 << 3)
    /// The text is the members of an object without the braces.
    public static let topLevelDictionaryAssumed = JSONReadingOptions(rawValue: 1 << 4)
}
