import Foundation
import Transfer

// JSONValue's Foundation bridging (NSNumber, NSNull, `Any` graphs) and the
// JSONSerialization option types: the core parses and writes JSON itself.

extension JSONValue {
    /// Converts a Foundation object graph, as `JSONSerialization` produces or
    /// as AFNetworking code passes parameters: `NSNull`/nil, `Bool`, integers,
    /// floating-point numbers, `NSNumber`, `String`, `URL` (as its absolute
    /// string), arrays and dictionaries with `String` keys, and `JSONValue`.
    ///
    /// - Throws: `TransferError.Code.invalidRequest` naming the first value of
    ///   any other type, or a non-finite number.
    public init(any value: Any) throws(TransferError) {
        self = try Self.convert(value, path: "")
    }

    /// A `[String: Any]` dictionary as an `object(_:)`.
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

extension JSONReadingOptions {
    /// The same options as Foundation's.
    public init(_ options: JSONSerialization.ReadingOptions) {
        self = []
        if options.contains(.mutableContainers) { insert(.mutableContainers) }
        if options.contains(.mutableLeaves) { insert(.mutableLeaves) }
        if options.contains(.fragmentsAllowed) { insert(.fragmentsAllowed) }
    }
}

extension JSONWritingOptions {
    /// The same options as Foundation's.
    public init(_ options: JSONSerialization.WritingOptions) {
        self = []
        if options.contains(.prettyPrinted) { insert(.prettyPrinted) }
        if options.contains(.sortedKeys) { insert(.sortedKeys) }
        if options.contains(.fragmentsAllowed) { insert(.fragmentsAllowed) }
        if options.contains(.withoutEscapingSlashes) { insert(.withoutEscapingSlashes) }
    }
}
