/// A string, boolean or number out of a decoded document (``JSONValue``,
/// `PropertyListValue` in TransferFoundation): the one place their typed accessors convert.
package enum ScalarValue {
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)

    package var string: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    package var bool: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// An integer; a double converts when it is integral and in range.
    package var int: Int? {
        switch self {
        case .int(let value): return value
        case .double(let value): return Int(exactly: value)
        default: return nil
        }
    }

    /// A number; integers convert.
    package var double: Double? {
        switch self {
        case .int(let value): return Double(value)
        case .double(let value): return value
        default: return nil
        }
    }
}
