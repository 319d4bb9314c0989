import Foundation
import HTTPTypes
import OpenAPIRuntime
import Testing
import TestSupport
import Transfer
@testable import TransferOpenAPI

/// Issue 28 item 5: the OpenAPI transport against our own server over real
/// loopback sockets, through a hand-written client on the runtime's
/// `UniversalClient` and through the transport directly. Every wait is on an
/// event (a server counter, a flag set by the consumer) with a bound; no sleeps.
@Suite("OpenAPI transport on Transfer")
struct TransferClientTransportTests {
    /// Under a sanitizer (scripts/test.sh) the big bodies shrink: the checks do not need the size.
    private static let underSanitizer = ProcessInfo.processInfo.environment["TRANSFER_TEST_SANITIZER"] != nil

    private static func sha256(_ data: Data) -> String {
        let hasher = SHA256Hasher()
        hasher.update(data)
        return hasher.finalize()
    }

    @Test("JSON request and JSON response round trip through the runtime's client")
    func jsonRoundTrip() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let api = TestAPIClient(serverURL: server.url("/"), transport: TransferClientTransport(session: session))

        let pet = TestAPIClient.Pet(name: "Rex", tags: ["good", "dog"])
        let output = try await api.echo(pet, tag: "t1")

        guard case .ok(let reply) = output else {
            Issue.record("expected 200, got \(output)")
            return
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let sent = try encoder.encode(pet)
        #expect(reply.method == "POST")
        #expect(reply.path == "/echo")
        #expect(reply.query == ["tag": "t1"])
        #expect(reply.headers["content-type"] == "application/json; charset=utf-8")
        #expect(reply.headers["accept"] == "application/json")
        #expect(reply.body_length == sent.count)
        #expect(reply.body_sha256 == Self.sha256(sent))
    }

    @Test("a multi-MiB response body streams in chunks, consumed as it arrives")
    func streamedResponse() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let bufferSize = 256 << 10
        let transport = TransferClientTransport(
            session: session, configuration: .init(responseBufferSize: bufferSize))
        let api = TestAPIClient(serverURL: server.baseURL, transport: transport)
        let count = Self.underSanitizer ? 4 << 20 : 16 << 20

