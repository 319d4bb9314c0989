import FoundationEssentials

import Glibc

/// A request body read on demand: the core's pull source for streamed
/// uploads (`Request.Body.stream`), multipart parts and
/// ``SessionHooks/taskNeedNewBodySource``.
///
/// One thread reads a source at a time, from its first byte: the session
/// reads it on a thread of its own (a source may block), so a slow source
/// never holds up the engine. TransferFoundation adapts Foundation's
/// `InputStream` to it (`BodyStreamProvider { stream }`), with the
/// `InputStream`-based names of earlier releases.
public protocol BodySource: AnyObject {
    /// Reads up to `buffer.count` bytes into `buffer`.
    ///
    /// - Returns: The count read; 0 only at the end of the body.
    /// - Throws: When the body cannot be read further (the upload fails with
    ///   the error's description; a ``TransferError`` is passed on as it is).
    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int

    /// Called once when reading stops: at the end, after an error, or when
    /// the body is abandoned (a rewind, a cancellation). Releases what the
    /// source holds.
    func close()
}

extension BodySource {
    /// Does nothing.
    public func close() {}
}

/// A body source over bytes in memory.
public final class DataBodySource: BodySource {
    private let data: Data
    private var offset = 0

    /// A source that reads `data` from its first byte.
    public init(_ data: Data) { self.data = data }

    public func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        let count = min(buffer.count, data.count - offset)
        guard count > 0, let target = buffer.baseAddress else { return 0 }
        data.withUnsafeBytes { source in
            target.copyMemory(from: source.baseAddress! + offset, byteCount: count)
        }
        offset += count
        return count
    }
}

/// A body source over a file, read with `read(2)` (opened on the first read).
public final class FileBodySource: BodySource {
    private let path: String
    private var descriptor: Int32 = -1
    private var closed = false

    /// A source that reads the file at `url` (a file URL) to its end.
    public init(fileURL url: URL) { self.path = url.path }

    deinit { close() }

    public func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        guard !closed, let target = buffer.baseAddress, !buffer.isEmpty else { return 0 }
        if descriptor < 0 {
            descriptor = open(path, O_RDONLY | O_CLOEXEC)
            if descriptor < 0 { throw Self.failure(errno, "cannot open \(path)") }
        }
        var count: Int
        repeat {
            count = Glibc.read(descriptor, target, buffer.count)
        } while count < 0 && errno == EINTR
        if count < 0 { throw Self.failure(errno, "cannot read \(path)") }
        return count
    }

    public func close() {
        closed = true
        if descriptor >= 0 {
            _ = Glibc.close(descriptor)
            descriptor = -1
        }
    }

    private static func failure(_ code: Int32, _ message: String) -> TransferError {
        var error = TransferError(.fileError, "\(message): \(String(cString: strerror(code)))")
        error.systemErrno = code
        return error
    }
}
