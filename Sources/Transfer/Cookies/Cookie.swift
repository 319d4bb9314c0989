import FoundationEssentials

/// One HTTP cookie, as a ``CookieStore`` holds it (the Linux spelling of `HTTPCookie`).
///
/// The store keeps cookies in libcurl's cookie engine, which applies RFC 6265's
/// domain, path, expiry, `Secure` and `HttpOnly` rules; `sameSite` is kept beside it.
public struct Cookie: Sendable, Hashable, CustomStringConvertible {
    /// The `SameSite` attribute (RFC 6265bis). Kept and reported; a client
    /// library has no "site for cookies", so it does not change what is sent.
    public enum SameSite: String, Sendable, Hashable {
        /// Sent on same-site requests only.
        case strict = "Strict"
        /// Sent on same-site requests and top-level navigations.
        case lax = "Lax"
        /// Sent on every request (needs `Secure`).
        case none = "None"
    }

    /// The cookie's name.
    public var name: String
    /// The cookie's value, as the server set it.
    public var value: String
    /// The host the cookie belongs to, without a leading dot.
    public var domain: String
    /// Whether hosts under `domain` get the cookie too (a `Domain` attribute
    /// was given); false: `domain` only (host-only cookie).
    public var includesSubdomains: Bool
    /// The path the cookie is sent for (default `/`).
    public var path: String
    /// When the cookie expires; nil for a session cookie.
    public var expires: Date?
    /// Sent over https only.
    public var isSecure: Bool
    /// Not for scripts; HTTP requests send it as any other.
    public var isHTTPOnly: Bool
    /// The `SameSite` attribute, nil when the server set none.
    public var sameSite: SameSite?

    /// A cookie for `domain`, as `HTTPCookie` would hold it.
    public init(name: String, value: String, domain: String, includesSubdomains: Bool = false, path: String = "/",
                expires: Date? = nil, isSecure: Bool = false, isHTTPOnly: Bool = false, sameSite: SameSite? = nil)
    {
        self.name = name
        self.value = value
        self.domain = domain
        self.includesSubdomains = includesSubdomains
        self.path = path
        self.expires = expires
        self.isSecure = isSecure
        self.isHTTPOnly = isHTTPOnly
        self.sameSite = sameSite
    }

    /// True for a cookie without an expiry date.
    public var isSessionOnly: Bool { expires == nil }

    public var description: String { "\(name)=\(value); domain=\(domain); path=\(path)" }

    /// Whether the cookie has expired at `date`.
    func isExpired(at date: Date) -> Bool { expires.map { $0 <= date } ?? false }

    /// Name, lower-cased domain and path: what makes two cookies the same one.
    var key: CookieKey {
        CookieKey(name: name, domain: domain.lowercased(), path: SetCookieAttributes.normalized(path))
    }

    // MARK: - Netscape cookie-file lines (the format curl reads and writes)

    /// Parses one line of a Netscape cookie file: seven TAB-separated fields
    /// (domain, include-subdomains, path, secure, expiry in seconds since 1970
    /// with 0 for a session cookie, name, value), a `#HttpOnly_` prefix for
    /// HttpOnly cookies. Nil for comments, blank lines and lines curl would skip.
    init?(netscapeLine line: Substring) {
        // Prefixes are compared by bytes, not by Character: a combining mark
        // right after "_" or "." joins it into one Character, and the
        // Character-based hasPrefix would then miss the ASCII prefix.
        var text = line
        var httpOnly = false
        if text.utf8.starts(with: "#HttpOnly_".utf8) {
            text = text[text.utf8.index(text.startIndex, offsetBy: "#HttpOnly_".utf8.count)...]
            httpOnly = true
        } else if text.utf8.first == UInt8(ascii: "#") {
            return nil
        }
        let fields = text.split(separator: "\t", omittingEmptySubsequences: false)
        // curl writes an empty value as nothing after the last TAB; it also
        // accepts a line with the value missing altogether.
        guard fields.count == 7 || fields.count == 6 else { return nil }
        var domain = String(fields[0])
        if domain.unicodeScalars.first == "." { domain = String(domain.unicodeScalars.dropFirst()) }
        guard !domain.isEmpty, let parsed = Int64(fields[4]), parsed >= 0 else { return nil }
        let seconds = min(parsed, Self.latestExpiry)
        let path = String(fields[2])
        guard path.hasPrefix("/") else { return nil }
        self.init(name: String(fields[5]), value: fields.count == 7 ? String(fields[6]) : "",
                  domain: domain, includesSubdomains: fields[1].uppercased() == "TRUE", path: path,
                  expires: seconds == 0 ? nil : Date(timeIntervalSince1970: TimeInterval(seconds)),
                  isSecure: fields[3].uppercased() == "TRUE", isHTTPOnly: httpOnly)
        guard validationError == nil else { return nil }
    }

    /// 9999-12-31T23:59:59Z: later expiry times are clamped to it.
    static let latestExpiry: Int64 = 253_402_300_799

