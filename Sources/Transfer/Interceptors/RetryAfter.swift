import Foundation

/// The `Retry-After` response header (RFC 9110 §10.2.3): delta seconds or an HTTP-date.
enum RetryAfter {
    /// The wait the header asks for, measured from `now`: zero for a date in
    /// the past, nil when the value is neither form (then it is ignored).
    static func delay(_ value: String, now: Date = Date()) -> Duration? {
        let text = value.trimmingCharacters(in: .whitespaces)
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

    /// IMF-fixdate, and the obsolete RFC 850 and asctime forms recipients must accept.
    static func httpDate(_ text: String) -> Date? {
        for format in formats {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = format
            if let date = formatter.date(from: text) { return date }
        }
        return nil
    }

    private static let formats = [
        "EEE, dd MMM yyyy HH:mm:ss zzz",   // Sun, 06 Nov 1994 08:49:37 GMT
        "EEEE, dd-MMM-yy HH:mm:ss zzz",    // Sunday, 06-Nov-94 08:49:37 GMT
        "EEE MMM d HH:mm:ss yyyy",         // Sun Nov  6 08:49:37 1994
    ]
}
