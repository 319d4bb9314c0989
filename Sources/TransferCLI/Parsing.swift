import Dispatch
import FoundationEssentials
import Glibc
import Transfer

/// Small parsers for option values; each returns nil on bad input so the
/// caller can report a usage error naming the flag.
enum Parse {
    /// curl's `--resolve` entry: `HOST:PORT:ADDR[,ADDR...]`, a non-empty host
    /// name without colons, a port 1-65535, and IPv4 or `[IPv6]` addresses.
    static func isResolveEntry(_ entry: String) -> Bool {
        guard let firstColon = entry.firstIndex(of: ":") else { return false }
        let host = entry[..<firstColon]
        let rest = entry[entry.index(after: firstColon)...]
        guard let secondColon = rest.firstIndex(of: ":") else { return false }
        let port = rest[..<secondColon]
        let addresses = rest[rest.index(after: secondColon)...]
        guard !host.isEmpty, host.allSatisfy({ $0.isASCII && !$0.isWhitespace && $0 != "," }),
              port.count <= 5, port.allSatisfy(\.isASCII), let number = Int(port), (1...65535).contains(number),
              !addresses.isEmpty
        else { return false }
        return addresses.split(separator: ",", omittingEmptySubsequences: false).allSatisfy { address in
            var text = String(address)
            var family = AF_INET
            if text.hasPrefix("[") && text.hasSuffix("]") && text.count > 2 {
                text = String(text.dropFirst().dropLast())
                family = AF_INET6
            }
            var storage = in6_addr()
            return inet_pton(family, text, &storage) == 1
        }
    }

    /// "2M", "500k", "1.5G", "1000" → bytes per second (K = 1024, as curl).
    /// With `allowingZero`, "0" (with or without a unit) is 0: curl's
    /// `--limit-rate 0`, no limit.
    static func rate(_ text: String, allowingZero: Bool = false) -> Int64? {
        let trimmed = text.trimmingWhitespace()
        guard let last = trimmed.last else { return nil }
        var multiplier: Double = 1
        var number = Substring(trimmed)
        switch last {
        case "k", "K": multiplier = 1024
        case "m", "M": multiplier = 1024 * 1024
        case "g", "G": multiplier = 1024 * 1024 * 1024
        default: break
        }
        if multiplier != 1 { number = number.dropLast() }
        guard let value = Double(number), value.isFinite, value >= 0 else { return nil }
        if value == 0 { return allowingZero ? 0 : nil }
        let bytes = value * multiplier
        guard bytes >= 1, bytes < Double(Int64.max) else { return nil }
        return Int64(bytes)
    }

