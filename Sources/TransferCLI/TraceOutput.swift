import Dispatch
import FoundationEssentials
import Glibc
import Logging
import Transfer

/// `-v` and `--trace FILE` (`--trace-ascii FILE`): libcurl's own trace as
/// curl's `-v` shows it, from the session's logger at `.trace`: `*` lines
/// (connection, TLS), `>` request lines and `<` response lines, one per
/// line. Credentials never appear: the engine replaces the values of
/// Authorization, Cookie, Proxy-Authorization and Set-Cookie with
/// `[redacted]`, and secret query values are removed from URLs.
final class TraceOutput: Sendable {
    /// The session's logger; only its `.trace` records are written.
    let logger: Logger
    private let sink: TraceSink

    /// nil when neither `-v` nor a trace file was asked for.
    init?(path: String?, verbose: Bool, timed: Bool = false) throws(Failure) {
        if let path {
            if path == "-" {
                sink = TraceSink(fd: STDOUT_FILENO, owned: false, timed: timed)
            } else {
                let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
                guard fd >= 0 else {
                    throw Failure(.localFile, "cannot open --trace \(path): \(String(cString: strerror(errno)))")
                }
                sink = TraceSink(fd: fd, owned: true, timed: timed)
            }
        } else if verbose {
            sink = TraceSink(fd: STDERR_FILENO, owned: false, timed: timed)
        } else {
            return nil
        }
        let sink = sink
        var logger = Logger(label: "transfer.cli.trace") { _ in TraceLogHandler(sink: sink) }
        logger.logLevel = .trace
        self.logger = logger
    }
}

/// Where trace lines go; lines of parallel transfers never mix.
final class TraceSink: Sendable {
    let fd: Int32
    private let owned: Bool
    /// `--trace-time`: each line starts with `HH:MM:SS.uuuuuu ` (local time, as curl).
    private let timed: Bool
    private let lock = Protected(())

    init(fd: Int32, owned: Bool, timed: Bool = false) {
        self.fd = fd
        self.owned = owned
        self.timed = timed
    }

    /// The time of day as curl's --trace-time writes it.
    private static func timestamp() -> String {
        var now = timeval()
        gettimeofday(&now, nil)
        var seconds = now.tv_sec
        var parts = tm()
        localtime_r(&seconds, &parts)
        return Describe.zeroPadded(parts.tm_hour, width: 2) + ":" + Describe.zeroPadded(parts.tm_min, width: 2) + ":"
            + Describe.zeroPadded(parts.tm_sec, width: 2) + "." + Describe.zeroPadded(now.tv_usec, width: 6) + " "
    }

    deinit { if owned { close(fd) } }

    func line(_ text: String) {
        let bytes = Array(((timed ? Self.timestamp() : "") + Terminal.printable(text) + "\n").utf8)
        switch fd {
        case STDOUT_FILENO: Terminal.writeStdout(bytes)
        case STDERR_FILENO: Terminal.writeStderr(bytes)
        default: lock.withLock { _ in _ = Terminal.writeAll(fd, bytes) }
        }
    }
}

/// Writes the message of each `.trace` record (libcurl's lines), nothing else.
struct TraceLogHandler: LogHandler {
    let sink: TraceSink
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        guard event.level == .trace else { return }
        sink.line(event.message.description)
    }
}
