import FoundationEssentials
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The parts of a `multipart/form-data` body (AFNetworking's `AFMultipartFormData`),
/// built in the closure of ``HTTPRequestSerializer/multipartFormRequest(method:urlString:parameters:headers:constructingBody:)``.
///
/// Nothing is read when a part is appended: files and streams are read while
/// the body is sent, through a ``MultipartBodySource``, so a multi-GiB file
/// costs constant memory. The body's length is known exactly up front
/// (Content-Length) because every part has a known length.
///
/// ```swift
/// let request = try serializer.multipartFormRequest(method: .post, urlString: url, parameters: ["album": 7]) { form in
///     try form.append(fileURL: photoURL, name: "photo")
///     form.append(Data("hello".utf8), name: "note", fileName: "note.txt", mimeType: "text/plain")
/// }
/// ```
public struct MultipartFormData: Sendable {
    /// AFNetworking's suggested throttle for slow links: 16 KiB packets, 0.2 s apart.
    public static let suggestedPacketSize = 16 * 1024
    /// AFNetworking's suggested delay between packets, in seconds.
    public static let suggestedDelay: TimeInterval = 0.2

    /// Limits the rate of the body stream: each `read` returns at most
    /// `packetSize` bytes and then waits `delay` seconds.
    public struct Throttle: Sendable, Hashable {
        /// The most bytes one `read` returns.
        public var packetSize: Int
        /// Seconds to wait after each packet.
        public var delay: TimeInterval

        /// A throttle; values are clamped to at least 1 byte and 0 seconds.
        public init(
            packetSize: Int = MultipartFormData.suggestedPacketSize,
            delay: TimeInterval = MultipartFormData.suggestedDelay
        ) {
            self.packetSize = max(1, packetSize)
            self.delay = max(0, delay)
        }
    }

    /// One part: its headers and where its body comes from.
    public struct Part: Sendable {
        /// The part's headers (`Content-Disposition`, `Content-Type`).
        public var headers: HTTPHeaders
        /// The part's body length in bytes.
        public var length: Int64
        var source: Source
    }

    enum Source: Sendable {
        case data(Data)
        case file(URL)
        case stream(OneShotSource)
        case provider(BodyStreamProvider)
    }

    /// The boundary between parts (no quotes needed: letters, digits, `+`).
    public let boundary: String
    /// The parts, in the order they were appended.
    public private(set) var parts: [Part] = []
    /// When set, the body stream is rate-limited (see ``Throttle``).
    public var throttle: Throttle?

    /// - Parameter boundary: Defaults to a random `Boundary+XXXXXXXXXXXXXXXX`.
    public init(boundary: String = MultipartFormData.randomBoundary()) {
        self.boundary = boundary
    }

    /// A fresh random boundary, `Boundary+` and 16 upper-case hex digits.
    public static func randomBoundary() -> String {
        var generator = SystemRandomNumberGenerator()
        let high = UInt32.random(in: .min ... .max, using: &generator)
        let low = UInt32.random(in: .min ... .max, using: &generator)
        return "Boundary+" + hex8(high) + hex8(low)
    }

    private static func hex8(_ value: UInt32) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: 8 - digits.count) + digits
    }

    /// `multipart/form-data; boundary=…`
    public var contentType: String { "multipart/form-data; boundary=\(boundary)" }

    /// Whether no part was appended.
    public var isEmpty: Bool { parts.isEmpty }

    // MARK: Appending

    /// Appends the file at `fileURL`, named by its last path component, with
    /// the MIME type of its extension (see ``MIMEType``).
    ///
    /// - Throws: ``TransferError/Code/invalidRequest`` when `fileURL` is not a
    ///   file URL, and ``TransferError/Code/fileError`` when the file does not
    ///   exist, is not a regular file, or cannot be read.
    public mutating func append(fileURL: URL, name: String) throws(TransferError) {
        try append(
            fileURL: fileURL, name: name, fileName: fileURL.lastPathComponent,
            mimeType: MIMEType.forFile(fileURL))
    }

    /// Appends the file at `fileURL` with an explicit file name and MIME type.
    ///
    /// - Throws: as ``append(fileURL:name:)``.
    public mutating func append(fileURL: URL, name: String, fileName: String, mimeType: String) throws(TransferError) {
        guard fileURL.isFileURL else {
            throw TransferError(.invalidRequest, "expected a file URL, got \(fileURL.absoluteString)", url: fileURL)
        }
        let length = try Self.readableFileSize(fileURL)
        parts.append(
            Part(
                headers: Self.fileHeaders(name: name, fileName: fileName, mimeType: mimeType),
                length: length, source: .file(fileURL)))
    }

    /// Appends `length` bytes read from `source` while the body is sent
    /// (TransferFoundation's `append(inputStream:…)` with an `InputStream`).
    ///
    /// - Note: A source is read once; if the body has to be sent
    ///   again (a redirect or an authentication retry), the second attempt
    ///   fails with ``TransferError/Code/invalidRequest``. Use
    ///   ``append(streamProvider:name:fileName:length:mimeType:)`` to allow replay.
    public mutating func append(
        bodySource source: any BodySource, name: String, fileName: String, length: Int64,
        mimeType: String
    ) {
        parts.append(
            Part(
                headers: Self.fileHeaders(name: name, fileName: fileName, mimeType: mimeType),
                length: max(0, length), source: .stream(OneShotSource(source))))
    }

    /// Appends `length` bytes from a stream made by `streamProvider`, asked
    /// again each time the body is sent from the start.
    public mutating func append(
        streamProvider: BodyStreamProvider, name: String, fileName: String, length: Int64,
        mimeType: String
    ) {
        parts.append(
            Part(
                headers: Self.fileHeaders(name: name, fileName: fileName, mimeType: mimeType),
                length: max(0, length), source: .provider(streamProvider)))
    }

    /// Appends `data` as a file part.
    public mutating func append(_ data: Data, name: String, fileName: String, mimeType: String) {
        parts.append(
            Part(
                headers: Self.fileHeaders(name: name, fileName: fileName, mimeType: mimeType),
                length: Int64(data.count), source: .data(data)))
    }

    /// Appends a form field: `Content-Disposition: form-data; name="…"` and `data`.
    public mutating func append(formData data: Data, name: String) {
        var headers = HTTPHeaders()
        headers["Content-Disposition"] = "form-data; name=\"\(Self.quoted(name))\""
        parts.append(Part(headers: headers, length: Int64(data.count), source: .data(data)))
    }

    /// Appends a form field whose value is `value` in UTF-8.
    public mutating func append(formField value: String, name: String) {
        append(formData: Data(value.utf8), name: name)
    }

    /// Appends a part with exactly `headers` and `body`. Header names and
    /// values are validated when the request is finalized.
    public mutating func append(_ body: Data, headers: HTTPHeaders) {
        parts.append(Part(headers: headers, length: Int64(body.count), source: .data(body)))
    }

    /// Rate-limits the body (AFNetworking's `throttleBandwidthWithPacketSize:delay:`).
    public mutating func throttleBandwidth(
        packetSize: Int = MultipartFormData.suggestedPacketSize,
        delay: TimeInterval = MultipartFormData.suggestedDelay
    ) {
        throttle = Throttle(packetSize: packetSize, delay: delay)
    }

    // MARK: Layout

    /// The exact number of bytes of the encoded body.
    public var contentLength: Int64 {
        var total: Int64 = 0
        for (index, part) in parts.enumerated() {
            total += Int64(partPrefix(part, isFirst: index == 0).count) + part.length
        }
        return total + Int64(closingBoundary.count)
    }

    /// The boundary line and headers written before a part's body.
    func partPrefix(_ part: Part, isFirst: Bool) -> Data {
        var text = isFirst ? "--\(boundary)\r\n" : "\r\n--\(boundary)\r\n"
        for field in part.headers { text += "\(field.name): \(field.value)\r\n" }
        text += "\r\n"
        return Data(text.utf8)
    }

    var closingBoundary: Data { Data("\r\n--\(boundary)--\r\n".utf8) }

    /// A new source over the whole body, from the first byte
    /// (TransferFoundation's `makeStream()` gives an `InputStream`).
    public func makeSource() -> MultipartBodySource {
        MultipartBodySource(form: self)
    }

    /// Sets Content-Type, Content-Length and a streamed body on `request`
    /// (AFNetworking's `requestByFinalizingMultipartFormData`). With no parts,
    /// `request` is returned unchanged.
    ///
    /// - Throws: ``TransferError/Code/invalidRequest`` when a part header or
    ///   the boundary is invalid.
    public func request(byFinalizing request: Request) throws(TransferError) -> Request {
        guard !parts.isEmpty else { return request }
        guard !boundary.isEmpty, boundary.utf8.count <= 70,
            boundary.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") })
        else {
            throw TransferError(
                .invalidRequest, "invalid multipart boundary \(boundary.debugDescription)",
                url: request.url)
        }
        for part in parts { try part.headers.validate() }
        var result = request
        result.headers["Content-Type"] = contentType
        let length = contentLength
        result.headers["Content-Length"] = String(length)
        let form = self
        result.body = .stream(BodyStreamProvider(source: { form.makeSource() }), length: length)
        return result
    }

    // MARK: Helpers

    private static func fileHeaders(name: String, fileName: String, mimeType: String) -> HTTPHeaders {
        var headers = HTTPHeaders()
        headers["Content-Disposition"] = "form-data; name=\"\(quoted(name))\"; filename=\"\(quoted(fileName))\""
        headers["Content-Type"] = mimeType
        return headers
    }

    /// Escapes a name for a quoted Content-Disposition parameter as browsers
    /// do (WHATWG HTML): `"` → `%22`, CR → `%0D`, LF → `%0A`, so a name can
    /// neither end the quoted string nor inject a header.
    static func quoted(_ name: String) -> String {
        var result = ""
        result.reserveCapacity(name.utf8.count)
        for scalar in name.unicodeScalars {
            switch scalar {
            case "\"": result += "%22"
            case "\r": result += "%0D"
            case "\n": result += "%0A"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    private static func readableFileSize(_ url: URL) throws(TransferError) -> Int64 {
        var info = stat()
        let path = url.path
        guard stat(path, &info) == 0 else {
            let code = errno
            var error = TransferError(
                .fileError, "file \(path) is not reachable: \(String(cString: strerror(code)))",
                url: url)
            error.systemErrno = code
            throw error
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw TransferError(.fileError, "\(path) is not a regular file", url: url)
        }
        guard access(path, R_OK) == 0 else {
            let code = errno
            var error = TransferError(
                .fileError, "file \(path) is not readable: \(String(cString: strerror(code)))",
                url: url)
            error.systemErrno = code
            throw error
        }
        return Int64(info.st_size)
    }
}

/// Hands a caller's body source to the first body that asks.
final class OneShotSource: @unchecked Sendable {
    // @unchecked: `source` is handed out by `take()` at most once, decided
    // under the `claimed` lock, so no two threads ever use it.
    private let claimed = Protected(false)
    private let stream: any BodySource

    init(_ stream: any BodySource) { self.stream = stream }

    func take() -> (any BodySource)? {
        let first = claimed.withLock { claimed in
            defer { claimed = true }
            return !claimed
        }
        return first ? stream : nil
    }
}
