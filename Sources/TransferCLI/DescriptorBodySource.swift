import Glibc
import Transfer

/// A body source over standard input or a path that cannot seek (a pipe, a
/// FIFO, `/dev/stdin`): plain `read(2)` calls, in order, never a seek. The
/// library reads it on a thread of its own, so a slow writer blocks only that
/// thread.
final class DescriptorBodySource: BodySource {
    private let path: String
    private var descriptor: Int32 = -1
    private var closed = false

    /// - Parameter path: a file path, or "-" for standard input.
    init(path: String) { self.path = path }

    deinit { close() }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        guard !closed, let target = buffer.baseAddress, !buffer.isEmpty else { return 0 }
        if descriptor < 0 {
            descriptor = path == "-" ? dup(STDIN_FILENO) : open(path, O_RDONLY | O_CLOEXEC)
            if descriptor < 0 { throw failure(errno) }
        }
        while true {
            let count = Glibc.read(descriptor, target, buffer.count)
            if count < 0 && errno == EINTR { continue }
            if count < 0 { throw failure(errno) }
            return count
        }
    }

    /// Every byte to the end, then closed: for an argument read whole
    /// (`@-`). A read that fails ends the bytes there, as the end would.
    func readToEnd() -> [UInt8] {
        defer { close() }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while let count = try? chunk.withUnsafeMutableBytes({ try read(into: $0) }), count > 0 {
            bytes += chunk[..<count]
        }
        return bytes
    }

    func close() {
        closed = true
        if descriptor >= 0 {
            _ = Glibc.close(descriptor)
            descriptor = -1
        }
    }

    private func failure(_ code: Int32) -> TransferError {
        let name = path == "-" ? "standard input" : path
        var error = TransferError(.fileError, "\(name): \(String(cString: strerror(code)))")
        error.systemErrno = code
        return error
    }
}

/// True the first time only: a body that can be read once.
final class OneShot: Sendable {
    private let used = Protected(false)

    func take() -> Bool {
        used.withLock { used in
            defer { used = true }
            return !used
        }
    }
}
