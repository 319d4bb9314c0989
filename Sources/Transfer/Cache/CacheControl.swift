import FoundationEssentials

/// The `Cache-Control` directives a private cache acts on (RFC 9111 §5.2),
/// parsed from every `Cache-Control` field of a message. Unknown directives
/// are ignored; a malformed number counts as 0 (the conservative reading:
/// already stale).
struct CacheControl: Sendable, Hashable {
    var maxAge: TimeInterval?
    var noStore = false
    var noCache = false
    var mustRevalidate = false
    var isPublic = false
    var isPrivate = false

    init(_ headers: HTTPHeaders) {
        for value in headers.values(for: "Cache-Control") {
            for directive in Self.directives(value) { apply(directive.name, directive.argument) }
        }
        // HTTP/1.0's `Pragma: no-cache` means `no-cache` when Cache-Control says nothing.
        if headers["Cache-Control"] == nil,
            headers.values(for: "Pragma").contains(where: { $0.lowercased().contains("no-cache") })
        {
            noCache = true
        }
    }

    private mutating func apply(_ name: String, _ argument: String?) {
        switch name {
        case "max-age":
            // A repeated or invalid max-age is read as 0 (RFC 9111 §4.2.1).
            let seconds = argument.flatMap { Int64($0) }.map { TimeInterval(max(0, $0)) } ?? 0
            maxAge = maxAge == nil ? seconds : 0
        case "no-store": noStore = true
        case "no-cache": noCache = true   // with a field list too: the simplest safe reading
        case "must-revalidate", "proxy-revalidate": mustRevalidate = true
        case "public": isPublic = true
        case "private": isPrivate = true
        default: break   // s-maxage is for shared caches: this one is private
        }
    }

    /// `name[=argument]` items of one field value, names lower-cased,
    /// quotes around arguments removed.
    static func directives(_ value: String) -> [(name: String, argument: String?)] {
        value.split(separator: ",").compactMap { item in
            let parts = item.split(separator: "=", maxSplits: 1)
            let name = parts.first.map { $0.trimmingBlanks().lowercased() } ?? ""
            guard !name.isEmpty else { return nil }
            var argument = parts.count > 1 ? parts[1].trimmingBlanks() : nil
            if let quoted = argument, quoted.count >= 2, quoted.hasPrefix("\""), quoted.hasSuffix("\"") {
                argument = String(quoted.dropFirst().dropLast())
            }
            return (name, argument)
        }
    }
}

/// The freshness rules of RFC 9111 §4.2 for one stored response.
enum CacheFreshness {
    /// How long the response is fresh for, from its `Cache-Control: max-age`,
    /// else `Expires` minus `Date` (an `Expires` that is not a date is in the
    /// past). nil: no explicit lifetime. Transfer applies no heuristic
    /// lifetime: such a response is stale at once (revalidated when it has a
    /// validator, fetched again otherwise), and only the policies that accept
    /// stale data use it as it is.
    static func lifetime(of headers: HTTPHeaders, responseTime: Date) -> TimeInterval? {
        if let maxAge = CacheControl(headers).maxAge { return maxAge }
        guard let expiresText = headers["Expires"] else { return nil }
        guard let expires = RetryAfter.httpDate(expiresText) else { return 0 }
        let date = headers["Date"].flatMap(RetryAfter.httpDate) ?? responseTime
        return max(0, expires.timeIntervalSince(date))
    }

    /// The response's age now (§4.2.3): its initial age (the larger of
    /// `Age` and `responseTime - Date`) plus the time it has been stored.
    static func age(of headers: HTTPHeaders, responseTime: Date, now: Date) -> TimeInterval {
        let apparent = headers["Date"].flatMap(RetryAfter.httpDate).map { max(0, responseTime.timeIntervalSince($0)) } ?? 0
        let ageValue = headers["Age"].flatMap { Int64($0.trimmingBlanks()) }
            .map { TimeInterval(max(0, $0)) } ?? 0
        return max(apparent, ageValue) + max(0, now.timeIntervalSince(responseTime))
    }

    /// Whether the response may be used without asking the server.
    static func isFresh(_ headers: HTTPHeaders, responseTime: Date, now: Date) -> Bool {
        let control = CacheControl(headers)
        guard !control.noCache, let lifetime = lifetime(of: headers, responseTime: responseTime) else { return false }
        return lifetime > age(of: headers, responseTime: responseTime, now: now)
    }
}
