import FoundationEssentials

/// An ordered list of HTTP header fields with case-insensitive lookup.
///
/// Names and values are validated when the request is serialized or sent: a
/// value with CR or LF, or a name that is not an RFC 9110 token, is refused
/// with ``TransferError/Code/invalidRequest`` (no header injection).
public struct HTTPHeaders: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral,
    CustomStringConvertible
{
    /// One header line: a name and its value, in the order sent or received.
    public struct Field: Sendable, Hashable {
        /// The header name, as written (compared case-insensitively).
        public var name: String
        /// The header value.
        public var value: String
        /// A field; nothing is validated until the request is sent.
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    private var fields: [Field] = []

    /// No headers.
    public init() {}

    /// Headers from name/value pairs, in order; repeated names are kept.
    public init(_ fields: [(String, String)]) {
        self.fields = fields.map { Field(name: $0.0, value: $0.1) }
    }

    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }

    /// The number of fields (a repeated name counts each time).
    public var count: Int { fields.count }

    /// Whether a `User-Agent` field is present (any case): every request
    /// asks, through the byte-wise ASCII compare of `equalsIgnoringCase`.
    var containsUserAgent: Bool {
        fields.contains { $0.name.equalsIgnoringCase("user-agent") }
    }

    /// Whether there is no field.
    public var isEmpty: Bool { fields.isEmpty }

    public func makeIterator() -> IndexingIterator<[Field]> { fields.makeIterator() }

    /// The first value for `name` (case-insensitive); setting replaces every
    /// field of that name, and `nil` removes them.
    public subscript(name: String) -> String? {
        get { value(for: name) }
        set {
            if let newValue { replaceOrAdd(name: name, value: newValue) } else { remove(name: name) }
        }
    }

    /// The first value of `name` (case-insensitive), or nil.
    public func value(for name: String) -> String? {
        fields.first { $0.name.equalsIgnoringCase(name) }?.value
    }

    /// Every value of `name` (case-insensitive), in order.
    public func values(for name: String) -> [String] {
        fields.filter { $0.name.equalsIgnoringCase(name) }.map(\.value)
    }

    /// Whether a field named `name` (case-insensitive) is present.
    public func contains(_ name: String) -> Bool { value(for: name) != nil }

    /// Appends a field, keeping any of the same name.
    public mutating func add(name: String, value: String) {
        fields.append(Field(name: name, value: value))
    }

    /// Sets the first field of this name to `value` and removes the others,
    /// or appends it when there is none.
    public mutating func replaceOrAdd(name: String, value: String) {
        if let index = fields.firstIndex(where: { $0.name.equalsIgnoringCase(name) }) {
            fields[index].value = value
            var next = index + 1
            while next < fields.count {
                if fields[next].name.equalsIgnoringCase(name) {
                    fields.remove(at: next)
                } else {
                    next += 1
                }
            }
        } else {
            fields.append(Field(name: name, value: value))
        }
    }

    /// Removes every field named `name` (case-insensitive).
    public mutating func remove(name: String) {
        fields.removeAll { $0.name.equalsIgnoringCase(name) }
    }

    /// Fields of `other` replace fields of the same name here. A name that
    /// `other` repeats keeps all its fields (two `X-Tag` of a request are
    /// both sent; they replace the session's `X-Tag`).
    public func merging(_ other: HTTPHeaders) -> HTTPHeaders {
        // Every request is merged with the session's headers before it is
        // sent: most often one side is empty.
        if other.isEmpty { return self }
        if isEmpty { return other }
        var result = self
        var replaced: Set<String> = []
        for field in other {
            if replaced.insert(field.name.lowercased()).inserted {
                result.replaceOrAdd(name: field.name, value: field.value)
            } else {
                result.add(name: field.name, value: field.value)
            }
        }
        return result
    }

    /// A dictionary view (last field of a name wins, names as first seen).
    public var dictionary: [String: String] {
        var result: [String: String] = [:]
        for field in fields { result[field.name] = field.value }
        return result
    }

    public var description: String {
        fields.map { "\($0.name): \($0.value)" }.joined(separator: "\n")
    }

    /// Refuses header names that are not tokens and values with CR, LF or NUL.
    /// Adds `field`, replacing a field of the same name.
    public mutating func replaceOrAdd(_ field: Field) {
        replaceOrAdd(name: field.name, value: field.value)
    }

    /// Checks a field as the engine will before sending it: throws
    /// ``TransferError/Code/invalidRequest`` for a name that is not an HTTP
    /// token or a value with CR, LF or NUL (header injection).
    public static func validate(name: String, value: String) throws(TransferError) {
        // Over contiguous bytes: every field of every request comes here.
        var nameBytes = name
        var valueBytes = value
        if !nameBytes.withUTF8({ !$0.isEmpty && $0.allSatisfy(isTokenByte) }) {
            throw TransferError(.invalidRequest, "invalid header name \(name.debugDescription)")
        }
        if valueBytes.withUTF8({ $0.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 } }) {
            throw TransferError(.invalidRequest, "header \(name) has a CR, LF or NUL in its value")
        }
    }

    /// Validates every field (see ``validate(name:value:)``).
    public func validate() throws(TransferError) {
        for field in fields { try Self.validate(name: field.name, value: field.value) }
    }

    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
            UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
            UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    /// Parses raw "Name: value\r\n" lines (as the engine delivers them).
    /// Lines without a colon are ignored; names and values are trimmed of
    /// spaces and tabs. Works on bytes: this runs once per response.
    public init(rawHeaderBlock raw: String) {
        var raw = raw
        raw.withUTF8 { bytes in
            var lineStart = 0
            let count = bytes.count
            while lineStart < count {
                var lineEnd = lineStart
                while lineEnd < count && bytes[lineEnd] != 0x0A && bytes[lineEnd] != 0x0D { lineEnd += 1 }
                if let colon = (lineStart..<lineEnd).first(where: { bytes[$0] == 0x3A }) {
                    let name = Self.trimmed(bytes, lineStart, colon)
                    let value = Self.trimmed(bytes, colon + 1, lineEnd)
                    if name.lowerBound < name.upperBound {
                        fields.append(Field(name: String(decoding: UnsafeBufferPointer(rebasing: bytes[name]), as: UTF8.self),
                                            value: String(decoding: UnsafeBufferPointer(rebasing: bytes[value]), as: UTF8.self)))
                    }
                }
                lineStart = lineEnd + 1
            }
        }
    }

    private static func trimmed(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> Range<Int> {
        var lower = start
        var upper = end
        while lower < upper && (bytes[lower] == 0x20 || bytes[lower] == 0x09) { lower += 1 }
        while upper > lower && (bytes[upper - 1] == 0x20 || bytes[upper - 1] == 0x09) { upper -= 1 }
        return lower..<upper
    }
}

extension HTTPHeaders.Field {
    /// `Authorization: Bearer <token>` (RFC 6750), for a request's or the
    /// session's headers:
    /// `request.headers.replaceOrAdd(.authorization(bearerToken: token))`.
    /// The token is sent as given; one with CR, LF or NUL is refused when the
    /// request is sent
    /// (``TransferError/Code/invalidRequest``). Like every `Authorization`
    /// header it is dropped on a redirect to another origin.
    public static func authorization(bearerToken: String) -> HTTPHeaders.Field {
        HTTPHeaders.Field(name: "Authorization", value: "Bearer \(bearerToken)")
    }

    /// `Authorization: Basic <base64(user:password)>` (RFC 7617), sent up
    /// front with the first request. For Digest, or to wait for the server's
    /// challenge, set ``Request/credential`` instead.
    public static func authorization(username: String, password: String) -> HTTPHeaders.Field {
        HTTPHeaders.Field(name: "Authorization", value: "Basic " + Data("\(username):\(password)".utf8).base64EncodedString())
    }
}
