import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The encoded body of a ``MultipartFormData``, read part by part: boundaries
/// and headers from memory, file parts with `read(2)` straight into the
/// caller's buffer, stream parts from their stream. Memory use does not grow
/// with the body.
///
/// A stream is read by one thread at a time (like any `InputStream`). A part
/// whose file or stream ends before its announced length fails the stream
/// (`streamStatus == .error`, `read` returns -1) rather than sending a body
/// shorter than Content-Length.
public final class MultipartBodyStream: InputStream {
    private enum Segment {
        case bytes(Data)
        case file(URL, length: Int64)
        case stream(() -> InputStream?, length: Int64)
    }

    private let segments: [Segment]
    /// The throttle from the form; cleared to write the body at full speed.
    var throttle: MultipartFormData.Throttle?
    /// The exact length of the body.
    public let contentLength: Int64

    private var status: Stream.Status = .notOpen
    private var error: (any Error)?
    private var index = 0
    /// Bytes of the current segment already read.
    private var offset: Int64 = 0
    private var descriptor: Int32 = -1
    private var partStream: InputStream?

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
                segments.append(.stream({ provider.makeStream() }, length: part.length))
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
        super.init(data: Data())
    }

    deinit { closeCurrentSource() }

    // MARK: InputStream

    public override func open() {
        guard status == .notOpen else { return }
        status = index < segments.count ? .open : .atEnd
    }

    public override func close() {
        closeCurrentSource()
        if status != .error { status = .closed }
    }

    public override var streamStatus: Stream.Status { status }
    public override var streamError: (any Error)? { error }

    public override var hasBytesAvailable: Bool {
        status == .open && index < segments.count
    }

    public override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength: Int) -> Int {
        switch status {
        case .open: break
        case .notOpen:
            // Lenient: a reader that forgot open() still gets the body.
            open()
            if status != .open { return 0 }
        case .atEnd, .closed: return 0
        default: return -1
        }
        var limit = maxLength
        if let throttle { limit = min(limit, throttle.packetSize) }
        var total = 0
        while total < limit && index < segments.count {
            let count = readSegment(into: buffer + total, maxLength: limit - total)
            if count < 0 {
                status = .error
                closeCurrentSource()
                return -1
            }
            total += count
        }
        if index == segments.count { status = .atEnd }
        if let throttle, throttle.delay > 0, total > 0 {
            usleep(useconds_t(max(0, min(throttle.delay, 3600)) * 1_000_000))
        }
        return total
    }

    public override func getBuffer(
        _ buffer: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>, length: UnsafeMutablePointer<Int>
    ) -> Bool {
        false
    }

    public override func property(forKey key: Stream.PropertyKey) -> AnyObject? { nil }
    public override func setProperty(_ property: AnyObject?, forKey key: Stream.PropertyKey) -> Bool { false }
    public override func schedule(in aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {}
    public override func remove(from aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {}

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
            if partStream == nil {
                guard let stream = makeStream() else {
                    return fail(errno: 0, "an input stream part cannot be read twice; use a stream provider")
                }
                if stream.streamStatus == .notOpen { stream.open() }
                partStream = stream
            }
            guard let stream = partStream else { return -1 }
            let wanted = Int(min(Int64(maxLength), length - offset))
            let count = stream.read(buffer, maxLength: wanted)
            if count < 0 {
                error = stream.streamError ?? TransferError(.invalidRequest, "an input stream part failed")
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
        if let stream = partStream {
            stream.close()
            partStream = nil
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
