import Foundation
import Transfer

// Foundation's InputStream on the core's pull body source (issue 27, item 4):
// the core reads request bodies through `BodySource`; these adapters keep the
// InputStream-based names of earlier releases for those who import
// TransferFoundation.

extension BodyStreamProvider {
    /// A provider that calls `makeStream` for each fresh body; the stream is
    /// opened (if it is not yet) and read on the session's reader thread.
    public init(_ makeStream: @escaping @Sendable () -> InputStream?) {
        self.init(source: { makeStream().map { InputStreamSource($0) } })
    }

    /// Called each time the body must be sent from the start; returns a
    /// new, unopened stream (an `InputStream` over ``makeSource``).
    public var makeStream: @Sendable () -> InputStream? {
        let make = makeSource
        return { make().map(InputStreamSource.stream(over:)) }
    }
}

extension SessionHooks {
    /// A fresh body stream for a streamed upload that must be sent again
    /// (`taskNeedNewBodySource` with an `InputStream`).
    public var taskNeedNewBodyStream: (@Sendable (SessionManager, TransferTask) -> InputStream?)? {
        get {
            guard let hook = taskNeedNewBodySource else { return nil }
            return { session, task in hook(session, task).map(InputStreamSource.stream(over:)) }
        }
        set {
            guard let hook = newValue else {
                taskNeedNewBodySource = nil
                return
            }
            taskNeedNewBodySource = { session, task in hook(session, task).map { InputStreamSource($0) } }
        }
    }
}

extension MultipartFormData {
    /// Appends `length` bytes read from `inputStream` while the body is sent.
    ///
    /// - Note: An `InputStream` can be read once; if the body has to be sent
    ///   again (a redirect or an authentication retry), the second attempt
    ///   fails with `TransferError.Code.invalidRequest`. Use
    ///   `append(streamProvider:name:fileName:length:mimeType:)` to allow replay.
    public mutating func append(
        inputStream: InputStream, name: String, fileName: String, length: Int64,
        mimeType: String
    ) {
        append(bodySource: InputStreamSource(inputStream), name: name, fileName: fileName, length: length,
               mimeType: mimeType)
    }

    /// A new stream over the whole body, from the first byte.
    public func makeStream() -> MultipartBodyStream {
        MultipartBodyStream(makeSource())
    }
}

/// A caller's `InputStream` as a body source: opened on the first read.
final class InputStreamSource: BodySource {
    let stream: InputStream

    init(_ stream: InputStream) { self.stream = stream }

    /// `source` as an InputStream: the caller's own stream, or a stream over the source.
    static func stream(over source: any BodySource) -> InputStream {
        if let adapted = source as? InputStreamSource { return adapted.stream }
        if let multipart = source as? MultipartBodySource { return MultipartBodyStream(multipart) }
        return SourceInputStream(source)
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        guard let base = buffer.baseAddress, !buffer.isEmpty else { return 0 }
        if stream.streamStatus == .notOpen { stream.open() }
        let count = stream.read(base.assumingMemoryBound(to: UInt8.self), maxLength: buffer.count)
        if count < 0 {
            throw stream.streamError ?? TransferError(.invalidRequest, "an input stream part failed")
        }
        return count
    }

    func close() { stream.close() }
}

/// The encoded body of a `MultipartFormData` as an `InputStream` (over the
/// core's `MultipartBodySource`): boundaries and headers from memory, file
/// parts with `read(2)` straight into the caller's buffer, stream parts from
/// their stream. Memory use does not grow with the body.
///
/// A stream is read by one thread at a time (like any `InputStream`). A part
/// whose file or stream ends before its announced length fails the stream
/// (`streamStatus == .error`, `read` returns -1) rather than sending a body
/// shorter than Content-Length.
public final class MultipartBodyStream: InputStream {
    private var reader: SourceReader

    /// The exact length of the body.
    public let contentLength: Int64

    /// The throttle from the form; cleared to write the body at full speed.
    package var throttle: MultipartFormData.Throttle? {
        get { source.throttle }
        set { source.throttle = newValue }
    }

    private let source: MultipartBodySource

    init(_ source: MultipartBodySource) {
        self.source = source
        self.reader = SourceReader(source, hasBytes: { !source.isAtEnd })
        self.contentLength = source.contentLength
        super.init(data: Data())
    }

    public override func open() { reader.open() }
    public override func close() { reader.close() }
    public override var streamStatus: Stream.Status { reader.status }
    public override var streamError: (any Error)? { reader.error }
    public override var hasBytesAvailable: Bool { reader.hasBytesAvailable }

    public override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength: Int) -> Int {
        reader.read(buffer, maxLength: maxLength)
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
}

/// Any other body source as an `InputStream`.
private final class SourceInputStream: InputStream {
    private var reader: SourceReader

    init(_ source: any BodySource) {
        self.reader = SourceReader(source, hasBytes: nil)
        super.init(data: Data())
    }

    override func open() { reader.open() }
    override func close() { reader.close() }
    override var streamStatus: Stream.Status { reader.status }
    override var streamError: (any Error)? { reader.error }
    override var hasBytesAvailable: Bool { reader.hasBytesAvailable }

    override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength: Int) -> Int {
        reader.read(buffer, maxLength: maxLength)
    }

    override func getBuffer(
        _ buffer: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>, length: UnsafeMutablePointer<Int>
    ) -> Bool {
        false
    }

    override func property(forKey key: Stream.PropertyKey) -> AnyObject? { nil }
    override func setProperty(_ property: AnyObject?, forKey key: Stream.PropertyKey) -> Bool { false }
    override func schedule(in aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {}
    override func remove(from aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {}
}

/// The `InputStream` states over a body source: lenient about a missing
/// open(), -1 and `.error` after a failure, 0 once at the end or closed.
private struct SourceReader {
    let source: any BodySource
    /// Whether bytes are left (nil: unknown until a read returns 0).
    let hasBytes: (() -> Bool)?
    var status: Stream.Status = .notOpen
    var error: (any Error)?

    init(_ source: any BodySource, hasBytes: (() -> Bool)?) {
        self.source = source
        self.hasBytes = hasBytes
    }

    var hasBytesAvailable: Bool { status == .open && (hasBytes?() ?? true) }

    mutating func open() {
        guard status == .notOpen else { return }
        status = (hasBytes?() ?? true) ? .open : .atEnd
    }

    mutating func close() {
        source.close()
        if status != .error { status = .closed }
    }

    mutating func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength: Int) -> Int {
        switch status {
        case .open: break
        case .notOpen:
            // Lenient: a reader that forgot open() still gets the body.
            open()
            if status != .open { return 0 }
        case .atEnd, .closed: return 0
        default: return -1
        }
        do {
            let count = try source.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: maxLength))
            if count == 0 || hasBytes?() == false { status = .atEnd }
            return count
        } catch {
            self.error = error
            status = .error
            return -1
        }
    }
}
