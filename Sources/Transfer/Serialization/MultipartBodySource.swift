import FoundationEssentials
import Glibc

/// The encoded body of a ``MultipartFormData``, read part by part: boundaries
/// and headers from memory, file parts with `read(2)` straight into the
/// caller's buffer, stream parts from their source. Memory use does not grow
/// with the body.
///
/// A source is read by one thread at a time. A part whose file or source ends
/// before its announced length fails the body (`read(into:)` throws, and
/// every later read too) rather than sending a body shorter than
/// Content-Length. TransferFoundation's `MultipartBodyStream` is an
/// `InputStream` over it.
public final class MultipartBodySource: BodySource {
    private enum Segment {
        case bytes(Data)
        case file(URL, length: Int64)
        case stream(() -> (any BodySource)?, length: Int64)
    }

    private let segments: [Segment]
    /// The throttle from the form; cleared to write the body at full speed.
    package var throttle: MultipartFormData.Throttle?
    /// The exact length of the body.
    public let contentLength: Int64

    /// The error that ended the body, thrown again by every later read.
    package private(set) var error: (any Error)?
    private var closed = false
    private var index = 0
    /// Bytes of the current segment already read.
    private var offset: Int64 = 0
    private var descriptor: Int32 = -1
    private var partSource: (any BodySource)?

    init(form: MultipartFormData) {
        var segments: [Segment] = []
        var pending = Data()
        for (number, part) in form.parts.enumerated() {
            pending += form.partPrefix(part, isFirst: number == 0)
            switch part.source {
            case .data(let data) where data.count <= 64 * 1024:
                pending += data
            case .data(let data):
                // Large data is shared with the form, not copied.
                segments.append(.bytes(pending))
                pending = Data()
                segments.append(.bytes(data))
            case .file(let url):
                segments.append(.bytes(pending))
                pending = Data()
                segments.append(.file(url, length: part.length))
            case .stream(let box):
                segments.append(.bytes(pending))
                pending = Data()
                segments.append(.stream({ box.take() }, length: part.length))
            case .provider(let provider):
                segments.append(.bytes(pending))
                pending = Data()
                segments.append(.stream({ provider.makeSource() }, length: part.length))
            }
        }
        if !form.parts.isEmpty { pending += form.closingBoundary }
        if !pending.isEmpty { segments.append(.bytes(pending)) }
        self.segments = segments.filter {
            if case .bytes(let bytes) = $0 { return !bytes.isEmpty }
            return true
        }
        throttle = form.throttle
        contentLength = form.contentLength
    }

    deinit { closeCurrentSource() }

    // MARK: BodySource

    /// Whether every byte was read.
    package var isAtEnd: Bool { index == segments.count }

    public func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        if let error { throw error }
        guard !closed, let base = buffer.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return 0 }
        var limit = buffer.count
        if let throttle { limit = min(limit, throttle.packetSize) }
        var total = 0
        while total < limit && index < segments.count {
            let count = readSegment(into: base + total, maxLength: limit - total)
            if count < 0 {
                closeCurrentSource()
                throw error ?? TransferError(.invalidRequest, "a multipart part failed")
            }
            total += count
        }
        if let throttle, throttle.delay > 0, total > 0 {
            usleep(useconds_t(max(0, min(throttle.delay, 3600)) * 1_000_000))
        }
        return total
    }

    public func close() {
        closeCurrentSource()
        closed = true
    }

    // MARK: Segments

    /// Reads from the current segment, advancing past it when it is done.
    /// Returns the bytes read (0 only when the segment ended), or -1 with `error` set.
    private func readSegment(into buffer: UnsafeMutablePointer<UInt8>, maxLength: Int) -> Int {
        switch segments[index] {
        case .bytes(let bytes):
            let count = min(maxLength, bytes.count - Int(offset))
            bytes.withUnsafeBytes { (source: UnsafeRawBufferPointer) in
                guard let base = source.baseAddress else { return }
                UnsafeMutableRawPointer(buffer).copyMemory(from: base + Int(offset), byteCount: count)
            }
            advance(by: count, length: Int64(bytes.count))
            return count

        case .file(let url, let length):
            if length == 0 {
                advance(by: 0, length: 0)
                return 0
            }
            if descriptor < 0 {
                descriptor = posixOpen(url.path, O_RDONLY | O_CLOEXEC)
                if descriptor < 0 { return fail(errno: errno, "cannot open \(url.path)") }
            }
            let wanted = Int(min(Int64(maxLength), length - offset))
            var count: Int
            repeat {
                count = posixRead(descriptor, buffer, wanted)
            } while count < 0 && errno == EINTR
            if count < 0 { return fail(errno: errno, "cannot read \(url.path)") }
            if count == 0 {
                return fail(
                    errno: 0, "\(url.path) ended after \(offset) of the \(length) bytes announced in Content-Length")
            }
            advance(by: count, length: length)
            return count

        case .stream(let makeStream, let length):
            if length == 0 {
                advance(by: 0, length: 0)
                return 0
            }
            if partSource == nil {
                guard let source = makeStream() else {
                    return fail(errno: 0, "an input stream part cannot be read twice; use a stream provider")
                }
                partSource = source
            }
            guard let source = partSource else { return -1 }
            let wanted = Int(min(Int64(maxLength), length - offset))
            let count: Int
            do {
                count = try source.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: wanted))
            } catch {
                self.error = error
                return -1
            }
            if count == 0 {
                return fail(errno: 0, "an input stream part ended after \(offset) of its \(length) bytes")
            }
            advance(by: count, length: length)
            return count
        }
    }

    private func advance(by count: Int, length: Int64) {
        offset += Int64(count)
        if offset >= length {
            closeCurrentSource()
            index += 1
            offset = 0
        }
    }

    private func fail(errno code: Int32, _ message: String) -> Int {
        var failure = TransferError(
            code == 0 ? .invalidRequest : .fileError,
            code == 0 ? message : "\(message): \(String(cString: strerror(code)))")
        if code != 0 { failure.systemErrno = code }
        error = failure
        return -1
    }

    private func closeCurrentSource() {
        if descriptor >= 0 {
            posixClose(descriptor)
            descriptor = -1
        }
        if let source = partSource {
            source.close()
            partSource = nil
        }
    }
}

// File-scope wrappers: inside the class, `read` and `close` name the
// BodySource methods.
private func posixOpen(_ path: String, _ flags: Int32) -> Int32 { open(path, flags) }

private func posixRead(_ descriptor: Int32, _ buffer: UnsafeMutablePointer<UInt8>, _ count: Int) -> Int {
    read(descriptor, buffer, count)
}

private func posixClose(_ descriptor: Int32) { _ = close(descriptor) }
