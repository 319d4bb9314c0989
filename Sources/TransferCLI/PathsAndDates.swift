import FoundationEssentials
import Glibc
import Transfer

/// The path operations the command needs on plain strings, worked out by
/// FoundationEssentials' `URL(filePath:)`.
enum Path {
    // A wrapper rather than `URL(filePath:)` at each call, for what that
    // initialiser does and the command must not (the paths are printed, in
    // messages and `%{filename_effective}`, as the user wrote them):
    // - It reads a leading `~` as a home folder. To the command, as to curl,
    //   `~` is a name (the shell expands the `~` the user meant): such a path
    //   is given to it behind `./`, which is taken off the result again.
    // - Its `path` of a relative URL is absolute (against the current
    //   directory); `relativePath` keeps the text as written.
    // - `""` is the current directory to it (a join would give `./name`, the
    //   parent of `name` would be `.`); here "" stays "" and a bare name has
    //   no parent.
    // Left as URL has them, for no path a file can be written at: a doubled
    // `/` stays (`a//` and `b` give `a//b`), and the last component or the
    // parent of a path ending in `.` or `..` is resolved against the current
    // directory.

    /// `directory/name`, with one `/` between them; `name` alone when
    /// `directory` is empty.
    static func join(_ directory: String, _ name: String) -> String {
        guard !directory.isEmpty else { return name }
        return text(of: fileURL(directory, hint: .isDirectory).appending(path: name, directoryHint: .notDirectory),
                    from: directory)
    }

    /// The path without its last component: `a/b` → `a`, `/a` → `/`, `a` → "".
    static func parent(_ path: String) -> String {
        let parent = text(of: fileURL(path, hint: .notDirectory).deletingLastPathComponent(), from: path)
        return parent == "." && !path.hasPrefix("./") ? "" : parent
    }

    /// The last component: `a/b/` → `b`, `/` → `/`.
    static func lastComponent(_ path: String) -> String {
        fileURL(path, hint: .notDirectory).lastPathComponent
    }

    /// `path` as a file URL, a leading `~` kept as a name.
    private static func fileURL(_ path: String, hint: URL.DirectoryHint) -> URL {
        URL(filePath: path.hasPrefix("~") ? "./" + path : path, directoryHint: hint)
    }

    /// The path of `url`, relative as `path` was, without the `./` that
    /// ``fileURL(_:hint:)`` put before a leading `~`.
    private static func text(of url: URL, from path: String) -> String {
        let text = url.relativePath
        return path.hasPrefix("~") && text.hasPrefix("./") ? String(text.dropFirst(2)) : text
    }

    /// `$TMPDIR` when it is an absolute path, else `/tmp`.
    static var temporaryDirectory: String {
        if let value = getenv("TMPDIR"), value.pointee == UInt8(ascii: "/") { return String(cString: value) }
        return "/tmp"
    }

    /// The size of a file in bytes, or nil when it cannot be read.
    static func fileSize(_ path: String) -> Int64? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Int64(info.st_size)
    }
}

/// The dates of curl's `-z`: written as an HTTP date, read in the forms
/// curl users write most. No locale: month and day names are English.
enum CurlDate {
    private static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// RFC 9110's IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`.
    static func httpDate(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }

    /// HTTP dates (IMF-fixdate, RFC 850, asctime), ISO 8601 with or without
    /// a zone (`Z`, `±hh:mm`, `±hhmm`), and `yyyy-MM-dd[ HH:mm:ss]`,
    /// `dd MMM yyyy[ HH:mm:ss]` and `yyyyMMdd` in UTC; nil for anything else.
    static func parse(_ text: String) -> Date? {
        if let date = HTTPDate.parse(text) { return date }
        let chars = Array(text)
        guard chars.allSatisfy(\.isASCII) else { return nil }
        // yyyyMMdd
        if chars.count == 8, chars.allSatisfy(\.isNumber) {
            return date(year: Int(String(chars[0..<4])), month: Int(String(chars[4..<6])),
                        day: Int(String(chars[6..<8])), clock: nil)
        }
        // yyyy-MM-dd, then 'T' or ' ' and HH:mm:ss, then an optional zone after a 'T'.
        if chars.count >= 10, chars[4] == "-", chars[7] == "-" {
            let year = number(chars[0..<4]), month = number(chars[5..<7]), day = number(chars[8..<10])
            if chars.count == 10 { return date(year: year, month: month, day: day, clock: nil) }
            guard chars.count >= 19, chars[10] == "T" || chars[10] == " ",
                let clock = clock(chars[11..<19])
            else { return nil }
            let rest = Substring(String(chars[19...]))
            let offset: Int
            if rest.isEmpty {
                offset = 0
            } else if chars[10] == "T", let zone = zoneOffset(rest) {
                offset = zone
            } else {
                return nil
            }
            return date(year: year, month: month, day: day, clock: clock)?.addingTimeInterval(-TimeInterval(offset))
        }
        // dd MMM yyyy[ HH:mm:ss]
        let fields = text.split(separator: " ")
        guard fields.count == 3 || fields.count == 4, (1...2).contains(fields[0].count), fields[2].count == 4,
            let month = months.firstIndex(where: { $0.lowercased() == fields[1].lowercased() })
        else { return nil }
        var time: [Int] = []
        if fields.count == 4 {
            guard fields[3].count == 8, let parsed = clock(Array(fields[3])[...]) else { return nil }
            time = parsed
        }
        return date(year: Int(fields[2]), month: month + 1, day: Int(fields[0]), clock: time)
    }

