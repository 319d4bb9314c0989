import Foundation
import Testing
import TestSupport
import TransferFoundation

@testable import Transfer

/// A scratch directory for one test, removed when the value is released.
final class SerializationScratch {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent(
            "transfer-serialization-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func file(_ name: String, contents: Data? = nil) throws -> URL {
        let file = url.appendingPathComponent(name)
        if let contents { try contents.write(to: file) }
        return file
    }

    deinit { try? FileManager.default.removeItem(at: url) }
}

/// One part of a parsed multipart body.
struct ParsedPart: Equatable {
    var headers: [String]
    var body: Data
}

enum MultipartTestSupport {
    /// Reads `stream` to its end in `chunk`-byte reads; throws on a stream error.
    static func readAll(_ stream: InputStream, chunk: Int = 64 * 1024) throws -> Data {
        stream.open()
        defer { stream.close() }
        var result = Data()
        var buffer = [UInt8](repeating: 0, count: chunk)
        while true {
            let count = buffer.withUnsafeMutableBufferPointer { stream.read($0.baseAddress!, maxLength: chunk) }
            if count < 0 { throw stream.streamError ?? TransferError(.internalError, "stream failed") }
            if count == 0 { break }
            result.append(contentsOf: buffer[0..<count])
        }
        return result
    }

    static func body(of request: Request, chunk: Int = 64 * 1024) throws -> Data {
        guard case .stream(let provider, _)? = request.body, let stream = provider.makeStream() else {
            throw TransferError(.internalError, "no streamed body")
        }
        return try readAll(stream, chunk: chunk)
    }

    static func boundary(of request: Request) throws -> String {
        let contentType = try #require(request.headers["Content-Type"])
        let prefix = "multipart/form-data; boundary="
        try #require(contentType.hasPrefix(prefix))
        return String(contentType.dropFirst(prefix.count))
    }

    /// Parses a multipart body strictly: first line, delimiters, header block,
    /// closing delimiter at the very end.
    static func parse(_ body: Data, boundary: String) throws -> [ParsedPart] {
        struct Malformed: Error { let reason: String }
        let first = Data("--\(boundary)\r\n".utf8)
        let delimiter = Data("\r\n--\(boundary)".utf8)
        let headerEnd = Data("\r\n\r\n".utf8)
        guard body.starts(with: first) else { throw Malformed(reason: "no opening boundary") }
        var parts: [ParsedPart] = []
        var position = body.startIndex + first.count
        while true {
            guard let headersRange = body.range(of: headerEnd, in: position..<body.endIndex) else {
                throw Malformed(reason: "no end of headers")
            }
            let headerText = String(decoding: body[position..<headersRange.lowerBound], as: UTF8.self)
            let headers = headerText.isEmpty ? [] : headerText.components(separatedBy: "\r\n")
            guard let next = body.range(of: delimiter, in: headersRange.upperBound..<body.endIndex) else {
                throw Malformed(reason: "no delimiter after a part")
            }
            parts.append(ParsedPart(headers: headers, body: Data(body[headersRange.upperBound..<next.lowerBound])))
            let rest = body[next.upperBound...]
            if rest.starts(with: Data("--\r\n".utf8)) {
                guard rest.count == 4 else { throw Malformed(reason: "bytes after the closing boundary") }
                return parts
            }
            guard rest.starts(with: Data("\r\n".utf8)) else { throw Malformed(reason: "bad delimiter line") }
            position = next.upperBound + 2
        }
    }
}

@Suite("Multipart form data")
struct SerializationMultipartTests {
    @Test("the body has AFNetworking's byte layout and its exact length")
    func exactLayout() throws {
        let scratch = try SerializationScratch()
        let image = try scratch.file("photo.PNG", contents: Data("PNGDATA".utf8))
        var form = MultipartFormData(boundary: "Boundary+0123456789ABCDEF")
        form.append(formField: "v", name: "field")
        form.append(Data("abc".utf8), name: "file", fileName: "a.txt", mimeType: "text/plain")
        form.append(Data("raw".utf8), headers: ["X-Part": "1", "Content-Type": "application/x-raw"])
        try form.append(fileURL: image, name: "img")
        form.append(
            inputStream: InputStream(data: Data("streamed".utf8)), name: "s", fileName: "s.bin", length: 8,
            mimeType: "application/octet-stream")

        let body = try MultipartTestSupport.readAll(form.makeStream(), chunk: 5)

        let expected = """
            --Boundary+0123456789ABCDEF\r
            Content-Disposition: form-data; name="field"\r
            \r
            v\r
            --Boundary+0123456789ABCDEF\r
            Content-Disposition: form-data; name="file"; filename="a.txt"\r
            Content-Type: text/plain\r
            \r
            abc\r
            --Boundary+0123456789ABCDEF\r
            X-Part: 1\r
            Content-Type: application/x-raw\r
            \r
            raw\r
            --Boundary+0123456789ABCDEF\r
            Content-Disposition: form-data; name="img"; filename="photo.PNG"\r
            Content-Type: image/png\r
            \r
            PNGDATA\r
            --Boundary+0123456789ABCDEF\r
            Content-Disposition: form-data; name="s"; filename="s.bin"\r
            Content-Type: application/octet-stream\r
            \r
            streamed\r
            --Boundary+0123456789ABCDEF--\r

            """
        #expect(String(decoding: body, as: UTF8.self) == expected)
        #expect(Int64(body.count) == form.contentLength)
    }

