import Foundation
import Logging

/// What a log record may show of a request or response: credential header
/// values, URL user info and secret-looking query values never appear.
enum LogRedaction {
    static let placeholder = "[redacted]"

    /// Headers whose values are always replaced (lowercased names).
    static let secretHeaders: Set<String> = ["authorization", "cookie", "proxy-authorization", "set-cookie"]

    /// Query parameter name parts (split on `_`, `-`, `.`) whose values are replaced.
    private static let secretQueryParts: Set<String> = [
        "token", "key", "apikey", "secret", "password", "passwd", "pwd", "pass", "signature", "sig",
        "auth", "authorization", "credential", "credentials", "session", "sessionid", "jwt",
    ]

    /// `value`, or the placeholder when `name` is a credential header.
    static func headerValue(name: String, _ value: String) -> String {
        secretHeaders.contains(name.lowercased()) ? placeholder : value
    }

    /// Headers as "Name: value" strings, credential values replaced.
    static func metadata(_ headers: HTTPHeaders) -> Logger.MetadataValue {
        .array(headers.map { .string("\($0.name): \(headerValue(name: $0.name, $0.value))") })
    }

    /// `url` without user and password, secret query values replaced.
    static func url(_ url: URL) -> String {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true) else {
            return "<unparsable URL>"
        }
        components.user = nil
        components.password = nil
        components.fragment = nil   // never sent anyway
        let query = components.percentEncodedQuery ?? ""
        components.percentEncodedQuery = nil
        guard let base = components.string else { return "<unparsable URL>" }
        guard !query.isEmpty else { return base }
        // Built as text: the placeholder's brackets are not valid in a query.
        return base + "?" + redactedQuery(Substring(query))
    }

    /// `text` with the secret query values of every URL or request target
    /// in it replaced (a query runs from `?` to whitespace, a quote or `>`):
    /// for libcurl's trace, which writes request lines and URLs.
    static func queries(in text: String) -> String {
        guard text.contains("?") else { return text }
        var result = ""
        var rest = Substring(text)
        while let mark = rest.firstIndex(of: "?") {
            result += rest[...mark]
            let after = rest[rest.index(after: mark)...]
            let end = after.firstIndex { $0 == " " || $0 == "\t" || $0 == "'" || $0 == "\"" || $0 == ">" } ?? after.endIndex
            result += redactedQuery(after[..<end])
            rest = after[end...]
        }
        return result + rest
    }

    private static func redactedQuery(_ query: Substring) -> String {
        query.split(separator: "&", omittingEmptySubsequences: false).map { item -> String in
            guard let equals = item.firstIndex(of: "=") else { return String(item) }
            let name = item[..<equals]
            return isSecretQueryName(String(name)) ? "\(name)=\(placeholder)" : String(item)
        }
        .joined(separator: "&")
    }

    static func isSecretQueryName(_ name: String) -> Bool {
        let decoded = (name.removingPercentEncoding ?? name).lowercased()
        return decoded.split(whereSeparator: { !$0.isLetter && !$0.isNumber })
            .contains { secretQueryParts.contains(String($0)) }
    }
}