    /// The cookie as a Netscape cookie-file line (no line break).
    var netscapeLine: String {
        let seconds: Int64
        if let expires {
            // 0 would mean "session": an expiry at or before 1970 is 1, long expired.
            let t = expires.timeIntervalSince1970
            seconds = t.isNaN ? 1 : Int64(min(max(1, t.rounded(.down)), Double(Self.latestExpiry)))
        } else {
            seconds = 0
        }
        return (isHTTPOnly ? "#HttpOnly_" : "") + (includesSubdomains ? "." : "") + domain + "\t"
            + (includesSubdomains ? "TRUE" : "FALSE") + "\t" + path + "\t" + (isSecure ? "TRUE" : "FALSE") + "\t"
            + String(seconds) + "\t" + name + "\t" + value
    }

    /// Why the cookie cannot be stored, or nil: what would break the cookie
    /// line or the `Cookie` header (control characters, `;`, `=` in the name,
    /// TABs, an empty name or domain, a path not starting with `/`).
    var validationError: String? {
        func hasControl(_ s: String) -> Bool { s.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7f } }
        if name.isEmpty { return "the cookie name is empty" }
        if hasControl(name) || name.contains(where: { ";= ,".contains($0) }) {
            return "the cookie name \(name.debugDescription) has a control character, space, comma, ';' or '='"
        }
        if hasControl(value) || value.contains(";") {
            return "the value of cookie \(name.debugDescription) has a control character or ';'"
        }
        // A host name or an IP literal (non-ASCII allowed for IDNs); a '#' first would
        // make the file line a comment.
        let hostCharacters = Set(
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._:[]".unicodeScalars)
        if domain.isEmpty || domain.unicodeScalars.first == "."
            || domain.unicodeScalars.contains(where: { $0.isASCII && !hostCharacters.contains($0) })
        {
            return "the cookie domain \(domain.debugDescription) is not a host name"
        }
        if !path.hasPrefix("/") || hasControl(path) || path.contains(";") {
            return "the cookie path \(path.debugDescription) does not start with '/' or has ';'"
        }
        if name.utf8.count + value.utf8.count + domain.utf8.count + path.utf8.count > 4096 {
            return "the cookie \(name.debugDescription) is longer than 4096 bytes"
        }
        return nil
    }

    // MARK: - Matching (what a request to a URL would send)

    /// RFC 6265 5.4: domain-match, path-match, Secure only over https, not expired.
    func matches(_ url: URL, at date: Date) -> Bool {
        guard let host = url.host?.lowercased(), !isExpired(at: date) else { return false }
        let scheme = url.scheme?.lowercased()
        if isSecure && scheme != "https" { return false }
        let domain = self.domain.lowercased()
        if includesSubdomains {
            guard host == domain || host.hasSuffix("." + domain) else { return false }
        } else if host != domain {
            return false
        }
        let requestPath = url.path.isEmpty ? "/" : url.path
        if requestPath == path { return true }
        guard requestPath.hasPrefix(path) else { return false }
        return path.hasSuffix("/") || requestPath.dropFirst(path.count).hasPrefix("/")
    }
}

/// What identifies a cookie in a store: name, domain (lower case) and path.
struct CookieKey: Hashable, Sendable {
    var name: String
    var domain: String
    var path: String
}

/// The few `Set-Cookie` attributes the store keeps beside libcurl's record.
///
/// libcurl parses the cookie and stores it; it drops `SameSite`. This reads
/// only what names the cookie (name, `Domain`, `Path`) and `SameSite`, never
/// the value or the expiry, so it cannot disagree with libcurl on those.
struct SetCookieAttributes: Sendable, Hashable {
    var key: CookieKey
    var sameSite: Cookie.SameSite?

    /// Reads a `Set-Cookie` field value sent in reply to `url`; nil when it
    /// has no `name=` or `url` has no host.
    init?(setCookie value: String, url: URL) {
        guard let host = url.host?.lowercased(), !host.isEmpty else { return nil }
        let parts = value.split(separator: ";", omittingEmptySubsequences: false)
        guard let pair = parts.first, let eq = pair.firstIndex(of: "=") else { return nil }
        let name = pair[..<eq].trimmingBlanks()
        guard !name.isEmpty else { return nil }
        var domain = host
        var path: String?
        var sameSite: Cookie.SameSite?
        for attribute in parts.dropFirst() {
            let kv = attribute.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = kv[0].trimmingBlanks().lowercased()
            let val = kv.count > 1 ? kv[1].trimmingBlanks() : ""
            switch key {
            case "domain":
                var d = val.lowercased()
                while d.unicodeScalars.first == "." { d = String(d.unicodeScalars.dropFirst()) }
                if !d.isEmpty { domain = d }
            case "path":
                path = val.hasPrefix("/") ? val : nil
            case "samesite":
                switch val.lowercased() {
                case "strict": sameSite = .strict
                case "lax": sameSite = .lax
                case "none": sameSite = Cookie.SameSite.none
                default: sameSite = nil
                }
            default:
                break
            }
        }
        key = CookieKey(name: name, domain: domain,
                        path: Self.normalized(path ?? Self.defaultPath(of: url)))
        self.sameSite = sameSite
    }

    /// RFC 6265 5.1.4: the request path up to, not including, its last '/'.
    static func defaultPath(of url: URL) -> String {
        let path = url.path
        guard path.hasPrefix("/"), let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "/" }
        return String(path[..<slash])
    }

    /// libcurl stores a path without its trailing '/' (except "/").
    static func normalized(_ path: String) -> String {
        var p = path
        while p.count > 1 && p.hasSuffix("/") { p.removeLast() }
        return p
    }
}
