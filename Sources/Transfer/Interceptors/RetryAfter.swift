import FoundationEssentials
import Glibc

/// The `Retry-After` response header (RFC 9110 §10.2.3): delta seconds or an HTTP-date.
enum RetryAfter {
    /// The wait the header asks for, measured from `now`: zero for a date in
    /// the past, nil when the value is neither form (then it is ignored).
    static func delay(_ value: String, now: Date = Date()) -> Duration? {
        let text = value.trimmingBlanks()
        guard !text.isEmpty else { return nil }
        if text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            // 1*DIGIT; a number too large for Int64 is "absurdly far" (capped by the caller).
            guard let seconds = Int64(text) else { return .seconds(Int64.max / 2) }
            return .seconds(seconds)
        }
        guard let date = httpDate(text) else { return nil }
        let seconds = date.timeIntervalSince(now)
        guard seconds > 0 else { return .zero }
        return .milliseconds(Int64(min(seconds, 1e12) * 1000))
    }

    /// IMF-fixdate, and the obsolete RFC 850 and asctime forms recipients must
    /// accept (RFC 9110 §5.6.7), in GMT (or UTC):
    /// `Sun, 06 Nov 1994 08:49:37 GMT`, `Sunday, 06-Nov-94 08:49:37 GMT`,
    /// `Sun Nov  6 08:49:37 1994`.
    static func httpDate(_ text: String) -> Date? {
        let fields = text.split(whereSeparator: { $0 == " " || $0 == "," })
        let day: Substring, month: Substring, year: Substring, time: Substring
        switch fields.count {
        case 6 where weekdays.contains(String(fields[0])) && isZone(fields[5]):
            (day, month, year, time) = (fields[1], fields[2], fields[3], fields[4])
        case 4 where longWeekdays.contains(String(fields[0])) && isZone(fields[3]):
            let parts = fields[1].split(separator: "-", omittingEmptySubsequences: false)
            guard parts.count == 3 else { return nil }
            (day, month, year, time) = (parts[0], parts[1], parts[2], fields[2])
        case 5 where weekdays.contains(String(fields[0])):
            (day, month, year, time) = (fields[2], fields[1], fields[4], fields[3])
        default:
            return nil
        }
        let clock = time.split(separator: ":", omittingEmptySubsequences: false)
        guard let dayNumber = number(day, digits: 1...2), (1...31).contains(dayNumber),
            let monthIndex = months.firstIndex(of: String(month)),
            var yearNumber = number(year, digits: 2...4), year.count != 3,
            clock.count == 3, let hour = number(clock[0], digits: 2...2), hour < 24,
            let minute = number(clock[1], digits: 2...2), minute < 60,
            let second = number(clock[2], digits: 2...2), second < 61
        else { return nil }
        if year.count == 2 {
            // RFC 9110: a two-digit year more than 50 years ahead is in the past century.
            var now = tm()
            var clockNow = time_t(Date().timeIntervalSince1970)
            gmtime_r(&clockNow, &now)
            let current = Int(now.tm_year) + 1900
            yearNumber += current - current % 100
            if yearNumber > current + 50 { yearNumber -= 100 }
        }
        var parts = tm()
        parts.tm_year = Int32(yearNumber - 1900)
        parts.tm_mon = Int32(monthIndex)
        parts.tm_mday = Int32(dayNumber)
        parts.tm_hour = Int32(hour)
        parts.tm_min = Int32(minute)
        parts.tm_sec = Int32(second)
        let seconds = timegm(&parts)
        // timegm normalises 31 Feb into March: such a date is not one.
        guard parts.tm_mday == Int32(dayNumber), parts.tm_mon == Int32(monthIndex) else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    private static func isZone(_ field: Substring) -> Bool { field == "GMT" || field == "UTC" }

    /// The value of 1...4 ASCII digits, nil for anything else.
    private static func number(_ text: Substring, digits: ClosedRange<Int>) -> Int? {
        guard digits.contains(text.utf8.count),
            text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
        else { return nil }
        return Int(text)
    }

    private static let weekdays: Set<String> = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    private static let longWeekdays: Set<String> = [
        "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday",
    ]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
}

/// The HTTP-date forms of ``RetryAfter/httpDate(_:)``, for the package's
/// other modules (the command's `-z`).
package enum HTTPDate {
    /// IMF-fixdate, RFC 850 or asctime, in GMT; nil for anything else.
    package static func parse(_ text: String) -> Date? { RetryAfter.httpDate(text) }
}
