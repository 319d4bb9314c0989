import Logging
import Transfer

/// Where `-v` goes: a swift-log `Logger` whose handler writes each message,
/// as is, as one line on stderr (curl's `-v` shape: `* ` notes, `< ` response
/// lines), control characters made printable. No global bootstrap: the
/// handler is given to this logger only.
enum VerboseLog {
    /// The `-v` logger, or nil when the run is not verbose.
    static func make(enabled: Bool) -> Logger? {
        guard enabled else { return nil }
        var logger = Logger(label: "transfer.cli") { _ in StderrLineLogHandler() }
        logger.logLevel = .info
        return logger
    }

    /// Query parameter name parts whose values `-v` never prints (the
    /// library's trace redacts the same in libcurl's lines).
    private static let secretQueryParts: Set<String> = [
        "token", "key", "apikey", "secret", "password", "passwd", "pwd", "pass", "signature", "sig",
        "auth", "authorization", "credential", "credentials", "session", "sessionid", "jwt",
    ]

    /// `url` as `-v` prints it: the password of the user info and the values
    /// of secret-looking query parameters replaced by `[redacted]`.
    static func shown(url: String) -> String {
        var text = url
        if let scheme = text.firstRange(of: "://") {
            let authorityEnd = text[scheme.upperBound...].firstIndex { "/?#".contains($0) } ?? text.endIndex
            if let at = text[scheme.upperBound..<authorityEnd].lastIndex(of: "@"),
                let colon = text[scheme.upperBound..<at].firstIndex(of: ":")
            {
                text.replaceSubrange(text.index(after: colon)..<at, with: "[redacted]")
            }
        }
        guard let mark = text.firstIndex(of: "?") else { return text }
        let queryEnd = text[mark...].firstIndex(of: "#") ?? text.endIndex
        let query = text[text.index(after: mark)..<queryEnd].split(separator: "&", omittingEmptySubsequences: false)
            .map { item -> String in
                guard let equals = item.firstIndex(of: "=") else { return String(item) }
                let name = (String(item[..<equals]).percentDecoded ?? String(item[..<equals])).lowercased()
                let secret = name.split(whereSeparator: { !$0.isLetter && !$0.isNumber })
                    .contains { secretQueryParts.contains(String($0)) }
                return secret ? "\(item[..<equals])=[redacted]" : String(item)
            }
        return String(text[...mark]) + query.joined(separator: "&") + String(text[queryEnd...])
    }

    /// Response headers whose values `-v` never prints: the library's log
    /// rule (``LogRedaction/standard``: Set-Cookie, X-Auth-Token, …).
    static func shown(name: String, value: String) -> String {
        LogRedaction.standard.redactsHeader(named: name) ? LogRedaction.placeholder : value
    }
}

/// One stderr line per record, the message only (no timestamp, level or
/// metadata), through ``Terminal`` so lines of parallel transfers never mix.
struct StderrLineLogHandler: LogHandler {
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        Terminal.note(Terminal.printable(event.message.description))
    }
}
