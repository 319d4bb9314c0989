import Foundation
import Transfer

/// An `InputStream` over standard input or a path that cannot seek (a pipe,
/// a FIFO, `/dev/stdin`): plain `read(2)` calls, in order, never a seek. The
/// library reads it on a thread of its own, so a slow writer blocks only that
/// thread.
final class DescriptorInputStream: InputStream {
    private let path: String
    private var descriptor: Int32 = -1
    private var status: Stream.Status = .notOpen
    private var failure: (any Error)?

    /// - Parameter path: a file path, or "-" for standard input.
    init(path: String) {
        self.path = path
        super.init(data: Data())
    }

    deinit { closeDescriptor() }

    override func open() {
        guard status == .notOpen else { return }
        descriptor = path == "-" ? dup(STDIN_FILENO) : posixOpen(path, O_RDONLY | O_CLOEXEC)
        if descriptor < 0 {
            fail(errno)
        } else {
            status = .open
        }
    }

    override func close() {
        closeDescriptor()
        if status != .error { status = .closed }
    }

    override var streamStatus: Stream.Status { status }
    override var streamError: (any Error)? { failure }
    override var hasBytesAvailable: Bool { status == .open }

    override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength: Int) -> Int {
        if status == .notOpen { open() }
        guard status == .open else { return status == .error ? -1 : 0 }
        while true {
            let count = posixRead(descriptor, buffer, maxLength)
            if count < 0 && errno == EINTR { continue }
            if count < 0 {
                fail(errno)
                return -1
            }
            if count == 0 { status = .atEnd }
            return count
        }
    }

    override func getBuffer(
        _ buffer: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>, length: UnsafeMutablePointer<Int>
    ) -> Bool { false }

    private func fail(_ code: Int32) {
        let name = path == "-" ? "standard input" : path
        failure = NSError(domain: NSPOSIXErrorDomain, code: Int(code), userInfo: [
            NSLocalizedDescriptionKey: "\(name): \(String(cString: strerror(code)))",
        ])
        status = .error
    }

    private func closeDescriptor() {
        if descriptor >= 0 {
            posixClose(descriptor)
            descriptor = -1
        }
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

// File-scope wrappers: inside the class, `open`, `read` and `close` name the
// InputStream methods.
private func posixOpen(_ path: String, _ flags: Int32) -> Int32 { open(path, flags) }

private func posixRead(_ descriptor: Int32, _ buffer: UnsafeMutablePointer<UInt8>, _ count: Int) -> Int {
    read(descriptor, buffer, count)
}

private func posixClose(_ descriptor: Int32) { _ = close(descriptor) }
