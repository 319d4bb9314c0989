import FoundationEssentials

extension HTTPResponse {
    /// A safe file name for the body: from `Content-Disposition`
    /// (`filename*=UTF-8''…` per RFC 5987/6266 first, then `filename`), else
    /// the last path component of the URL, else `"download"`.
    ///
    /// The result is a single path component: directories (`/` and `\`),
    /// control characters and NUL are removed, `.`/`..` and empty names
    /// are replaced, so that appending it to a folder never leaves it.
    public var suggestedFilename: String {
        if let header = headers["Content-Disposition"], let name = Self.filename(fromContentDisposition: header),
            let safe = Self.sanitizedFilename(name)
        {
            return safe
        }
        let last = url.lastPathComponent
        if last != "/", let safe = Self.sanitizedFilename(last.percentDecoded ?? last) {
            return safe
        }
        return "download"
    }

    /// The raw file name a Content-Disposition value names (unsanitised).
    static func filename(fromContentDisposition value: String) -> String? {
        var plain: String?
        var extended: String?
        for parameter in parameters(of: value) {
            switch parameter.name {
            case "filename*":
                extended = decodeExtended(parameter.value) ?? extended
            case "filename":
                plain = parameter.value
            default:
                continue
            }
        }
        return extended ?? plain
    }

    /// `; name=value` pairs after the disposition type; quoted strings may
    /// hold `;` and backslash escapes.
    private static func parameters(of value: String) -> [(name: String, value: String)] {
        var result: [(String, String)] = []
        let chars = Array(value.unicodeScalars)
        var index = 0
        // Skip the disposition type.
        while index < chars.count && chars[index] != ";" { index += 1 }
        while index < chars.count {
            index += 1  // the ';'
            var name = ""
            while index < chars.count && chars[index] != "=" && chars[index] != ";" {
                name.unicodeScalars.append(chars[index])
                index += 1
            }
            guard index < chars.count, chars[index] == "=" else { continue }
            index += 1
            while index < chars.count && (chars[index] == " " || chars[index] == "\t") { index += 1 }
            var parsed = ""
            if index < chars.count && chars[index] == "\"" {
                index += 1
                while index < chars.count && chars[index] != "\"" {
                    if chars[index] == "\\" && index + 1 < chars.count { index += 1 }
                    parsed.unicodeScalars.append(chars[index])
                    index += 1
                }
                while index < chars.count && chars[index] != ";" { index += 1 }
            } else {
                while index < chars.count && chars[index] != ";" {
                    parsed.unicodeScalars.append(chars[index])
                    index += 1
                }
                parsed = parsed.trimmingBlanks()
            }
            result.append((name.trimmingBlanks().lowercased(), parsed))
        }
        return result
    }

    /// RFC 5987 `charset'language'percent-encoded`; UTF-8 and ISO-8859-1.
    private static func decodeExtended(_ value: String) -> String? {
        let parts = value.split(separator: "'", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        let charset = parts[0].lowercased()
        var bytes: [UInt8] = []
        var utf8 = Array(parts[2].utf8)[...]
        while let byte = utf8.popFirst() {
            if byte == UInt8(ascii: "%") {
                guard utf8.count >= 2, let high = hexValue(utf8[utf8.startIndex]),
                    let low = hexValue(utf8[utf8.startIndex + 1])
                else { return nil }
                bytes.append(high << 4 | low)
                utf8 = utf8.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        switch charset {
        case "utf-8":
            return String(validating: bytes, as: UTF8.self)
        case "iso-8859-1":
            return String(bytes.map { Character(Unicode.Scalar($0)) })
        default:
            return nil
        }
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// One safe path component from `name`, or nil when nothing usable is left.
    static func sanitizedFilename(_ name: String) -> String? {
        // The last component after any separator: "../../etc/passwd" -> "passwd".
        // Split scalars, not Characters: "/" followed by a combining mark is
        // one Character that is not "/", yet still a separator on disk.
        let component = name.unicodeScalars.split(whereSeparator: { $0 == "/" || $0 == "\\" }).last
            .map { String(String.UnicodeScalarView($0)) } ?? ""
        var cleaned = String.UnicodeScalarView()
        for scalar in component.unicodeScalars {
            // C0, DEL and C1 controls (NUL included) never reach a file name.
            if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) { continue }
            cleaned.append(scalar)
        }
        var result = String(cleaned)
        // NAME_MAX is 255 bytes: keep the end (the extension) when cutting.
        while result.utf8.count > 255 { result.unicodeScalars.removeFirst() }
        // No hidden files, no "..": dots and blanks go from both ends
        // together (" . .x" must not leave ".x"), scalar by scalar.
        result = result.trimming { $0.isBlank || $0 == "." }
        guard !result.isEmpty else { return nil }
        return result
    }
}

extension DownloadTask {
    /// A destination that puts the file in `directory` under the response's
    /// ``HTTPResponse/suggestedFilename``: never outside `directory`.
    ///
    /// The name comes from the server, so an existing file of that name is
    /// not replaced: the task fails with ``TransferError/Code/fileError``
    /// (`EEXIST`) unless ``DownloadTask/replacesExistingFile`` is set.
    public static func destination(inDirectory directory: URL) -> Destination {
        { _, response in
            directory.appendingPathComponent(response.suggestedFilename, isDirectory: false)
        }
    }
}
