import FoundationEssentials
import Glibc
import Synchronization
import Transfer

#if canImport(Glibc)
    import Glibc
#endif

/// Where a display writes: a terminal, a pipe, or a buffer in a test.
public protocol TerminalOutput: Sendable {
    /// Whether control sequences may be written (a TTY that is not `TERM=dumb`).
    var isTerminal: Bool { get }
    /// The terminal's width in columns, when known.
    var columns: Int? { get }
    /// Writes `text` in one go.
    func write(_ text: String)
}

/// A file descriptor, standard error by default (so progress never mixes with
/// a body written to standard output).
public struct FileDescriptorOutput: TerminalOutput {
    /// The file descriptor written to.
    public let fileDescriptor: Int32
    public let isTerminal: Bool

    /// Output to `fileDescriptor` (default standard error).
    public init(fileDescriptor: Int32 = STDERR_FILENO) {
        self.fileDescriptor = fileDescriptor
        let term = ProcessInfo.processInfo.environment["TERM"] ?? ""
        self.isTerminal = isatty(fileDescriptor) == 1 && term != "dumb"
    }

    public var columns: Int? {
        var size = winsize()
        guard ioctl(fileDescriptor, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else {
            return Int(ProcessInfo.processInfo.environment["COLUMNS"] ?? "")
        }
        return Int(size.ws_col)
    }

    public func write(_ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeMutableBytes { raw in
                Glibc.write(fileDescriptor, raw.baseAddress! + offset, raw.count - offset)
            }
            if written < 0 {
                if errno == EINTR { continue }
                return  // a closed terminal is not worth failing a transfer for
            }
            offset += written
        }
        bytes.removeAll()
    }
}

/// An in-memory output for tests and for callers that place the text
/// themselves: keeps every write separately.
public final class TerminalBuffer: TerminalOutput {
    public let isTerminal: Bool
    public let columns: Int?
    private let writes = Protected<[String]>([])

    /// A buffer that says it is a terminal of `columns` columns (or not).
    public init(isTerminal: Bool, columns: Int? = 80) {
        self.isTerminal = isTerminal
        self.columns = columns
    }

    public func write(_ text: String) { writes.withLock { $0.append(text) } }

    /// Every write, in order.
    public var allWrites: [String] { writes.withLock { $0 } }

    /// Everything written, concatenated.
    public var contents: String { allWrites.joined() }
}
