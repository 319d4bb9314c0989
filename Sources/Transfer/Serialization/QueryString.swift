import FoundationEssentials

/// Form and query-string encoding with AFNetworking's rules
/// (`AFQueryStringFromParameters`, `AFPercentEscapedStringFromString`).
///
/// - Nested objects become `a[b]=1`, arrays `a[]=1`, at any depth.
/// - Object keys are sorted (by Unicode scalar values), so the same
///   parameters always give the same string.
/// - `null` gives the key alone (`a`), `true`/`false` give `1`/`0` as
///   `NSNumber` does, integral doubles print without a fraction.
/// - Keys and values are percent-escaped per RFC 3986 §3.4: everything but
///   unreserved characters, `?` and `/` is escaped, byte by byte of UTF-8, so a
///   multi-byte character (emoji, CJK, combining sequences) is never split.
public enum QueryString {
    /// One `field=value` pair before escaping. A nil value is written as the field alone.
    public struct Pair: Sendable, Hashable {
        /// The field name, before percent-encoding.
        public var field: String
        /// The value, before percent-encoding; nil writes the field alone.
        public var value: String?

        /// A pair (AFNetworking's `AFQueryStringPair`).
        public init(field: String, value: String?) {
            self.field = field
            self.value = value
        }

        /// `field=value`, both percent-escaped.
        public var urlEncoded: String {
            guard let value else { return QueryString.percentEscaped(field) }
            return QueryString.percentEscaped(field) + "=" + QueryString.percentEscaped(value)
        }
    }

    /// The query string for `parameters` (without a leading `?`).
    ///
    /// - Throws: ``TransferError/Code/invalidRequest`` when `parameters` is not
    ///   an object (a form needs names).
    public static func string(from parameters: JSONValue) throws(TransferError) -> String {
        try pairs(from: parameters).map(\.urlEncoded).joined(separator: "&")
    }

    /// The flattened pairs for `parameters`, in the order they are written.
    ///
    /// - Throws: ``TransferError/Code/invalidRequest`` when `parameters` is not an object.
    public static func pairs(from parameters: JSONValue) throws(TransferError) -> [Pair] {
        guard case .object = parameters else {
            throw TransferError(
                .invalidRequest, "query and form parameters must be an object, not \(parameters.kindName)")
        }
        var result: [Pair] = []
        appendPairs(key: nil, value: parameters, to: &result)
        return result
    }

    private static func appendPairs(key: String?, value: JSONValue, to result: inout [Pair]) {
        switch value {
        case .object(let members):
            for nestedKey in members.keys.sorted() {
                // Sorted keys come from the dictionary itself, so the lookup cannot miss.
                guard let nestedValue = members[nestedKey] else { continue }
                appendPairs(key: key.map { "\($0)[\(nestedKey)]" } ?? nestedKey, value: nestedValue, to: &result)
            }
        case .array(let elements):
            let elementKey = "\(key ?? "")[]"
            for element in elements { appendPairs(key: elementKey, value: element, to: &result) }
        default:
            result.append(Pair(field: key ?? "", value: value.formValue))
        }
    }

    /// Percent-escapes `string` for a query component: unreserved characters
    /// (`A-Z a-z 0-9 - . _ ~`), `?` and `/` stay; every other UTF-8 byte
    /// becomes `%XX` with upper-case hex.
    public static func percentEscaped(_ string: String) -> String {
        let utf8 = string.utf8
        // Fast path: nothing to escape.
        if utf8.allSatisfy(isAllowed) { return string }
        var output: [UInt8] = []
        output.reserveCapacity(utf8.count * 3)
        for byte in utf8 {
            if isAllowed(byte) {
                output.append(byte)
            } else {
                output.append(UInt8(ascii: "%"))
                output.append(hexDigits[Int(byte >> 4)])
                output.append(hexDigits[Int(byte & 0x0F)])
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    private static let hexDigits: [UInt8] = Array("0123456789ABCDEF".utf8)

    private static func isAllowed(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"), UInt8(ascii: "?"), UInt8(ascii: "/"):
            return true
        default:
            return false
        }
    }
}

extension JSONValue {
    /// The text of a scalar in a form or query string, as `-[NSObject description]`
    /// gives it in AFNetworking; nil for null.
    var formValue: String? {
        switch self {
        case .null: return nil
        case .bool(let value): return value ? "1" : "0"
        case .int(let value): return String(value)
        case .double(let value):
            if value.rounded() == value, abs(value) < 9_007_199_254_740_992 { return String(Int64(value)) }
            return String(value)
        case .string(let value): return value
        case .array, .object: return description
        }
    }

    var kindName: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .int, .double: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}

/// A built-in query-string encoding (AFNetworking's
/// `AFHTTPRequestQueryStringSerializationStyle`), chosen with
/// ``HTTPRequestSerializer/setQueryStringSerialization(style:)``. A custom
/// closure, when set, takes precedence over any style.
///
/// A struct rather than an enum, so that a style added later does not break
/// a caller's `switch`.
public struct QueryStringSerializationStyle: Sendable, Hashable, CustomStringConvertible {
    private let name: String

    private init(_ name: String) { self.name = name }

    /// ``QueryString``'s encoding: nested keys `a[b]`, arrays `a[]`, sorted
    /// keys, RFC 3986 escaping (`AFHTTPRequestQueryStringDefaultStyle`).
    public static let `default` = QueryStringSerializationStyle("default")

    public var description: String { name }

    /// The query string of `parameters` in this style.
    ///
    /// - Throws: ``TransferError/Code/invalidRequest`` when `parameters` is not an object.
    public func string(from parameters: JSONValue) throws(TransferError) -> String {
        // One style today; a new one adds its branch here.
        try QueryString.string(from: parameters)
    }
}
