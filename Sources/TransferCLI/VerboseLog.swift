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

    func log(level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String,
             file: String, function: String, line: UInt)
    {
        Terminal.note(Terminal.printable(message.description))
    }
}
