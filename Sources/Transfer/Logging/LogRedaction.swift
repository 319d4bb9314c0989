import FoundationEssentials
import Logging

/// What a session's logger may show of a request, a response or an error:
/// credential header values, URL user info and secret-looking query and
/// fragment values never appear. Applied to every message and metadata
/// value where the record is emitted, libcurl's trace lines included.
///
/// The built-in rules (always on; see docs/SECURITY.md, "Logging"):
/// - A header's value is replaced when its name is `Authorization`,
///   `Proxy-Authorization`, `Cookie` or `Set-Cookie`, or contains `token`,
///   `secret`, `key`, `auth`, `session`, `passw`, `pwd`, `cookie`,
///   `credential` or `signature` in any case (`X-Api-Key`,
///   `X-Auth-Token`, `X-Session-Id`), except the challenges
///   `WWW-Authenticate` and `Proxy-Authenticate`.
/// - A query or fragment parameter's value is replaced when a word of its
///   name (split at `_`, `-`, `.` and camelCase humps) is one of `token`,
///   `key`, `apikey`, `secret`, `password`, `passwd`, `pwd`, `pass`,
///   `signature`, `sig`, `auth`, `authorization`, `credential(s)`,
///   `session`, `sessionid`, `jwt`; or its whole name, compared without
///   case, `_`, `-` or `.`, contains `token`, `secret`, `password` or
///   `apikey`, or is `code`, `state`, `nonce` or `code_verifier` (OAuth).
/// - User info (`user:password@`) of any URL in the text is replaced.
/// - A parameter whose percent-decoded value is a URL with a secret in it
///   (`redirect_uri=…%3Fcode%3D…`) is replaced whole.
///
/// Add names of your own with ``headerNames`` and ``queryParameterNames``
/// (on ``SessionConfiguration/logRedaction``); nothing can be removed.
public struct LogRedaction: Sendable, Hashable {
    /// What replaces a redacted value: `[redacted]`.
    public static let placeholder = "[redacted]"

    /// The built-in rules only.
    public static let standard = LogRedaction()

    /// More header names, in any case, whose values are replaced (exact
    /// names: `"X-Tenant"` redacts `x-tenant`, not `X-Tenant-Id`).
    public var headerNames: Set<String> {
        didSet { extraHeaders = Set(headerNames.map { $0.lowercased() }) }
    }

    /// More query (and fragment) parameter names whose values are replaced,
    /// compared without case, `_`, `-` or `.`: `"customerRef"` also redacts
    /// `customer_ref` and `CUSTOMER-REF`.
    public var queryParameterNames: Set<String> {
        didSet { extraQueryNames = Set(queryParameterNames.map(Self.normalized)) }
    }

    private var extraHeaders: Set<String>
    private var extraQueryNames: Set<String>

    /// Rules with the given names added to the built-in ones.
    ///
    /// - Parameters:
    ///   - headerNames: More header names whose values are replaced.
    ///   - queryParameterNames: More query or fragment parameter names
    ///     whose values are replaced.
    public init(headerNames: Set<String> = [], queryParameterNames: Set<String> = []) {
        self.headerNames = headerNames
        self.queryParameterNames = queryParameterNames
        extraHeaders = Set(headerNames.map { $0.lowercased() })
        extraQueryNames = Set(queryParameterNames.map(Self.normalized))
    }