    /// Digits only, as a number.
    private static func number(_ chars: ArraySlice<Character>) -> Int? {
        guard !chars.isEmpty, chars.allSatisfy(\.isNumber) else { return nil }
        return Int(String(chars))
    }

    /// `HH:mm:ss` as [hour, minute, second].
    private static func clock(_ chars: ArraySlice<Character>) -> [Int]? {
        let base = chars.startIndex
        guard chars.count == 8, chars[base + 2] == ":", chars[base + 5] == ":",
            let hour = number(chars[base..<base + 2]), let minute = number(chars[base + 3..<base + 5]),
            let second = number(chars[base + 6..<base + 8]), hour < 24, minute < 60, second < 61
        else { return nil }
        return [hour, minute, second]
    }

    /// A UTC date from its fields; nil for a field out of range or a day the
    /// month does not have.
    private static func date(year: Int?, month: Int?, day: Int?, clock: [Int]?) -> Date? {
        guard let year, let month, let day, (1...12).contains(month), (1...31).contains(day) else { return nil }
        let time = clock ?? []
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month - 1)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(time.count == 3 ? time[0] : 0)
        parts.tm_min = Int32(time.count == 3 ? time[1] : 0)
        parts.tm_sec = Int32(time.count == 3 ? time[2] : 0)
        let seconds = timegm(&parts)
        // timegm normalises 31 Feb into March: such a date is not one.
        guard parts.tm_mday == Int32(day), parts.tm_mon == Int32(month - 1) else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    /// `Z`, `±hh:mm` or `±hhmm` in seconds east of UTC.
    private static func zoneOffset(_ zone: Substring) -> Int? {
        if zone == "Z" { return 0 }
        let digits = zone.dropFirst().filter { $0 != ":" }
        guard let sign = zone.first, sign == "+" || sign == "-", digits.count == 4,
            digits.allSatisfy({ $0.isASCII && $0.isNumber }),
            zone.count == 5 || (zone.count == 6 && zone.dropFirst(3).first == ":"),
            let hours = Int(digits.prefix(2)), let minutes = Int(digits.suffix(2)), hours < 24, minutes < 60
        else { return nil }
        return (sign == "-" ? -1 : 1) * (hours * 3600 + minutes * 60)
    }
}

/// Messages and numbers the command prints, without Foundation's formatting.
enum Describe {
    /// A file-system error as one line: the path and `strerror` for the
    /// errors FoundationEssentials' file APIs throw, the error itself for others.
    static func error(_ error: any Error) -> String {
        if let cocoa = error as? CocoaError, let posix = cocoa.userInfo["NSUnderlyingError"] as? POSIXError {
            let message = String(cString: strerror(posix.code.rawValue))
            if let path = cocoa.userInfo["NSFilePath"] as? String { return "\(path): \(message)" }
            return message
        }
        if let transfer = error as? TransferError { return transfer.message }
        return String(describing: error)
    }

    /// `value` with three decimals, as `%.3f` wrote it for the values the
    /// command prints (non-negative seconds); "0.000" for anything not finite.
    static func threeDecimals(_ value: Double) -> String {
        guard value.isFinite, value >= 0, value < 9e15 else { return "0.000" }
        let thousandths = UInt64((value * 1000).rounded())
        let fraction = thousandths % 1000
        let digits = String(fraction)
        return "\(thousandths / 1000)." + String(repeating: "0", count: 3 - digits.count) + digits
    }
}

extension StringProtocol {
    /// Without leading and trailing white space other than line breaks
    /// (what `trimmingCharacters(in: .whitespaces)` removed).
    func trimmingWhitespace() -> String {
        func isSpace(_ scalar: Unicode.Scalar) -> Bool {
            scalar.properties.isWhitespace && scalar != "\n" && scalar != "\r" && scalar != "\u{0B}"
                && scalar != "\u{0C}" && scalar != "\u{85}" && scalar != "\u{2028}" && scalar != "\u{2029}"
        }
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !isSpace($0) }) else { return "" }
        let last = scalars.lastIndex(where: { !isSpace($0) })!
        var trimmed = String.UnicodeScalarView()
        trimmed.append(contentsOf: scalars[first...last])
        return String(trimmed)
    }
}

extension Describe {
    /// `value` in decimal, zero-padded on the left to `width` digits (`%0Nd`).
    static func zeroPadded(_ value: some BinaryInteger, width: Int) -> String {
        let digits = String(value.magnitude)
        let padded = String(repeating: "0", count: max(0, width - digits.count)) + digits
        return value < 0 ? "-" + padded : padded
    }
}
