/// Checks that bytes are one well-formed XML 1.0 document, without building
/// a tree and without Foundation's `XMLParser`.
///
/// This is what the `transfer` command's `--serializer xml` needs: a verdict
/// and a reason. The checks are those of the XML 1.0 (fifth edition)
/// grammar and its well-formedness constraints that need no DTD:
///
/// - one root element, properly nested, end tags matching start tags;
/// - names, attribute syntax, unique attribute names per element, no `<`
///   in an attribute value;
/// - references: `&name;` to a predefined or declared entity, and character
///   references to a legal character;
/// - comments (no `--` inside), processing instructions (no target `xml`
///   except the declaration at the very start), CDATA sections, and no
///   `]]>` in character data;
/// - legal characters, and valid UTF-8 unless the declaration names a
///   single-byte encoding; a UTF-16 body (by its byte-order mark) is
///   transcoded first;
/// - a document type declaration is read over (its internal subset is
///   scanned for entity names, nothing is fetched or expanded), so neither
///   external entities nor entity expansion bombs can act.
///
/// Namespaces are not checked (an undeclared prefix is a namespace error,
/// not a well-formedness one). Memory is bounded by the input: the only
/// state is the stack of open element names, as ranges of the input.
package enum XMLWellFormedness {
    /// Why a document is not well-formed, with the byte offset where the
    /// check stopped.
    package struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// What is wrong.
        package let reason: String
        /// The byte offset into the (UTF-8) document.
        package let offset: Int

        package var description: String { "\(reason) (at byte \(offset))" }
    }

    /// Throws the first well-formedness error of `bytes`, or returns.
    package static func check(_ bytes: some Collection<UInt8>) throws(Failure) {
        var input = Array(bytes)
        if input.count >= 2, (input[0] == 0xFE && input[1] == 0xFF) || (input[0] == 0xFF && input[1] == 0xFE) {
            input = try transcodeUTF16(input)
        }
        try input.withUnsafeBufferPointer { (buffer) throws(Failure) in
            var scanner = Scanner(buffer)
            try scanner.document()
        }
    }

    /// UTF-16 (either byte order, by its byte-order mark) to UTF-8.
    private static func transcodeUTF16(_ input: [UInt8]) throws(Failure) -> [UInt8] {
        let bigEndian = input[0] == 0xFE
        guard input.count % 2 == 0 else { throw Failure(reason: "an odd number of bytes in UTF-16", offset: input.count) }
        var units: [UInt16] = []
        units.reserveCapacity(input.count / 2 - 1)
        var index = 2
        while index < input.count {
            let high = UInt16(input[index]), low = UInt16(input[index + 1])
            units.append(bigEndian ? high << 8 | low : low << 8 | high)
            index += 2
        }
        var output: [UInt8] = []
        output.reserveCapacity(units.count)
        var decoder = UTF16()
        var iterator = units.makeIterator()
        loop: while true {
            switch decoder.decode(&iterator) {
            case .scalarValue(let scalar): output.append(contentsOf: UTF8.encode(scalar)!)
            case .emptyInput: break loop
            case .error: throw Failure(reason: "invalid UTF-16", offset: output.count)
            }
        }
        return output
    }

    private struct Scanner {
        let bytes: UnsafeBufferPointer<UInt8>
        var position = 0
        /// False when the declaration names a single-byte encoding: then any
        /// byte at or above 0x80 is a character of its own.
        var utf8 = true
        /// Entity names declared in the internal subset.
        var declaredEntities: Set<[UInt8]> = []
        /// True when the DTD may declare entities we cannot see (an
        /// external subset, or parameter entity references in the
        /// internal one): then an undeclared entity is not an error.
        var entitiesUnknowable = false

        init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        // MARK: The document

        mutating func document() throws(Failure) {
            if starts(with: "\u{FEFF}") { position += 3 }
            if starts(with: "<?xml"), position + 5 < bytes.count, isSpace(bytes[position + 5]) {
                try declaration()
            }
            var sawDoctype = false
            while true {
                try misc()
                if starts(with: "<!DOCTYPE") {
                    guard !sawDoctype else { throw fail("a second document type declaration") }
                    sawDoctype = true
                    try doctype()
                    continue
                }
                break
            }
            guard position < bytes.count else { throw fail("no root element") }
            guard bytes[position] == UInt8(ascii: "<") else { throw fail("text before the root element") }
            try element()
            try misc()
            if position < bytes.count {
                throw fail(bytes[position] == UInt8(ascii: "<") ? "more than one root element" : "text after the root element")
            }
        }

        /// Comments, processing instructions and white space.
        mutating func misc() throws(Failure) {
            while position < bytes.count {
                if isSpace(bytes[position]) {
                    position += 1
                } else if starts(with: "<!--") {
                    try comment()
                } else if starts(with: "<?") {
                    try processingInstruction()
                } else {
                    return
                }
            }
        }

        /// `<?xml version="1.x" encoding="…" standalone="…"?>`, at the start.
        mutating func declaration() throws(Failure) {
            position += 5
            var sawVersion = false
            while true {
                skipSpaces()
                if starts(with: "?>") {
                    position += 2
                    break
                }
                let nameStart = position
                try name()
                let key = String(decoding: bytes[nameStart..<position], as: UTF8.self)
                skipSpaces()
                try expect(UInt8(ascii: "="), "'=' in the XML declaration")
                skipSpaces()
                let value = try quoted()
                let text = String(decoding: bytes[value], as: UTF8.self)
                switch key {
                case "version":
                    guard !sawVersion, text.hasPrefix("1."), text.count > 2,
                        text.utf8.dropFirst(2).allSatisfy({ $0 >= 0x30 && $0 <= 0x39 })
                    else { throw fail("a bad version in the XML declaration") }
                    sawVersion = true
                case "encoding":
                    let lower = text.lowercased()
                    if lower.hasPrefix("iso-8859") || lower.hasPrefix("latin") || lower.hasPrefix("windows-125")
                        || lower == "us-ascii" || lower == "ascii"
                    {
                        utf8 = false
                    }
                case "standalone":
                    guard text == "yes" || text == "no" else { throw fail("standalone must be yes or no") }
                default:
                    throw fail("an unknown attribute in the XML declaration")
                }
            }
            guard sawVersion else { throw fail("the XML declaration has no version") }
        }

        /// `<!DOCTYPE name (external id)? [internal subset]? >`: read over,
        /// noting declared entity names.
        mutating func doctype() throws(Failure) {
            position += 9
            guard skipSpaces() else { throw fail("no space after <!DOCTYPE") }
            try name()
            while position < bytes.count {
                let byte = bytes[position]
                switch byte {
                case UInt8(ascii: ">"):
                    position += 1
                    return
                case UInt8(ascii: "\""), UInt8(ascii: "'"):
                    _ = try quoted()
                    entitiesUnknowable = true   // SYSTEM or PUBLIC literal: an external subset
                case UInt8(ascii: "["):
                    position += 1
                    try internalSubset()
                default:
                    position += 1
                }
            }
            throw fail("the document type declaration does not end")
        }

        mutating func internalSubset() throws(Failure) {
            while position < bytes.count {
                if starts(with: "<!--") {
                    try comment()
                } else if starts(with: "<?") {
                    try processingInstruction()
                } else if starts(with: "<!ENTITY") {
                    position += 8
                    skipSpaces()
                    if position < bytes.count, bytes[position] == UInt8(ascii: "%") {
                        position += 1   // a parameter entity: not usable in content
                        skipSpaces()
                        try name()
                    } else {
                        let start = position
                        try name()
                        declaredEntities.insert(Array(bytes[start..<position]))
                    }
                    try skipDeclarationRest()
                } else if starts(with: "<!") {
                    position += 2
                    try skipDeclarationRest()
                } else {
                    let byte = bytes[position]
                    if byte == UInt8(ascii: "]") {
                        position += 1
                        return
                    }
                    if byte == UInt8(ascii: "%") { entitiesUnknowable = true }
                    guard isSpace(byte) || byte == UInt8(ascii: "%") || byte == UInt8(ascii: ";") || isNameByte(byte)
                    else { throw fail("unexpected text in the internal subset") }
                    position += 1
                }
            }
            throw fail("the internal subset does not end")
        }

        /// To the `>` that ends a markup declaration, over quoted literals.
        mutating func skipDeclarationRest() throws(Failure) {
            while position < bytes.count {
                let byte = bytes[position]
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'") {
                    _ = try quoted()
                } else {
                    position += 1
                    if byte == UInt8(ascii: ">") { return }
                }
            }
            throw fail("a markup declaration does not end")
        }

        // MARK: Elements

        /// The root element and everything in it, without recursion: open
        /// elements are a stack of their names' ranges.
        mutating func element() throws(Failure) {
            var open: [Range<Int>] = []
            repeat {
                if position >= bytes.count { throw fail("an element is not closed") }
                let byte = bytes[position]
                if byte == UInt8(ascii: "<") {
                    if starts(with: "</") {
                        position += 2
                        let start = position
                        try name()
                        let closing = start..<position
                        guard let top = open.popLast() else { throw fail("an end tag without a start tag") }
                        guard bytes[top].elementsEqual(bytes[closing]) else {
                            throw fail("the end tag does not match the start tag")
                        }
                        skipSpaces()
                        try expect(UInt8(ascii: ">"), "'>' to end the end tag")
                    } else if starts(with: "<!--") {
                        guard !open.isEmpty else { return }
                        try comment()
                    } else if starts(with: "<![CDATA[") {
                        guard !open.isEmpty else { throw fail("a CDATA section outside the root element") }
                        try cdata()
                    } else if starts(with: "<?") {
                        guard !open.isEmpty else { return }
                        try processingInstruction()
                    } else if starts(with: "<!") {
                        throw fail("markup declaration inside an element")
                    } else {
                        if let name = try startTag() { open.append(name) }
                    }
                } else {
                    guard !open.isEmpty else { throw fail("text outside the root element") }
                    try characterData()
                }
            } while !open.isEmpty
        }

        /// `<name attr="value" …>` or `<name …/>`; returns the name's range
        /// for a start tag that opens an element, nil for an empty one.
        mutating func startTag() throws(Failure) -> Range<Int>? {
            position += 1
            let start = position
            try name()
            let elementName = start..<position
            var attributeNames: [Range<Int>] = []
            while true {
                let spaced = skipSpaces()
                guard position < bytes.count else { throw fail("a start tag does not end") }
                if bytes[position] == UInt8(ascii: ">") {
                    position += 1
                    return elementName
                }
                if starts(with: "/>") {
                    position += 2
                    return nil
                }
                guard spaced else { throw fail("no space before an attribute") }
                let attributeStart = position
                try name()
                let attribute = attributeStart..<position
                if attributeNames.contains(where: { bytes[$0].elementsEqual(bytes[attribute]) }) {
                    throw fail("an attribute appears twice in one element")
                }
                attributeNames.append(attribute)
                skipSpaces()
                try expect(UInt8(ascii: "="), "'=' after an attribute name")
                skipSpaces()
                try attributeValue()
            }
        }

        mutating func attributeValue() throws(Failure) {
            guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") || bytes[position] == UInt8(ascii: "'")
            else { throw fail("an attribute value is not quoted") }
            let quote = bytes[position]
            position += 1
            while position < bytes.count {
                let byte = bytes[position]
                if byte == quote {
                    position += 1
                    return
                }
                if byte == UInt8(ascii: "<") { throw fail("'<' in an attribute value") }
                if byte == UInt8(ascii: "&") {
                    try reference()
                } else {
                    try character()
                }
            }
            throw fail("an attribute value does not end")
        }

        /// Text up to the next `<`, with its references; no `]]>`.
        mutating func characterData() throws(Failure) {
            while position < bytes.count {
                let byte = bytes[position]
                if byte == UInt8(ascii: "<") { return }
                if byte == UInt8(ascii: "&") {
                    try reference()
                } else {
                    if byte == UInt8(ascii: "]"), starts(with: "]]>") {
                        throw fail("']]>' in character data")
                    }
                    try character()
                }
            }
        }

        /// `&name;`, `&#digits;` or `&#xhex;`.
        mutating func reference() throws(Failure) {
            let start = position
            position += 1
            if position < bytes.count, bytes[position] == UInt8(ascii: "#") {
                position += 1
                var hex = false
                if position < bytes.count, bytes[position] == UInt8(ascii: "x") {
                    hex = true
                    position += 1
                }
                var value: UInt32 = 0
                var digits = 0
                while position < bytes.count, bytes[position] != UInt8(ascii: ";") {
                    guard let digit = digitValue(bytes[position], hex: hex) else {
                        throw fail("a bad character reference")
                    }
                    value = value &* (hex ? 16 : 10) &+ digit
                    if value > 0x10FFFF { value = 0x110000 }   // stays out of range, no overflow
                    digits += 1
                    position += 1
                }
                guard digits > 0, position < bytes.count else { throw fail("a bad character reference") }
                position += 1
                guard isLegalCharacter(value) else {
                    position = start
                    throw fail("a character reference to an illegal character")
                }
                return
            }
            let nameStart = position
            try name()
            let entity = Array(bytes[nameStart..<position])
            try expect(UInt8(ascii: ";"), "';' to end an entity reference")
            if XMLWellFormedness.predefinedEntities.contains(entity) || declaredEntities.contains(entity) || entitiesUnknowable { return }
            position = start
            throw fail("a reference to an undeclared entity")
        }

        mutating func comment() throws(Failure) {
            position += 4
            while position < bytes.count {
                if starts(with: "--") {
                    guard position + 2 < bytes.count, bytes[position + 2] == UInt8(ascii: ">") else {
                        throw fail("'--' inside a comment")
                    }
                    position += 3
                    return
                }
                try character()
            }
            throw fail("a comment does not end")
        }

        mutating func processingInstruction() throws(Failure) {
            position += 2
            let start = position
            try name()
            let target = bytes[start..<position].map { $0 | 0x20 }
            if target.elementsEqual("xml".utf8) {
                throw fail("an XML declaration that is not at the start")
            }
            if starts(with: "?>") {
                position += 2
                return
            }
            guard skipSpaces() else { throw fail("no space after a processing instruction's target") }
            while position < bytes.count {
                if starts(with: "?>") {
                    position += 2
                    return
                }
                try character()
            }
            throw fail("a processing instruction does not end")
        }

        mutating func cdata() throws(Failure) {
            position += 9
            while position < bytes.count {
                if starts(with: "]]>") {
                    position += 3
                    return
                }
                try character()
            }
            throw fail("a CDATA section does not end")
        }

        // MARK: Tokens

        /// An XML name (a letter, `_`, `:` or any non-ASCII character, then
        /// also digits, `-` and `.`).
        mutating func name() throws(Failure) {
            guard position < bytes.count else { throw fail("a name is missing") }
            let first = bytes[position]
            guard first >= 0x80 || isNameStartASCII(first) else { throw fail("a name is missing") }
            while position < bytes.count {
                let byte = bytes[position]
                if byte >= 0x80 {
                    let scalar = try character()
                    guard isNameCharacter(scalar) else { throw fail("an illegal character in a name") }
                } else if isNameByte(byte) {
                    position += 1
                } else {
                    return
                }
            }
        }

        /// A quoted literal; returns the range between the quotes.
        mutating func quoted() throws(Failure) -> Range<Int> {
            guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") || bytes[position] == UInt8(ascii: "'")
            else { throw fail("a quoted value is missing") }
            let quote = bytes[position]
            position += 1
            let start = position
            while position < bytes.count {
                if bytes[position] == quote {
                    position += 1
                    return start..<(position - 1)
                }
                try character()
            }
            throw fail("a quoted value does not end")
        }

        /// One legal character; returns its scalar value.
        @discardableResult
        mutating func character() throws(Failure) -> UInt32 {
            let first = bytes[position]
            if first < 0x80 || !utf8 {
                guard first >= 0x20 || first == 0x09 || first == 0x0A || first == 0x0D else {
                    throw fail("an illegal character")
                }
                position += 1
                return UInt32(first)
            }
            let length: Int
            var value: UInt32
            switch first {
            case 0xC2...0xDF: length = 2; value = UInt32(first & 0x1F)
            case 0xE0...0xEF: length = 3; value = UInt32(first & 0x0F)
            case 0xF0...0xF4: length = 4; value = UInt32(first & 0x07)
            default: throw fail("invalid UTF-8")
            }
            guard position + length <= bytes.count else { throw fail("invalid UTF-8") }
            for index in 1..<length {
                let byte = bytes[position + index]
                guard byte & 0xC0 == 0x80 else { throw fail("invalid UTF-8") }
                value = value << 6 | UInt32(byte & 0x3F)
            }
            // Overlong forms and surrogates are not UTF-8.
            let minimum: UInt32 = length == 3 ? 0x800 : length == 4 ? 0x10000 : 0x80
            guard value >= minimum, value <= 0x10FFFF, !(0xD800...0xDFFF).contains(value) else {
                throw fail("invalid UTF-8")
            }
            guard isLegalCharacter(value) else { throw fail("an illegal character") }
            position += length
            return value
        }

        /// Skips white space; true when there was some.
        @discardableResult
        mutating func skipSpaces() -> Bool {
            let start = position
            while position < bytes.count, isSpace(bytes[position]) { position += 1 }
            return position > start
        }

        mutating func expect(_ byte: UInt8, _ what: String) throws(Failure) {
            guard position < bytes.count, bytes[position] == byte else { throw fail("expected \(what)") }
            position += 1
        }

        func starts(with prefix: StaticString) -> Bool {
            let count = prefix.utf8CodeUnitCount
            guard bytes.count - position >= count else { return false }
            let start = prefix.utf8Start
            for index in 0..<count where bytes[position + index] != start[index] { return false }
            return true
        }

        func fail(_ reason: String) -> Failure { Failure(reason: reason, offset: position) }
    }

    /// `lt`, `gt`, `amp`, `apos`, `quot`: declared in every document.
    private static let predefinedEntities: Set<[UInt8]> = [
        Array("lt".utf8), Array("gt".utf8), Array("amp".utf8), Array("apos".utf8), Array("quot".utf8),
    ]

    // MARK: Character classes

    private static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    private static func isNameStartASCII(_ byte: UInt8) -> Bool {
        (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "z")) || byte == UInt8(ascii: "_")
            || byte == UInt8(ascii: ":")
    }

    private static func isNameByte(_ byte: UInt8) -> Bool {
        isNameStartASCII(byte) || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
    }

    /// A non-ASCII name character (XML 1.0 fifth edition, NameChar).
    private static func isNameCharacter(_ value: UInt32) -> Bool {
        switch value {
        case 0xB7, 0xC0...0xD6, 0xD8...0xF6, 0xF8...0x37D, 0x37F...0x1FFF, 0x200C...0x200D, 0x203F...0x2040,
            0x2070...0x218F, 0x2C00...0x2FEF, 0x3001...0xD7FF, 0xF900...0xFDCF, 0xFDF0...0xFFFD, 0x10000...0xEFFFF:
            return true
        default:
            return false
        }
    }

    /// XML 1.0 Char: tab, LF, CR, and the scalars from 0x20 without the
    /// surrogates, 0xFFFE and 0xFFFF.
    private static func isLegalCharacter(_ value: UInt32) -> Bool {
        switch value {
        case 0x09, 0x0A, 0x0D, 0x20...0xD7FF, 0xE000...0xFFFD, 0x10000...0x10FFFF: return true
        default: return false
        }
    }

    private static func digitValue(_ byte: UInt8, hex: Bool) -> UInt32? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return UInt32(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f") where hex: return UInt32(byte - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F") where hex: return UInt32(byte - UInt8(ascii: "A") + 10)
        default: return nil
        }
    }
}