    /// Two rule sets are equal when they add the same names.
    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.extraHeaders == rhs.extraHeaders && lhs.extraQueryNames == rhs.extraQueryNames
    }

    /// Hashes the added names.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(extraHeaders)
        hasher.combine(extraQueryNames)
    }

    // MARK: - Headers

    /// Header names always redacted (lowercased).
    static let secretHeaders: Set<String> = ["authorization", "cookie", "proxy-authorization", "set-cookie"]
    /// Parts of a header name that make it a secret (lowercased).
    static let secretHeaderParts = [
        "token", "secret", "key", "auth", "session", "passw", "pwd", "cookie", "credential", "signature",
    ]
    /// Challenges: they name schemes and realms, never secrets.
    private static let challengeHeaders: Set<String> = ["www-authenticate", "proxy-authenticate"]

    /// Whether the value of header `name` is replaced in log records.
    ///
    /// - Parameter name: A header field name, in any case.
    /// - Returns: true when the built-in rule or ``headerNames`` covers it.
    public func redactsHeader(named name: String) -> Bool {
        let lower = name.lowercased()
        if Self.secretHeaders.contains(lower) || extraHeaders.contains(lower) { return true }
        if Self.challengeHeaders.contains(lower) { return false }
        return Self.secretHeaderParts.contains { lower.contains($0) }
    }

    /// `value`, or the placeholder when `name` is a credential header.
    func headerValue(name: String, _ value: String) -> String {
        redactsHeader(named: name) ? Self.placeholder : value
    }

    /// Headers as "Name: value" strings, credential values replaced.
    func metadata(_ headers: HTTPHeaders) -> Logger.MetadataValue {
        .array(headers.map { .string("\($0.name): \(headerValue(name: $0.name, $0.value))") })
    }

    // MARK: - Query names

    /// Query parameter name words (split on `_`, `-`, `.` and camelCase) whose values are replaced.
    private static let secretQueryParts: Set<String> = [
        "token", "key", "apikey", "secret", "password", "passwd", "pwd", "pass", "signature", "sig",
        "auth", "authorization", "credential", "credentials", "session", "sessionid", "jwt",
    ]
    /// Substrings of a normalized name (lowercase, no separators) that make it a secret.
    private static let secretQuerySubstrings = ["token", "secret", "password", "apikey"]
    /// Whole normalized names that are secrets (OAuth's code and state among them).
    private static let secretQueryNames: Set<String> = ["code", "state", "nonce", "codeverifier"]

    /// Whether the value of query or fragment parameter `name` is replaced
    /// in log records.
    ///
    /// - Parameter name: A parameter name, percent-encoded or not.
    /// - Returns: true when the built-in rule or ``queryParameterNames`` covers it.
    public func redactsQueryParameter(named name: String) -> Bool {
        let decoded = name.percentDecoded ?? name
        let whole = Self.normalized(decoded)
        if Self.secretQueryNames.contains(whole) || extraQueryNames.contains(whole) { return true }
        if Self.secretQuerySubstrings.contains(where: { whole.contains($0) }) { return true }
        return Self.words(decoded).contains { Self.secretQueryParts.contains($0) }
    }

    /// Lowercased, without anything but letters and digits.
    private static func normalized(_ name: String) -> String {
        String(name.lowercased().unicodeScalars.filter(\.isAlphanumeric).map(Character.init))
    }

    /// The lowercased words of `name`: split at non-alphanumerics and where
    /// a lowercase letter or digit is followed by an uppercase one.
    private static func words(_ name: String) -> [String] {
        var words: [String] = []
        var current = ""
        var previousIsLowerOrDigit = false
        for c in name {
            guard c.isLetter || c.isNumber else {
                if !current.isEmpty { words.append(current.lowercased()) }
                current = ""
                previousIsLowerOrDigit = false
                continue
            }
            if c.isUppercase && previousIsLowerOrDigit && !current.isEmpty {
                words.append(current.lowercased())
                current = ""
            }
            current.append(c)
            previousIsLowerOrDigit = c.isLowercase || c.isNumber
        }
        if !current.isEmpty { words.append(current.lowercased()) }
        return words
    }

    // MARK: - URLs and text

    /// `url` without user and password, secret query values replaced.
    ///
    /// - Parameter url: Any URL.
    /// - Returns: The URL as text, safe to log.
    public func redacting(_ url: URL) -> String {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true) else {
            return redacting(text: url.absoluteString)
        }
        components.user = nil
        components.password = nil
        components.fragment = nil   // never sent anyway
        let query = components.percentEncodedQuery ?? ""
        components.percentEncodedQuery = nil
        guard let base = components.string else { return "<unparsable URL>" }
        guard !query.isEmpty else { return base }
        // Built as text: the placeholder's brackets are not valid in a query.
        return base + "?" + redactedParameters(Substring(query))
    }

    /// `text` with the user info of every URL in it and the secret values of
    /// every query or fragment in it replaced: for error messages and
    /// libcurl's trace, which write URLs and request targets anywhere.
    ///
    /// A URL's authority runs from `://` to `/`, `?`, `#`, whitespace, a
    /// quote or `>`; when it holds an `@`, all before the last `@` is user
    /// info. A query or fragment runs from `?` or `#` to whitespace, a quote
    /// or `>`.
    ///
    /// - Parameter text: Any text.
    /// - Returns: The text, safe to log.
    public func redacting(text: String) -> String {
        redactedParameters(in: redactedUserInfo(in: text))
    }

    /// `line`, one line of libcurl's trace, with credential header values
    /// replaced: a header at the start of the line, or one in brackets as
    /// HTTP/2 traces write them (`[x-api-key: …]`); then as
    /// ``redacting(text:)``.
    func redacting(traceLine line: String) -> String {
        redacting(text: redactedHeaders(in: line))
    }

    private static func endsURLPart(_ c: Character) -> Bool {
        c == " " || c == "\t" || c == "'" || c == "\"" || c == ">" || c == "<" || c == "\r" || c == "\n"
    }

    private func redactedUserInfo(in text: String) -> String {
        guard text.contains("://") else { return text }
        var result = ""
        var rest = Substring(text)
        while let mark = rest.firstRange(of: "://") {
            result += rest[..<mark.upperBound]
            let after = rest[mark.upperBound...]
            // The authority also ends where another URL's "://" begins
            // ("a@b(https://u:p@h"): that URL is scanned next.
            var end = after.startIndex
            while end < after.endIndex {
                let c = after[end]
                if c == "/" || c == "?" || c == "#" || Self.endsURLPart(c) { break }
                if c == ":" && after[after.index(after: end)...].hasPrefix("//") { break }
                end = after.index(after: end)
            }
            let authority = after[..<end]
            if let at = authority.lastIndex(of: "@") {
                result += Self.placeholder
                result += authority[at...]
            } else {
                result += authority
            }
            rest = after[end...]
        }
        return result + rest
    }

    private func redactedParameters(in text: String) -> String {
        guard text.contains("?") || text.contains("#") else { return text }
        var result = ""
        var rest = Substring(text)
        while let mark = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) {
            result += rest[...mark]
            let after = rest[rest.index(after: mark)...]
            let end = after.firstIndex(where: Self.endsURLPart) ?? after.endIndex
            result += redactedParameters(after[..<end])
            rest = after[end...]
        }
        return result + rest
    }

    /// `name=value` items separated by `&`, `;` or `#` (a fragment after a
    /// query), the separators kept.
    private func redactedParameters(_ query: Substring) -> String {
        var result = ""
        var item = Substring()
        var start = query.startIndex
        func flush(_ end: Substring.Index) {
            item = query[start..<end]
            if let equals = item.firstIndex(of: "="),
                redactsQueryParameter(named: String(item[..<equals]))
                    || carriesSecret(value: item[item.index(after: equals)...])
            {
                result += item[...equals]
                result += Self.placeholder
            } else {
                result += item
            }
        }
        var index = query.startIndex
        while index < query.endIndex {
            let c = query[index]
            if c == "&" || c == ";" || c == "#" || c == "?" {
                flush(index)
                result.append(c)
                start = query.index(after: index)
            }
            index = query.index(after: index)
        }
        flush(query.endIndex)
        return result
    }

    /// A parameter value that is itself a URL with a secret in it, once
    /// decoded (`redirect_uri=app%3A%2Fcb%3Fcode%3D…`): redacted whole. The
    /// inner value is shorter than the item, so the recursion ends.
    private func carriesSecret(value: Substring) -> Bool {
        guard value.contains("%") else { return false }
        let decoded = value.percentDecoded ?? String(value)
        guard decoded.contains(where: { $0 == "?" || $0 == "#" || $0 == "@" }) else { return false }
        return redacting(text: decoded) != decoded
    }

    private func redactedHeaders(in line: String) -> String {
        var result = ""
        var rest = Substring(line)
        var atStart = true
        while !rest.isEmpty {
            // A name starts the line, or follows '['.
            if atStart || result.last == "[" {
                let bracketed = !atStart
                let nameEnd = rest.firstIndex { !($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == ".") }
                if let colon = nameEnd, colon != rest.startIndex, rest[colon] == ":",
                    redactsHeader(named: String(rest[..<colon]))
                {
                    result += rest[...colon]
                    result += " " + Self.placeholder
                    // A value the engine redacted already ends after its
                    // placeholder's own bracket.
                    var value = rest[rest.index(after: colon)...]
                    while value.first == " " || value.first == "\t" { value = value.dropFirst() }
                    if value.hasPrefix(Self.placeholder) { value = value.dropFirst(Self.placeholder.count) }
                    let valueEnd = bracketed ? (value.firstIndex(of: "]") ?? rest.endIndex) : rest.endIndex
                    rest = rest[valueEnd...]
                    atStart = false
                    continue
                }
            }
            atStart = false
            result.append(rest.removeFirst())
        }
        return result
    }

    /// `meta` with every string in it passed through ``redacting(text:)``.
    func redacting(_ meta: Logger.Metadata) -> Logger.Metadata {
        meta.mapValues(redacting(value:))
    }

    private func redacting(value: Logger.MetadataValue) -> Logger.MetadataValue {
        switch value {
        case .string(let s): return .string(redacting(text: s))
        case .stringConvertible(let s): return .string(redacting(text: s.description))
        case .array(let items): return .array(items.map(redacting(value:)))
        case .dictionary(let d): return .dictionary(d.mapValues(redacting(value:)))
        }
    }
}
