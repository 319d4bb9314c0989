import Dispatch
import FoundationEssentials
import Glibc
import Transfer

/// Writing to stdout and stderr with plain write(2): no Foundation buffering
/// between body bytes and display, and one lock per stream so lines of
/// parallel transfers never interleave.
enum Terminal {
    private static let stdoutLock = Protected(())
    private static let stderrLock = Protected(())

    static var stderrIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }

    /// The terminal width of stderr, 80 when unknown.
    static var stderrColumns: Int {
        var size = winsize()
        if ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        return 80
    }

    /// Replaces control characters (C0, DEL, C1) with `?`: for anything that
    /// echoes server- or user-supplied text.
    static func printable(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.map { scalar in
            (scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)) ? "?" : scalar
        }))
    }

    /// One line on stderr (a newline is added).
    static func note(_ line: String) {
        writeStderr(line + "\n")
    }

    static func writeStderr(_ text: String) {
        stderrLock.withLock { _ in _ = writeAll(STDERR_FILENO, Array(text.utf8)) }
    }

    static func writeStderr(_ bytes: [UInt8]) {
        stderrLock.withLock { _ in _ = writeAll(STDERR_FILENO, bytes) }
    }

    /// Writes to stdout; returns errno on failure (EPIPE when the reader left).
    @discardableResult
    static func writeStdout(_ bytes: [UInt8]) -> Int32 {
        stdoutLock.withLock { _ in writeAll(STDOUT_FILENO, bytes) }
    }

    /// Runs `body` holding the stdout lock, so headers and body of one
    /// transfer stay together.
    static func withStdout<T>(_ body: () -> T) -> T {
        stdoutLock.withLock { _ in body() }
    }

    /// Writes every byte, retrying short writes and EINTR. Returns 0 or errno.
    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Int32 {
        bytes.withUnsafeBytes { raw in writeAll(fd, raw) }
    }

    static func writeAll(_ fd: Int32, _ raw: UnsafeRawBufferPointer) -> Int32 {
        guard var base = raw.baseAddress else { return 0 }
        var left = raw.count
        while left > 0 {
            let n = write(fd, base, left)
            if n < 0 {
                if errno == EINTR { continue }
                return errno
            }
            left -= n
            base += n
        }
        return 0
    }

    /// Copies the file at `path` to stdout in large blocks (never the whole
    /// body in memory). Caller holds the stdout lock (see ``withStdout(_:)``).
    /// Returns 0 or errno.
    static func copyFileToStdoutLocked(_ path: String) -> Int32 {
        copyFile(path, to: STDOUT_FILENO)
    }

    /// Copies the file at `path` to `out` in 1 MiB blocks; 0 or an errno.
    static func copyFile(_ path: String, to out: Int32) -> Int32 {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return errno }
        defer { close(fd) }
        let size = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let n = read(fd, buffer.baseAddress, size)
            if n < 0 {
                if errno == EINTR { continue }
                return errno
            }
            if n == 0 { return 0 }
            let rc = writeAll(out, UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            if rc != 0 { return rc }
        }
    }
}
