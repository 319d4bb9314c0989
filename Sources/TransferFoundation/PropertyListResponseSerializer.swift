import Foundation
import Transfer

/// A property-list value: what ``PropertyListResponseSerializer`` returns.
/// Unlike JSON, a property list has dates and raw data, and no null.
public enum PropertyListValue: Sendable, Hashable {
    /// A boolean.
    case bool(Bool)
    /// An integer.
    case int(Int)
    /// A real number.
    case double(Double)
    /// A string.
    case string(String)
    /// A date.
    case date(Date)
    /// Raw bytes.
    case data(Data)
    /// An array.
    case array([PropertyListValue])
    /// A dictionary with string keys.
    case dictionary([String: PropertyListValue])

    /// The member for `key` of a dictionary; nil for a missing key or another kind.
    public subscript(key: String) -> PropertyListValue? {
        if case .dictionary(let members) = self { return members[key] }
        return nil
    }

    /// The element at `index` of an array; nil out of range or for another kind.
    public subscript(index: Int) -> PropertyListValue? {
        if case .array(let elements) = self, elements.indices.contains(index) { return elements[index] }
        return nil
    }

    /// The string, when the value is one; else nil.
    public var stringValue: String? { scalar?.string }

    /// The boolean, when the value is one; else nil.
    public var boolValue: Bool? { scalar?.bool }

    /// The integer, or a real with no fraction; else nil.
    public var intValue: Int? { scalar?.int }

    /// The number as a `Double` (integer or real); else nil.
    public var doubleValue: Double? { scalar?.double }

    /// The value when it is a string, boolean or number (the accessors above).
    var scalar: ScalarValue? {
        switch self {
        case .bool(let value): return .bool(value)
        case .int(let value): return .int(value)
        case .double(let value): return .double(value)
        case .string(let value): return .string(value)
        case .date, .data, .array, .dictionary: return nil
        }
    }

    /// The date, when the value is one; else nil.
    public var dateValue: Date? {
        if case .date(let value) = self { return value }
        return nil
    }

    /// The bytes, when the value is data; else nil.
    public var dataValue: Data? {
        if case .data(let value) = self { return value }
        return nil
    }

    /// The elements, when the value is an array; else nil.
    public var arrayValue: [PropertyListValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// The members, when the value is a dictionary; else nil.
    public var dictionaryValue: [String: PropertyListValue]? {
        if case .dictionary(let value) = self { return value }
        return nil
    }

    /// Converts what `PropertyListSerialization` returns.
    ///
    /// - Throws: ``TransferError/Code/serializationFailed`` for any other type.
    public init(any value: Any) throws(TransferError) {
        if type(of: value) is NSNumber.Type, let number = value as? NSNumber {
            switch String(cString: number.objCType) {
            case "c", "B": self = .bool(number.boolValue)
            case "f", "d": self = .double(number.doubleValue)
            case "Q", "L", "I", "S":
                let unsigned = number.uint64Value
                self = Int(exactly: unsigned).map { .int($0) } ?? .double(Double(unsigned))
            default: self = .int(number.intValue)
            }
            return
        }
        switch value {
        case let value as Bool: self = .bool(value)
        case let value as any BinaryInteger:
            self = Int(exactly: value).map { .int($0) } ?? .double(Double(value))
        case let value as any BinaryFloatingPoint: self = .double(Double(value))
        case let value as String: self = .string(value)
        case let value as Date: self = .date(value)
        case let value as Data: self = .data(value)
        case let value as [Any]:
            var elements: [PropertyListValue] = []
            elements.reserveCapacity(value.count)
            for element in value { elements.append(try PropertyListValue(any: element)) }
            self = .array(elements)
        case let value as [String: Any]:
            var members: [String: PropertyListValue] = [:]
            members.reserveCapacity(value.count)
            for (key, member) in value { members[key] = try PropertyListValue(any: member) }
            self = .dictionary(members)
        default:
            throw TransferError(.serializationFailed, "a \(type(of: value)) is not a property-list value")
        }
    }
}

/// Validates and parses a property list (AFNetworking's
/// `AFPropertyListResponseSerializer`), XML, binary or OpenStep.
///
/// - Acceptable content types: `application/x-plist`.
/// - An empty body gives nil without error.
/// - A parse failure throws ``TransferError/Code/serializationFailed``,
///   chained under a status-code failure when there is one.
public struct PropertyListResponseSerializer: ResponseSerializer {
    public var acceptableStatusCodes = ResponseValidation.successStatusCodes
    public var acceptableContentTypes: Set<String>? = ["application/x-plist"]
    /// The format to expect; a body in another format is still parsed, as
    /// `NSPropertyListSerialization` does.
    public var format: PropertyListSerialization.PropertyListFormat
    /// Passed to `PropertyListSerialization` (AFNetworking's `readOptions`).
    /// The mutability options change nothing visible here: the result is a
    /// ``PropertyListValue``, a value type.
    public var readOptions: PropertyListSerialization.ReadOptions

    /// AFNetworking's `serializerWithFormat:readOptions:`.
    public init(
        format: PropertyListSerialization.PropertyListFormat = .xml,
        readOptions: PropertyListSerialization.ReadOptions = []
    ) {
        self.format = format
        self.readOptions = readOptions
    }

    public func serialize(response: HTTPResponse?, data: Data?, error: TransferError?) throws(TransferError)
        -> PropertyListValue?
    {
        let validationError = try preflight(response: response, data: data, error: error)
        guard let data, !data.isEmpty else {
            if let validationError { throw validationError }
            return nil
        }
        let value: PropertyListValue
        do {
            var actualFormat = format
            let object = try PropertyListSerialization.propertyList(
                from: data, options: readOptions, format: &actualFormat)
            value = try PropertyListValue(any: object)
        } catch {
            let parseError = ResponseValidation.serializationError(
                "the body is not a valid property list", reason: error, response: response, data: data)
            throw validationError.map { $0.chaining(parseError) } ?? parseError
        }
        if let validationError { throw validationError }
        return value
    }
}