    @Test("a multipart request carries parameters as fields, then the parts, with exact Content-Length")
    func multipartRequest() throws {
        let scratch = try SerializationScratch()
        let fileBytes = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let file = try scratch.file("blob.bin", contents: fileBytes)
        let serializer = HTTPRequestSerializer()
        serializer.setValue("yes", forHTTPHeaderField: "X-Default")

        let request = try serializer.multipartFormRequest(
            method: .post, urlString: "http://h/upload", parameters: ["title": "Été", "meta": ["k": nil, "n": 2]],
            headers: ["X-Call": "1"]
        ) { form in
            try form.append(fileURL: file, name: "blob")
            form.append(Data(count: 70_000), name: "zeros", fileName: "z", mimeType: "application/zip")
        }

        let boundary = try MultipartTestSupport.boundary(of: request)
        let body = try MultipartTestSupport.body(of: request)
        let parts = try MultipartTestSupport.parse(body, boundary: boundary)
        #expect(request.headers["Content-Length"] == String(body.count))
        guard case .stream(_, let length)? = request.body else {
            Issue.record("expected a streamed body")
            return
        }
        #expect(length == Int64(body.count))
        #expect(request.headers["X-Default"] == "yes")
        #expect(request.headers["X-Call"] == "1")
        #expect(
            parts.map(\.headers) == [
                [#"Content-Disposition: form-data; name="meta[k]""#],
                [#"Content-Disposition: form-data; name="meta[n]""#],
                [#"Content-Disposition: form-data; name="title""#],
                [
                    #"Content-Disposition: form-data; name="blob"; filename="blob.bin""#,
                    "Content-Type: application/octet-stream",
                ],
                [#"Content-Disposition: form-data; name="zeros"; filename="z""#, "Content-Type: application/zip"],
            ])
        #expect(parts.map(\.body) == [Data(), Data("2".utf8), Data("Été".utf8), fileBytes, Data(count: 70_000)])
        for chunk in [1, 7, 4096, 1 << 20] {
            #expect(try MultipartTestSupport.body(of: request, chunk: chunk) == body)
        }
    }

    @Test("GET and HEAD multipart requests are refused")
    func getAndHeadRefused() {
        for method in [HTTPMethod.get, .head] {
            let error = #expect(throws: TransferError.self) {
                try HTTPRequestSerializer().multipartFormRequest(method: method, urlString: "http://h/") { form in
                    form.append(formField: "v", name: "f")
                }
            }
            #expect(error?.code == .invalidRequest)
            #expect(error?.message.contains(method.rawValue) == true)
        }
    }

    @Test("appending a file that is not a readable regular file fails clearly")
    func badFiles() throws {
        let scratch = try SerializationScratch()
        var form = MultipartFormData()

        let remote = #expect(throws: TransferError.self) {
            try form.append(fileURL: URL(string: "http://h/file.png")!, name: "f")
        }
        let missing = #expect(throws: TransferError.self) {
            try form.append(fileURL: scratch.url.appendingPathComponent("missing.txt"), name: "f")
        }
        let directory = #expect(throws: TransferError.self) { try form.append(fileURL: scratch.url, name: "f") }

        #expect(remote?.code == .invalidRequest)
        #expect(missing?.code == .fileError)
        #expect(missing?.systemErrno == ENOENT)
        #expect(directory?.code == .fileError)
        #expect(form.isEmpty)
    }

