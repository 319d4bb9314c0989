import FoundationEssentials
import Glibc
import Transfer

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
