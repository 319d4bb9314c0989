import FoundationEssentials

/// A JSON value: what ``JSONResponseSerializer`` returns and what the request
/// serializers take as parameters.
///
/// `Any` is not `Sendable`, so Transfer speaks this enum instead of
/// `NSJSONSerialization`'s object graph. Literals build it directly:
///
/// ```swift
/// let parameters: JSONValue = ["q": "swift", "page": 2, "tags": ["a", "b"], "debug": true]
/// let name = response?["user"]?["name"]?.stringValue
/// ```
///
/// Integers and floating-point numbers stay distinct (`1` is ``int(_:)``, `1.5`
/// is ``double(_:)``), so a number comes back as it was written.
/// TransferFoundation's `init(any:)` converts a Foundation object graph
/// (`[String: Any]`, `NSNumber`, `NSNull`, ...), and its `foundationObject`
/// goes back.
public enum JSONValue: Sendable, Hashable {
    /// JSON `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number without fraction or exponent that fits an `Int`.
    case int(Int)
    /// Any other number.
    case double(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object.
    case object([String: JSONValue])
}

// MARK: - Accessors

extension JSONValue {
    /// The member `key` of an object; nil for a missing key or a non-object.
    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    /// The element at `index` of an array; nil when out of range or not an array.
    public subscript(index: Int) -> JSONValue? {
        if case .array(let elements) = self, elements.indices.contains(index) { return elements[index] }
        return nil
    }

    /// Whether the value is `null`.
    public var isNull: Bool { self == .null }

    /// The string, when the value is one; else nil.
    public var stringValue: String? { scalar?.string }

    /// The boolean, when the value is one; else nil.
    public var boolValue: Bool? { scalar?.bool }

    /// The integer value; a double converts when it is integral and in range.
    public var intValue: Int? { scalar?.int }

    /// The numeric value; integers convert.
    public var doubleValue: Double? { scalar?.double }

    /// The value when it is a string, boolean or number (the accessors above).
    var scalar: ScalarValue? {
        switch self {
        case .bool(let value): return .bool(value)
        case .int(let value): return .int(value)
        case .double(let value): return .double(value)
        case .string(let value): return .string(value)
        case .null, .array, .object: return nil
        }
    }

    /// The elements, when the value is an array; else nil.
    public var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// The members, when the value is an object; else nil.
    public var objectValue: [String: JSONValue]? {
        if case .object(let value) = self { return value }
        return nil
    }

    /// A copy without object members whose value is null and without null
    /// array elements, recursively (AFNetworking's `removesKeysWithNullValues`).
    /// A top-level null yields nil.
    public func removingNullValues() -> JSONValue? {
        switch self {
        case .null:
            return nil
        case .array(let elements):
            return .array(elements.compactMap { $0.removingNullValues() })
        case .object(let members):
            var result: [String: JSONValue] = [:]
            result.reserveCapacity(members.count)
            for (key, value) in members {
                if let kept = value.removingNullValues() { result[key] = kept }
            }
            return .object(result)
        default:
            return self
        }
    }
}

// MARK: - Literals

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }

    /// A later duplicate key replaces an earlier one.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        var members: [String: JSONValue] = [:]
        for (key, value) in elements { members[key] = value }
        self = .object(members)
    }
}

// MARK: - Codable

extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int.self) {
            self = .int(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}

extension JSONValue: CustomStringConvertible {
    /// Compact JSON text with sorted keys (for logs and tests).
    public var description: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(self), let text = String(data: data, encoding: .utf8) else {
            return "<invalid JSON: non-finite number>"
        }
        return text
    }
}