    @Test("quotes, CR and LF in names cannot break out of the Content-Disposition header")
    func quotedNames() throws {
        var form = MultipartFormData(boundary: "B")
        form.append(Data("x".utf8), name: "a\"b", fileName: "evil\r\nX-Injected: 1.txt", mimeType: "text/plain")

        let parts = try MultipartTestSupport.parse(MultipartTestSupport.readAll(form.makeStream()), boundary: "B")

        #expect(
            parts.first?.headers == [
                #"Content-Disposition: form-data; name="a%22b"; filename="evil%0D%0AX-Injected: 1.txt""#,
                "Content-Type: text/plain",
            ])
    }

    @Test("an invalid custom part header is refused when the request is finalized")
    func invalidPartHeader() throws {
        let error = #expect(throws: TransferError.self) {
            try HTTPRequestSerializer().multipartFormRequest(urlString: "http://h/") { form in
                form.append(Data(), headers: ["X-Part": "a\r\nb"])
            }
        }
        #expect(error?.code == .invalidRequest)
    }

    @Test("a file that shrinks after it was appended fails the stream instead of sending a short body")
    func shrunkenFile() throws {
        let scratch = try SerializationScratch()
        let file = try scratch.file("data.txt", contents: Data(count: 1000))
        var form = MultipartFormData()
        try form.append(fileURL: file, name: "f")
        try Data(count: 10).write(to: file)

        let stream = form.makeStream()
        let error = #expect(throws: TransferError.self) { try MultipartTestSupport.readAll(stream) }

        #expect(stream.streamStatus == .error)
        #expect(error?.message.contains("ended after 10 of the 1000 bytes") == true)
    }

    @Test("an input stream part is read once; a stream provider part can be replayed")
    func streamReplay() throws {
        var once = MultipartFormData(boundary: "B")
        once.append(
            inputStream: InputStream(data: Data("abc".utf8)), name: "s", fileName: "s", length: 3,
            mimeType: "text/plain")
        var replayable = MultipartFormData(boundary: "B")
        replayable.append(
            streamProvider: BodyStreamProvider { InputStream(data: Data("abc".utf8)) }, name: "s",
            fileName: "s", length: 3, mimeType: "text/plain")

        let first = try MultipartTestSupport.readAll(once.makeStream())
        #expect(throws: TransferError.self) { try MultipartTestSupport.readAll(once.makeStream()) }
        let replayed = try MultipartTestSupport.readAll(replayable.makeStream())
        #expect(try MultipartTestSupport.readAll(replayable.makeStream()) == replayed)
        #expect(first == replayed)
    }

    @Test("a stream part shorter than its announced length fails the stream")
    func shortStreamPart() throws {
        var form = MultipartFormData()
        form.append(
            inputStream: InputStream(data: Data("ab".utf8)), name: "s", fileName: "s", length: 5,
            mimeType: "text/plain")
        #expect(throws: TransferError.self) { try MultipartTestSupport.readAll(form.makeStream()) }
    }

    @Test("a form without parts leaves the request as the HTTP serializer built it")
    func emptyForm() throws {
        let request = try HTTPRequestSerializer().multipartFormRequest(urlString: "http://h/")
        #expect(request.body == .data(Data()))
        #expect(request.headers["Content-Type"] == "application/x-www-form-urlencoded")
    }

    @Test("boundaries are random and AFNetworking-shaped")
    func randomBoundary() {
        let boundaries = (0..<50).map { _ in MultipartFormData().boundary }
        #expect(Set(boundaries).count == 50)
        for boundary in boundaries {
            #expect(boundary.wholeMatch(of: /Boundary\+[0-9A-F]{16}/) != nil)
        }
    }

    @Test("a throttled stream returns at most one packet per read and waits between packets")
    func throttle() async throws {
        /// Reads `form` to the end in 1000-byte reads; returns the size of each read.
        @Sendable func readAll(_ form: MultipartFormData) -> [Int] {
            let stream = form.makeStream()
            stream.open()
            defer { stream.close() }
            var buffer = [UInt8](repeating: 0, count: 1000)
            var sizes: [Int] = []
            while true {
                let count = buffer.withUnsafeMutableBufferPointer { stream.read($0.baseAddress!, maxLength: 1000) }
                if count <= 0 { return sizes }
                sizes.append(count)
            }
        }
        var form = MultipartFormData(boundary: "B")
        form.append(formData: Data(count: 100), name: "f")
        form.throttleBandwidth(packetSize: 40, delay: 0.2)
        // The reference: 256 KiB without a throttle, read at the same time on its own thread
        // (threads of their own: the throttle blocks its reader in sleeps).
        var reference = MultipartFormData(boundary: "B")
        reference.append(formData: Data(count: 256 << 10), name: "f")
        let finished = Locked<[String]>([])
        let sizes = Locked<[Int]>([])
        for (name, body) in [("reference", reference), ("throttled", form)] {
            Thread.detachNewThread {
                let read = readAll(body)
                if name == "throttled" { sizes.withLock { $0 = read } }
                finished.withLock { $0.append(name) }
            }
        }

        try await Wait.until("both streams read to the end", timeout: .seconds(60)) { finished.withLock { $0.count } == 2 }
        let packets = sizes.withLock { $0 }
        #expect(packets.allSatisfy { $0 <= 40 })
        #expect(Int64(packets.reduce(0, +)) == form.contentLength)
        // Its few packets, 0.2 s apart, come in after 2 500 times as many bytes unthrottled.
        #expect(finished.withLock { $0 } == ["reference", "throttled"])
    }

    @Test("the body can be written to a file for an upload from file, and the request loses its stream")
    func writeToFile() async throws {
        let scratch = try SerializationScratch()
        let source = try scratch.file("in.dat", contents: Data((0..<200_000).map { UInt8($0 % 251) }))
        let serializer = HTTPRequestSerializer()
        let request = try serializer.multipartFormRequest(urlString: "http://h/", parameters: ["a": 1]) { form in
            try form.append(fileURL: source, name: "f")
            form.throttleBandwidth(packetSize: 1, delay: 10)
        }
        let destination = scratch.url.appendingPathComponent("body.multipart")

        // A synchronous closure selects the blocking overload inside this async test.
        let written = try { () throws(TransferError) -> Request in
            try serializer.requestWithMultipartForm(request, writingStreamContentsToFile: destination)
        }()
        let writtenAsync = try await serializer.requestWithMultipartForm(
            request, writingStreamContentsToFile: scratch.url.appendingPathComponent("async.multipart"))

        let fileBody = try Data(contentsOf: destination)
        #expect(fileBody == (try MultipartTestSupport.body(of: request.withoutThrottle())))
        #expect(try Data(contentsOf: scratch.url.appendingPathComponent("async.multipart")) == fileBody)
        #expect(written.body == nil)
        #expect(writtenAsync.body == nil)
        #expect(written.headers["Content-Length"] == String(fileBody.count))
        #expect(written.headers["Content-Type"] == request.headers["Content-Type"])
        let plain = try serializer.request(method: .post, urlString: "http://h/")
        let error = await #expect(throws: TransferError.self) {
            try await serializer.requestWithMultipartForm(plain, writingStreamContentsToFile: destination)
        }
        #expect(error?.code == .invalidRequest)
    }

    @Test("errors thrown while building the body are reported as invalid requests")
    func constructingBodyErrors() {
        struct Custom: Error {}
        let wrapped = #expect(throws: TransferError.self) {
            try HTTPRequestSerializer().multipartFormRequest(urlString: "http://h/") { _ in throw Custom() }
        }
        #expect(wrapped?.code == .invalidRequest)
        #expect(wrapped?.underlyingError is Custom)

        let passedThrough = #expect(throws: TransferError.self) {
            try HTTPRequestSerializer().multipartFormRequest(urlString: "http://h/") { form in
                try form.append(fileURL: URL(fileURLWithPath: "/nonexistent/file"), name: "f")
            }
        }
        #expect(passedThrough?.code == .fileError)
    }

    @Test("MIME types come from the extension, case-insensitively, with a binary fallback")
    func mimeTypes() {
        #expect(MIMEType.forPathExtension("png") == "image/png")
        #expect(MIMEType.forPathExtension("JPG") == "image/jpeg")
        #expect(MIMEType.forFile(URL(fileURLWithPath: "/a/b/report.pdf")) == "application/pdf")
        #expect(MIMEType.forFile(URL(fileURLWithPath: "/a/b/data.json")) == "application/json")
        #expect(MIMEType.forPathExtension("nope") == "application/octet-stream")
        #expect(MIMEType.forPathExtension("") == "application/octet-stream")
    }
}

extension Request {
    /// This request with a body stream that ignores the form's throttle.
    func withoutThrottle() throws -> Request {
        guard case .stream(let provider, let length)? = body else { return self }
        var result = self
        result.body = .stream(
            BodyStreamProvider {
                let stream = provider.makeStream()
                (stream as? MultipartBodyStream)?.throttle = nil
                return stream
            }, length: length)
        return result
    }
}