        let output = try await api.download("/bytes/\(count)?seed=41")
        guard case .ok(let body) = output else {
            Issue.record("expected 200, got \(output)")
            return
        }
        #expect(body.length == .known(Int64(count)))
        #expect(body.iterationBehavior == .single)
        let hasher = SHA256Hasher()
        var received = 0
        var chunks = 0
        var largest = 0
        for try await chunk in body {
            chunk.withUnsafeBytes { hasher.update($0) }
            received += chunk.count
            chunks += 1
            largest = max(largest, chunk.count)
        }
        #expect(received == count)
        #expect(hasher.finalize() == TestServer.sha256(seed: 41, count: count))
        // Incremental: many chunks, none near the whole body.
        #expect(chunks > 16)
        #expect(largest <= bufferSize + (64 << 10))
    }

    @Test("a request body of unknown length is streamed (chunked), not collected")
    func streamedRequestBody() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let transport = TransferClientTransport(
            session: session, configuration: .init(requestBodyBufferSize: 128 << 10))
        let api = TestAPIClient(serverURL: server.baseURL, transport: transport)
        let count = Self.underSanitizer ? 2 << 20 : 6 << 20
        let piece = 64 << 10
        let (chunks, continuation) = AsyncThrowingStream.makeStream(of: ArraySlice<UInt8>.self)
        let all = [UInt8](TestServer.bytes(seed: 42, count: count))
        let producer = Task {
            var offset = 0
            while offset < count {
                let size = min(piece, count - offset)
                continuation.yield(all[offset..<offset + size])
                offset += size
            }
            continuation.finish()
        }
        defer { producer.cancel() }

        let output = try await api.upload(HTTPBody(chunks, length: .unknown))

        guard case .ok(let reply) = output else {
            Issue.record("expected 200, got \(output)")
            return
        }
        #expect(reply.length == count)
        #expect(reply.sha256 == TestServer.sha256(seed: 42, count: count))
        let recorded = try #require(server.requests.last)
        #expect(recorded.header("Transfer-Encoding")?.lowercased() == "chunked")
        #expect(recorded.header("Content-Length") == nil)
    }

    @Test("error statuses are responses, passed through to the client's undocumented case")
    func errorStatusesPassThrough() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let api = TestAPIClient(serverURL: server.baseURL, transport: TransferClientTransport(session: session))

        for status in [404, 500] {
            let output = try await api.download("/status/\(status)")
            guard case .undocumented(let code, let body) = output else {
                Issue.record("expected \(status) undocumented, got \(output)")
                continue
            }
            #expect(code == status)
            let text = try await String(collecting: try #require(body), upTo: 1024)
            #expect(text == "status \(status)\n")
        }
    }

    @Test("a transport failure reaches the caller as a ClientError wrapping the TransferError")
    func transportErrorIsWrapped() async throws {
        let server = try await TestServer.start()
        let closedURL = server.baseURL
        #expect(server.stop())
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let api = TestAPIClient(serverURL: closedURL, transport: TransferClientTransport(session: session))

        do {
            _ = try await api.download("/bytes/10")
            Issue.record("expected a failure")
        } catch let error as ClientError {
            let underlying = try #require(error.underlyingError as? TransferError)
            #expect(underlying.code == .cannotConnect)
            #expect(error.operationID == "download")
        }
    }

    @Test("cancelling the task while the server holds the response head cancels the transfer")
    func cancelWhileWaitingForHead() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let transport = TransferClientTransport(session: session)
        let api = TestAPIClient(serverURL: server.baseURL, transport: transport)

        // Through the runtime's client: a ClientError around CancellationError.
        let viaClient = Task { try await api.download("/whoami?gate=head1") }
        try await Wait.until("the server to hold the first response", timeout: .seconds(10)) {
            server.heldAtGate("head1") == 1
        }
        viaClient.cancel()
        let clientResult = await viaClient.result
        #expect(throws: CancellationError.self) {
            do { _ = try clientResult.get() } catch let error as ClientError { throw error.underlyingError }
        }
        try await Wait.until("the server to see the connection close", timeout: .seconds(10)) {
            server.heldAtGate("head1") == 0 && server.openConnections == 0
        }

        // The transport itself: CancellationError.
        let direct = Task {
            try await transport.send(HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/whoami?gate=head2"),
                                     body: nil, baseURL: server.baseURL, operationID: "whoami")
        }
        try await Wait.until("the server to hold the second response", timeout: .seconds(10)) {
            server.heldAtGate("head2") == 1
        }
        direct.cancel()
        let directResult = await direct.result
        #expect(throws: CancellationError.self) { _ = try directResult.get() }
        try await Wait.until("the server to see the second connection close", timeout: .seconds(10)) {
            server.heldAtGate("head2") == 0 && server.openConnections == 0
        }
    }

    @Test("cancelling the task that reads a held response body cancels the transfer")
    func cancelWhileReadingBody() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let transport = TransferClientTransport(session: session)
        let count = 4 << 20

        let (response, body) = try await transport.send(
            HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/hold/\(count)?gate=body&after=65536"),
            body: nil, baseURL: server.baseURL, operationID: "hold")
        #expect(response.status == .ok)
        let firstBytes = Locked(0)
        let reader = Task {
            var received = 0
            for try await chunk in try #require(body) {
                received += chunk.count
                firstBytes.withLock { $0 = received }
            }
            return received
        }
        try await Wait.until("the reader to get the bytes before the gate", timeout: .seconds(10)) {
            firstBytes.withLock { $0 } == 65536 && server.heldAtGate("body") == 1
        }
        reader.cancel()
        let result = await reader.result
        #expect(throws: CancellationError.self) { _ = try result.get() }
        try await Wait.until("the server to see the connection close", timeout: .seconds(10)) {
            server.heldAtGate("body") == 0 && server.openConnections == 0
        }
        #expect(server.sentPastGate("body") == 0)
    }

    @Test("baseURL and the request path join as the runtime expects")
    func urlJoining() throws {
        func join(_ base: String, _ path: String?) throws -> String {
            try TransferClientTransport.url(baseURL: URL(string: base)!, path: path).absoluteString
        }
        #expect(try join("http://h:1", "/pets") == "http://h:1/pets")
        #expect(try join("http://h:1/", "/pets") == "http://h:1/pets")
        #expect(try join("http://h:1/api/v1/", "/pets/7?limit=2&q=a%20b") == "http://h:1/api/v1/pets/7?limit=2&q=a%20b")
        #expect(try join("http://h:1/api?key=k", "/pets?limit=2") == "http://h:1/api/pets?key=k&limit=2")
        #expect(try join("http://h:1/api", nil) == "http://h:1/api")
        #expect(throws: TransferError.self) { try join("ftp://h/", "/x") }
    }

    @Test("the snippets of docs/INTEGRATIONS.md are the ones compiled in IntegrationsDocSnippets.swift")
    func docSnippetsUpToDate() throws {
        let here = URL(fileURLWithPath: #filePath)
        let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let page = try String(contentsOf: root.appendingPathComponent("docs/INTEGRATIONS.md"), encoding: .utf8)
        let compiled = try String(
            contentsOf: here.deletingLastPathComponent().appendingPathComponent("IntegrationsDocSnippets.swift"),
            encoding: .utf8)
        let compiledLines = Set(compiled.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) })
        let blocks = page.components(separatedBy: "```swift\n").dropFirst().map {
            $0.components(separatedBy: "\n```").first ?? ""
        }
        let checked = blocks.filter { $0.hasPrefix("import ") }
        #expect(checked.count == 3)
        for block in checked {
            for line in block.split(separator: "\n") where !line.hasPrefix("import ") {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                #expect(compiledLines.contains(trimmed), "not compiled: \(trimmed)")
            }
        }
    }

    @Test("a streamed request body is read ahead by at most the buffer: the producer waits for the reader")
    func requestBodyBackpressure() async throws {
        let feed = BodyFeed(capacity: 100)
        let pushed = Locked(0)
        let producer = Task {
            for _ in 0..<3 {
                guard await feed.push(ArraySlice(repeating: 7, count: 60)) else { return }
                pushed.withLock { $0 += 1 }
            }
            feed.finish(failure: nil)
        }
        // 60 bytes fit; the second push fills the buffer past 100 and waits.
        try await Wait.until("the producer to wait for space", timeout: .seconds(10)) {
            feed.isWaitingForSpace && pushed.withLock { $0 } == 1
        }
        var scratch = [UInt8](repeating: 0, count: 30)
        #expect(scratch.withUnsafeMutableBufferPointer { feed.read(into: $0.baseAddress!, maxLength: 30) } == 30)
        // 90 bytes left: below the mark, the producer goes on, and waits again after its third push.
        try await Wait.until("the producer to push again and wait", timeout: .seconds(10)) {
            pushed.withLock { $0 } == 2 && feed.isWaitingForSpace
        }
        var total = 30
        scratch = [UInt8](repeating: 0, count: 64)
        while true {
            let count = scratch.withUnsafeMutableBufferPointer { feed.read(into: $0.baseAddress!, maxLength: 64) }
            #expect(count >= 0)
            if count <= 0 { break }
            total += count
        }
        await producer.value
        #expect(total == 180)
        #expect(pushed.withLock { $0 } == 3)
    }

    @Test("cancelling a request body feed fails a blocked read and ends the producer")
    func requestBodyCancel() async throws {
        let feed = BodyFeed(capacity: 100)
        let readResult = Locked<Int?>(nil)
        let reader = Thread {
            var scratch = [UInt8](repeating: 0, count: 16)
            let count = scratch.withUnsafeMutableBufferPointer { feed.read(into: $0.baseAddress!, maxLength: 16) }
            readResult.withLock { $0 = count }
        }
        reader.start()
        try await Wait.until("the reader to block", timeout: .seconds(10)) { feed.isReaderWaiting }
        feed.cancel()
        try await Wait.until("the read to fail", timeout: .seconds(10)) { readResult.withLock { $0 } == -1 }
        #expect(await feed.push([1, 2, 3]) == false)
        #expect(feed.streamError is CancellationError)
    }

    @Test("a streamed body that can be iterated again is sent again after a 307 redirect")
    func streamedBodyFollowsRedirect() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        // Limit 0: every body is streamed, even of known length.
        let transport = TransferClientTransport(session: session, configuration: .init(bufferedRequestBodyLimit: 0))
        let count = 1 << 20
        let bytes = [UInt8](TestServer.bytes(seed: 43, count: count))
        let target = server.url("/upload").absoluteString
        let path = "/redirect-to?status=307&url=" + target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!

        let (response, body) = try await transport.send(
            HTTPRequest(method: .post, scheme: nil, authority: nil, path: path),
            body: HTTPBody(bytes), baseURL: server.baseURL, operationID: "upload")

        #expect(response.status == .ok)
        let reply = try JSONDecoder().decode(
            TestAPIClient.UploadReply.self, from: try await Data(collecting: try #require(body), upTo: 1 << 16))
        #expect(reply.length == count)
        #expect(reply.sha256 == TestServer.sha256(seed: 43, count: count))
        #expect(server.requests.map(\.path) == ["/redirect-to", "/upload"])
    }

    @Test("HEAD and 204 answers have no body, and their connection is reused")
    func bodilessAnswers() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let transport = TransferClientTransport(session: session)

        let (head, headBody) = try await transport.send(
            HTTPRequest(method: .head, scheme: nil, authority: nil, path: "/bytes/1000"),
            body: nil, baseURL: server.baseURL, operationID: "head")
        let (noContent, noContentBody) = try await transport.send(
            HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/status/204"),
            body: nil, baseURL: server.baseURL, operationID: "noContent")

        #expect(head.status == .ok)
        #expect(head.headerFields[.contentLength] == "1000")
        #expect(headBody == nil)
        #expect(noContent.status == .noContent)
        #expect(noContentBody == nil)
        #expect(server.acceptedConnections == 1)
    }
}
