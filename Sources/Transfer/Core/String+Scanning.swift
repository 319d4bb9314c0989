import Glibc

// The few string operations the core used from Foundation's NSString bridge
// (`trimmingCharacters(in:)`, `removingPercentEncoding`, `caseInsensitiveCompare`,
// `range(of:options: .backwards)`, `String(format:)`), written on the standard
// library so that the core needs only FoundationEssentials. The character
// classes match Foundation's `CharacterSet` definitions exactly.

extension Unicode.Scalar {
    /// `CharacterSet.whitespaces`: general category Zs, U+0009 (tab) and,
    /// as Foundation has it, U+200B (zero width space).
    var isBlank: Bool {
        value == 0x09 || value == 0x200B || properties.generalCategory == .spaceSeparator
    }

    /// `CharacterSet.whitespacesAndNewlines`: categories Zs, Zl, Zp, and
    /// U+0009–U+000D, U+0085 and U+200B.
    var isBlankOrNewline: Bool {
        if (0x09...0x0D).contains(value) || value == 0x85 || value == 0x200B { return true }
        switch properties.generalCategory {
        case .spaceSeparator, .lineSeparator, .paragraphSeparator: return true
        default: return false
        }
    }

    /// `CharacterSet.controlCharacters`: categories Cc and Cf.
    var isControlOrFormat: Bool {
        switch properties.generalCategory {
        case .control, .format: return true
        default: return false
        }
    }

    /// `CharacterSet.alphanumerics`: categories L*, M* and N* (of the standard
    /// library's Unicode version, which may be newer than ICU's).
    var isAlphanumeric: Bool {
        switch properties.generalCategory {
        case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter,
            .nonspacingMark, .spacingMark, .enclosingMark,
            .decimalNumber, .letterNumber, .otherNumber:
            return true
        default:
            return false
        }
    }
}

extension StringProtocol {
    /// The text without the scalars at either end for which `isTrimmed` holds
    /// (`trimmingCharacters(in:)`).
    func trimming(where isTrimmed: (Unicode.Scalar) -> Bool) -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !isTrimmed($0) }) else { return "" }
        let last = scalars.lastIndex(where: { !isTrimmed($0) })!
        return String(String.UnicodeScalarView(scalars[first...last]))
    }

    /// The text without blanks (spaces, tabs, other Zs) at either end:
    /// `trimmingCharacters(in: .whitespaces)`.
    func trimmingBlanks() -> String { trimming(where: \.isBlank) }

    /// Whether the two strings are equal ignoring case, as
    /// `caseInsensitiveCompare(_:) == .orderedSame` answers for header names:
    /// byte by byte for ASCII, by lower-casing otherwise (no full case folding:
    /// "ß" and "SS" differ; header names are ASCII tokens).
    func equalsIgnoringCase(_ other: some StringProtocol) -> Bool {
        var left = utf8.makeIterator()
        var right = other.utf8.makeIterator()
        while true {
            switch (left.next(), right.next()) {
            case (nil, nil):
                return true
            case let (a?, b?) where a < 0x80 && b < 0x80:
                if a == b { continue }
                let lowerA = (0x41...0x5A).contains(a) ? a | 0x20 : a
                let lowerB = (0x41...0x5A).contains(b) ? b | 0x20 : b
                if lowerA != lowerB { return false }
            case (nil, _?), (_?, nil):
                // Different lengths in UTF-8 can still fold equal outside ASCII.
                return !(isASCII && other.isASCII) && lowercased() == other.lowercased()
            default:
                return lowercased() == other.lowercased()
            }
        }
    }

    fileprivate var isASCII: Bool { utf8.allSatisfy { $0 < 0x80 } }

    /// The range of the last occurrence of `needle`
    /// (`range(of:options: .backwards)`); nil when there is none.
    func lastRange(of needle: some StringProtocol) -> Range<Index>? {
        guard !needle.isEmpty else { return nil }
        var found: Range<Index>?
        var from = startIndex
        while from < endIndex, let range = self[from...].firstRange(of: needle) {
            found = range
            from = index(after: range.lowerBound)
        }
        return found
    }

    /// The text with every `%XX` replaced by its byte, read as UTF-8
    /// (`removingPercentEncoding`): nil when a `%` is not followed by two hex
    /// digits or the bytes are not UTF-8.
    package var percentDecoded: String? {
        let bytes = Array(utf8)
        guard bytes.contains(UInt8(ascii: "%")) else { return String(self) }
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            guard byte == UInt8(ascii: "%") else {
                output.append(byte)
                index += 1
                continue
            }
            guard index + 2 < bytes.count, let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2])
            else { return nil }
            output.append(high << 4 | low)
            index += 3
        }
        return String(validating: output, as: UTF8.self)
    }
}

private func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
    default: return nil
    }
}

/// `format` applied to `arguments` by the C library's `vsnprintf`: the same
/// text as `String(format:)` for the numeric conversions the core uses
/// (`%.3f`, `%02x`, `%d`). No `%@`.
package func cFormat(_ format: String, _ arguments: CVarArg...) -> String {
    var buffer = [CChar](repeating: 0, count: 64)
    var length = Int(withVaList(arguments) { vsnprintf(&buffer, buffer.count, format, $0) })
    if length >= buffer.count {
        buffer = [CChar](repeating: 0, count: length + 1)
        length = Int(withVaList(arguments) { vsnprintf(&buffer, buffer.count, format, $0) })
    }
    return String(decoding: buffer.prefix(max(0, length)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Lower-case hex of `bytes`, two digits each.
func lowerHex(_ bytes: some Sequence<UInt8>) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var output: [UInt8] = []
    for byte in bytes {
        output.append(digits[Int(byte >> 4)])
        output.append(digits[Int(byte & 0x0F)])
    }
    return String(decoding: output, as: UTF8.self)
}

extension String {
    /// ``StringProtocol/equalsIgnoringCase(_:)`` for two strings, over their
    /// contiguous bytes while both are ASCII (a scheme, a header name): the
    /// generic version walks two UTF8View iterators, at several times the
    /// cost, and every request asks a few times. Outside ASCII it asks the
    /// generic version, so both give the same answer.
    func equalsIgnoringCase(_ other: String) -> Bool {
        var left = self
        var right = other
        let asciiAnswer: Bool? = left.withUTF8 { a in
            right.withUTF8 { b -> Bool? in
                guard a.count == b.count else {
                    return a.allSatisfy { $0 < 0x80 } && b.allSatisfy { $0 < 0x80 } ? false : nil
                }
                for index in 0..<a.count {
                    let x = a[index]
                    let y = b[index]
                    if x == y { continue }
                    if x >= 0x80 || y >= 0x80 { return nil }
                    let lowerX = (0x41...0x5A).contains(x) ? x | 0x20 : x
                    let lowerY = (0x41...0x5A).contains(y) ? y | 0x20 : y
                    if lowerX != lowerY { return false }
                }
                return true
            }
        }
        if let asciiAnswer { return asciiAnswer }
        return self[...].equalsIgnoringCase(other[...])
    }
}
