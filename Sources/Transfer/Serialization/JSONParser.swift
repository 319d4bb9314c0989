import FoundationEssentials

/// Why a JSON text was refused: the byte offset and what was wrong there.
public struct JSONParseError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The offset (in bytes) where parsing stopped.
    public let offset: Int
    /// What was expected or found there.
    public let reason: String

    public var description: String { "invalid JSON at byte \(offset): \(reason)" }
}

/// A strict RFC 8259 parser into ``JSONValue`` (the core needs no
/// `JSONSerialization`). Numbers without fraction or exponent that fit an
/// `Int` are ``JSONValue/int(_:)``; every other number (a fraction, an
/// exponent, an integer beyond `Int`) is ``JSONValue/double(_:)``, as
/// Foundation's parser gave them. A duplicate key keeps its last value.
/// Nesting deeper than ``maximumDepth`` is refused (no stack overflow).
struct JSONParser {
    /// The deepest nesting of arrays and objects accepted.
    static let maximumDepth = 512

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0
    private var depth = 0

    private init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    /// Parses `data`: one value, with blanks around it and nothing else.
    ///
    /// - Parameter fragmentsAllowed: Whether the top level may be a scalar.
    static func parse(_ data: Data, fragmentsAllowed: Bool) throws(JSONParseError) -> JSONValue {
        let result: Result<JSONValue, JSONParseError> = data.withUnsafeBytes { raw in
            var parser = JSONParser(raw.bindMemory(to: UInt8.self))
            do throws(JSONParseError) {
                return .success(try parser.document(fragmentsAllowed: fragmentsAllowed))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    private mutating func document(fragmentsAllowed: Bool) throws(JSONParseError) -> JSONValue {
        // A UTF-8 byte order mark is tolerated, as Foundation did.
        if bytes.count >= 3 && bytes[0] == 0xEF && bytes[1] == 0xBB && bytes[2] == 0xBF { index = 3 }
        skipBlanks()
        guard let first = peek() else { throw failure("no value") }
        if !fragmentsAllowed && first != UInt8(ascii: "{") && first != UInt8(ascii: "[") {
            throw failure("the top level is not an array or an object (fragments are not allowed)")
        }
        let value = try self.value()
        skipBlanks()
        guard index == bytes.count else { throw failure("unexpected data after the value") }
        return value
    }

    // MARK: Values

    private mutating func value() throws(JSONParseError) -> JSONValue {
        guard let byte = peek() else { throw failure("unexpected end of data") }
        switch byte {
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return try number()
        default:
            throw failure("unexpected character \(Self.show(byte))")
        }
    }

    private mutating func object() throws(JSONParseError) -> JSONValue {
        try enter()
        index += 1
        var members: [String: JSONValue] = [:]
        skipBlanks()
        if peek() == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return .object(members)
        }
        while true {
            skipBlanks()
            guard peek() == UInt8(ascii: "\"") else { throw failure("expected a string key") }
            let key = try string()
            skipBlanks()
            guard peek() == UInt8(ascii: ":") else { throw failure("expected ':' after a key") }
            index += 1
            skipBlanks()
            members[key] = try value()
            skipBlanks()
            switch peek() {
            case UInt8(ascii: ","):
                index += 1
            case UInt8(ascii: "}"):
                index += 1
                depth -= 1
                return .object(members)
            default:
                throw failure("expected ',' or '}' in an object")
            }
        }
    }

    private mutating func array() throws(JSONParseError) -> JSONValue {
        try enter()
        index += 1
        var elements: [JSONValue] = []
        skipBlanks()
        if peek() == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return .array(elements)
        }
        while true {
            skipBlanks()
            elements.append(try value())
            skipBlanks()
            switch peek() {
            case UInt8(ascii: ","):
                index += 1
            case UInt8(ascii: "]"):
                index += 1
                depth -= 1
                return .array(elements)
            default:
                throw failure("expected ',' or ']' in an array")
            }
        }
    }

    private mutating func enter() throws(JSONParseError) {
        depth += 1
        if depth > Self.maximumDepth { throw failure("nesting deeper than \(Self.maximumDepth)") }
    }

    private mutating func literal(_ word: StaticString) throws(JSONParseError) {
        let count = word.utf8CodeUnitCount
        guard bytes.count - index >= count else { throw failure("unexpected end of data") }
        let expected = UnsafeBufferPointer(start: word.utf8Start, count: count)
        for offset in 0..<count where bytes[index + offset] != expected[offset] {
            throw failure("unexpected character \(Self.show(bytes[index + offset]))")
        }
        index += count
    }

    // MARK: Numbers

    private mutating func number() throws(JSONParseError) -> JSONValue {
        let start = index
        if peek() == UInt8(ascii: "-") { index += 1 }
        guard let lead = peek(), Self.isDigit(lead) else { throw failure("expected a digit") }
        if lead == UInt8(ascii: "0") {
            index += 1
            if let next = peek(), Self.isDigit(next) { throw failure("a number with a leading zero") }
        } else {
            skipDigits()
        }
        var integral = true
        if peek() == UInt8(ascii: ".") {
            integral = false
            index += 1
            guard let digit = peek(), Self.isDigit(digit) else { throw failure("expected a digit after '.'") }
            skipDigits()
        }
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            integral = false
            index += 1
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { index += 1 }
            guard let digit = peek(), Self.isDigit(digit) else { throw failure("expected a digit in the exponent") }
            skipDigits()
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        if integral, let int = Int(text) { return .int(int) }
        guard let double = Double(text), double.isFinite else {
            index = start
            throw failure("a number out of range")
        }
        return .double(double)
    }

    private mutating func skipDigits() {
        while let byte = peek(), Self.isDigit(byte) { index += 1 }
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    // MARK: Strings

    private mutating func string() throws(JSONParseError) -> String {
        index += 1
        let start = index
        // Fast path: no escapes, valid UTF-8.
        while let byte = peek(), byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\"), byte >= 0x20 { index += 1 }
        if peek() == UInt8(ascii: "\"") {
            let text = try Self.utf8(bytes[start..<index], at: start)
            index += 1
            return text
        }
        var scalars = [UInt8](bytes[start..<index])
        while true {
            guard let byte = peek() else { throw failure("an unterminated string") }
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return try Self.utf8(scalars[...], at: start)
            case UInt8(ascii: "\\"):
                index += 1
                try escape(into: &scalars)
            case 0..<0x20:
                throw failure("a control character in a string")
            default:
                scalars.append(byte)
                index += 1
            }
        }
    }

    private mutating func escape(into output: inout [UInt8]) throws(JSONParseError) {
        guard let byte = peek() else { throw failure("an unterminated escape") }
        index += 1
        switch byte {
        case UInt8(ascii: "\""): output.append(UInt8(ascii: "\""))
        case UInt8(ascii: "\\"): output.append(UInt8(ascii: "\\"))
        case UInt8(ascii: "/"): output.append(UInt8(ascii: "/"))
        case UInt8(ascii: "b"): output.append(0x08)
        case UInt8(ascii: "f"): output.append(0x0C)
        case UInt8(ascii: "n"): output.append(0x0A)
        case UInt8(ascii: "r"): output.append(0x0D)
        case UInt8(ascii: "t"): output.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = UInt32(try hex4())
            if (0xD800..<0xDC00).contains(scalar) {
                // A high surrogate must be followed by an escaped low one.
                guard bytes.count - index >= 2, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                else { throw failure("a lone high surrogate") }
                index += 2
                let low = UInt32(try hex4())
                guard (0xDC00..<0xE000).contains(low) else { throw failure("a high surrogate without a low one") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00..<0xE000).contains(scalar) {
                throw failure("a lone low surrogate")
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw failure("an invalid code point") }
            output.append(contentsOf: Array(String(Character(unicode)).utf8))
        default:
            throw failure("an invalid escape \\\(Self.show(byte))")
        }
    }

    private mutating func hex4() throws(JSONParseError) -> UInt16 {
        guard bytes.count - index >= 4 else { throw failure("a short \\u escape") }
        var value: UInt16 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw failure("a non-hex digit in a \\u escape")
            }
            value = value << 4 | UInt16(digit)
            index += 1
        }
        return value
    }

    private static func utf8<C: Collection>(_ bytes: C, at offset: Int) throws(JSONParseError) -> String
    where C.Element == UInt8 {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw JSONParseError(offset: offset, reason: "a string that is not valid UTF-8")
        }
        return text
    }

    // MARK: Bytes

    private func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipBlanks() {
        while let byte = peek(),
            byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r")
                || byte == UInt8(ascii: "\t")
        {
            index += 1
        }
    }

    private func failure(_ reason: String) -> JSONParseError { JSONParseError(offset: index, reason: reason) }

    private static func show(_ byte: UInt8) -> String {
        byte >= 0x20 && byte < 0x7F ? "'\(Character(Unicode.Scalar(byte)))'" : "0x" + String(byte, radix: 16)
    }
}
