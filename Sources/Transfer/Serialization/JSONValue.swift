import Foundation

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
/// is ``double(_:)``), so a number comes back as it was written. Use
/// ``init(any:)`` to convert a Foundation object graph (`[String: Any]`,
/// `NSNumber`, `NSNull`, ...), and ``foundationObject`` to go back.
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

// MARK: - Foundation bridging

extension JSONValue {
    /// Converts a Foundation object graph, as `JSONSerialization` produces or
    /// as AFNetworking code passes parameters: `NSNull`/nil, `Bool`, integers,
    /// floating-point numbers, `NSNumber`, `String`, `URL` (as its absolute
    /// string), arrays and dictionaries with `String` keys, and `JSONValue`.
    ///
    /// - Throws: ``TransferError/Code/invalidRequest`` naming the first value of
    ///   any other type, or a non-finite number.
    public init(any value: Any) throws(TransferError) {
        self = try Self.convert(value, path: "")
    }

    /// A `[String: Any]` dictionary as an ``object(_:)``.
    public init(_ dictionary: [String: Any]) throws(TransferError) {
        self = try Self.convert(dictionary, path: "")
    }

    private static func convert(_ value: Any, path: String) throws(TransferError) -> JSONValue {
        // Real NSNumber objects first: `as? Bool` would bridge any 0 or 1 to a Bool.
        if type(of: value) is NSNumber.Type, let number = value as? NSNumber {
            return try convert(number: number, path: path)
        }
        switch value {
        case let value as JSONValue:
            return value
        case is NSNull:
            return .null
        case let value as String:
            return .string(value)
        case let value as Substring:
            return .string(String(value))
        case let value as URL:
            return .string(value.absoluteString)
        case let value as Bool:
            return .bool(value)
        case let value as any BinaryInteger:
            if let int = Int(exactly: value) { return .int(int) }
            return .double(Double(value))
        case let value as any BinaryFloatingPoint:
            let double = Double(value)
            guard double.isFinite else {
                throw TransferError(.invalidRequest, "a non-finite number at \(path.isEmpty ? "the top level" : path)")
            }
            return .double(double)
        case let value as [Any]:
            var elements: [JSONValue] = []
            elements.reserveCapacity(value.count)
            for (index, element) in value.enumerated() {
                elements.append(try convert(element, path: "\(path)[\(index)]"))
            }
            return .array(elements)
        case let value as [String: Any]:
            var members: [String: JSONValue] = [:]
            members.reserveCapacity(value.count)
            for (key, member) in value {
                members[key] = try convert(member, path: path.isEmpty ? key : "\(path).\(key)")
            }
            return .object(members)
        default:
            // Optional.none inside an Any arrives here as a wrapped Optional.
            let mirror = Mirror(reflecting: value)
            if mirror.displayStyle == .optional {
                guard let wrapped = mirror.children.first?.value else { return .null }
                return try convert(wrapped, path: path)
            }
            let location = path.isEmpty ? "the top level" : path
            throw TransferError(
                .invalidRequest, "a \(type(of: value)) at \(location) cannot be represented as a JSON value")
        }
    }

    private static func convert(number: NSNumber, path: String) throws(TransferError) -> JSONValue {
        // Foundation marks booleans with the "c" type encoding (both the
        // bridged Swift Bool and JSONSerialization's true/false); JSON and
        // property-list parsers produce no other char-typed numbers.
        let type = String(cString: number.objCType)
        switch type {
        case "c", "B":
            return .bool(number.boolValue)
        case "f", "d":
            let double = number.doubleValue
            guard double.isFinite else {
                throw TransferError(.invalidRequest, "a non-finite number at \(path.isEmpty ? "the top level" : path)")
            }
            return .double(double)
        case "Q", "L", "I", "S":
            let unsigned = number.uint64Value
            if let int = Int(exactly: unsigned) { return .int(int) }
            return .double(Double(unsigned))
        default:
            return .int(number.intValue)
        }
    }

    /// The value as a Foundation object graph (`NSNull`, `Bool`, `Int`,
    /// `Double`, `String`, `[Any]`, `[String: Any]`).
    public var foundationObject: Any {
        switch self {
        case .null: return NSNull()
        case .bool(let value): return value
        case .int(let value): return value
        case .double(let value): return value
        case .string(let value): return value
        case .array(let elements): return elements.map(\.foundationObject)
        case .object(let members): return members.mapValues(\.foundationObject)
        }
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