    /// "200-299,304" → closed ranges; nil when malformed.
    static func statusRanges(_ text: String) -> [ClosedRange<Int>]? {
        var ranges: [ClosedRange<Int>] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let bounds = part.split(separator: "-", omittingEmptySubsequences: false)
                .map { $0.trimmingWhitespace() }
            guard (1...2).contains(bounds.count), let low = Int(bounds[0]),
                let high = bounds.count == 2 ? Int(bounds[1]) : low,
                (100...999).contains(low), (100...999).contains(high), low <= high
            else { return nil }
            ranges.append(low...high)
        }
        return ranges.isEmpty ? nil : ranges
    }

    /// "Name: value" → (name, value); nil without a colon or with an empty name.
    static func header(_ text: String) -> (String, String)? {
        guard let colon = text.firstIndex(of: ":") else { return nil }
        let name = text[..<colon].trimmingWhitespace()
        let value = text[text.index(after: colon)...].trimmingWhitespace()
        guard !name.isEmpty else { return nil }
        return (name, value)
    }

    /// Lines of a URL file: blank lines and `#` comments skipped; each line
    /// trimmed of white space (`CharacterSet.whitespaces`: tab and the
    /// Unicode space separators). Lines end at LF, CR or CRLF.
    ///
    /// One pass over the UTF-8 bytes, one string per kept line: lists of
    /// tens of thousands of URLs are common for `--parallel` runs.
    static func urlLines(_ text: String) -> [String] {
        var text = text
        return text.withUTF8 { urlLines(in: $0) }
    }

    /// ``urlLines(_:)`` over UTF-8 bytes (a part of a URL file that ends at a line break).
    static func urlLines(bytes: [UInt8]) -> [String] {
        bytes.withUnsafeBufferPointer { urlLines(in: $0) }
    }

    private static func urlLines(in bytes: UnsafeBufferPointer<UInt8>) -> [String] {
        var lines: [String] = []
        var start = 0
        for index in 0...bytes.count where index == bytes.count || bytes[index] == 0x0A || bytes[index] == 0x0D {
            if let line = urlLine(UnsafeBufferPointer(rebasing: bytes[start..<index])) { lines.append(line) }
            start = index + 1
        }
        return lines
    }

    /// One line of a URL file, trimmed; nil when blank or a comment.
    private static func urlLine(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        var low = 0
        var high = bytes.count
        while low < high && (bytes[low] == 0x20 || bytes[low] == 0x09) { low += 1 }
        while high > low && (bytes[high - 1] == 0x20 || bytes[high - 1] == 0x09) { high -= 1 }
        guard low < high else { return nil }
        let asciiEnds = bytes[low] < 0x80 && bytes[high - 1] < 0x80
        if asciiEnds && bytes[low] != 0x23 {
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[low..<high]), as: UTF8.self)
        }
        // Rare: a non-ASCII space at an end, or a `#` that a combining mark
        // may turn into another character; the Unicode-aware path decides.
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[low..<high]), as: UTF8.self)
        var scalars = text.unicodeScalars[...]
        while let first = scalars.first, isWhitespace(first) { scalars.removeFirst() }
        while let last = scalars.last, isWhitespace(last) { scalars.removeLast() }
        let line = String(scalars)
        return line.isEmpty || line.hasPrefix("#") ? nil : line
    }

    /// `CharacterSet.whitespaces`: tab and the space separators (Zs).
    private static func isWhitespace(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x09, 0x20, 0xA0, 0x1680, 0x2000...0x200A, 0x202F, 0x205F, 0x3000: return true
        default: return false
        }
    }

    /// Lower-case hex of 64 digits, or nil.
    static func sha256Hex(_ text: String) -> String? {
        let hex = text.lowercased()
        guard hex.count == 64, hex.allSatisfy({ $0.isHexDigit }) else { return nil }
        return hex
    }
}

/// File names for `-O`: the library's ``HTTPResponse/suggestedFilename``
/// when Content-Disposition names one, else the requested URL's last path
/// component (as curl does, not the URL after redirects); then no leading
/// dots, so no hidden files either.
enum RemoteName {
    static func make(response: HTTPResponse, requestURL: URL) -> String {
        if response.headers["Content-Disposition"] != nil, let name = sanitize(response.suggestedFilename) {
            return name
        }
        return make(requestURL: requestURL)
    }

    /// The name from the requested URL alone: what can be known before the
    /// request is sent (the server may still name the file otherwise).
    static func make(requestURL: URL) -> String {
        let last = requestURL.path.split(separator: "/").last.map(String.init) ?? ""
        return sanitize(last.percentDecoded ?? last) ?? "download"
    }

    /// Keeps the last path component (of `/` or `\`), drops control
    /// characters and leading dots (no `..`, no hidden files), caps at 255
    /// bytes; nil when nothing usable is left.
    static func sanitize(_ raw: String) -> String? {
        let unified = String(raw.map { $0 == "\\" ? "/" : $0 })
        guard let last = unified.split(separator: "/").last else { return nil }
        var name = String(String.UnicodeScalarView(last.unicodeScalars.filter { scalar in
            !(scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value))
        }))
        name = name.trimmingWhitespace()
        while name.hasPrefix(".") { name.removeFirst() }
        while name.utf8.count > 255 { name.removeLast() }
        return name.isEmpty ? nil : name
    }
}
