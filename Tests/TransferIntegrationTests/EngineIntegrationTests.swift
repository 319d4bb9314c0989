import Foundation
import Synchronization
import TestSupport
import Testing
import Transfer

/// Payload sizes shrink under sanitizers, which slow the byte path 5-20x.
enum Sizes {
    static let underSanitizer = ProcessInfo.processInfo.environment["TRANSFER_TEST_SANITIZER"] != nil
    static let large = underSanitizer ? 8 << 20 : 64 << 20
    static let manyRequests = underSanitizer ? 300 : 2_000
}

/// A session for one test, invalidated at the end.
func makeSession(_ configure: (inout SessionConfiguration) -> Void = { _ in }) throws -> SessionManager {
    var configuration = SessionConfiguration.ephemeral
    configuration.timeoutIntervalForRequest = 20
    configure(&configuration)
    return try SessionManager(configuration: configuration)
}

@Suite("Engine over real sockets", .serialized)
struct EngineIntegrationTests {
    @Test("a 64 MiB body from nginx reaches disk byte for byte, over HTTP and HTTPS")
    func largeDownloadIsExact() async throws {
        let nginx = try NginxFixture.shared()
        let file = try nginx.ensureFile(size: Sizes.large, seed: 7)
        let session = try makeSession { $0.caFile = nginx.caFile }
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()

        for listener in [NginxFixture.Listener.http, .https] {
            let destination = directory.file("body-\(listener).bin")

            let (url, response) = try await session.download(for: Request(url: nginx.url(listener, file.path)),
                                                              to: destination)

            #expect(response.statusCode == 200)
            #expect(url == destination)
            #expect(try FileDigest.sha256(of: destination) == file.sha256)
            #expect(!FileManager.default.fileExists(atPath: destination.path + ".part"))
        }
    }

    @Test("a discarded body is counted to the byte and never stored")
    func discardCountsBytes() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }

        let (bytes, response) = try await session.discard(for: Request(url: server.url("/bytes/5000000?seed=1")))

        #expect(response.statusCode == 200)
        #expect(bytes == 5_000_000)
    }

    @Test("2,000 small GETs at 64 concurrent all come back right")
    func manySmallRequests() async throws {
        let nginx = try NginxFixture.shared()
        let file = try nginx.ensureFile(size: 1024, seed: 3)
        let url = nginx.url(.http, file.path)
        let expected = try Data(contentsOf: URL(fileURLWithPath: nginx.contentRoot + file.path))
        let session = try makeSession { $0.maxConnectionsPerHost = 64 }
        defer { session.invalidateAndCancel() }

        let total = Sizes.manyRequests
        let correct = await withTaskGroup(of: Bool.self) { group -> Int in
            var issued = 0
            var correct = 0
            func add() {
                issued += 1
                group.addTask {
                    guard let (data, response) = try? await session.data(for: Request(url: url)) else { return false }
                    return response.statusCode == 200 && data == expected
                }
            }
            for _ in 0..<64 { add() }
            for await ok in group {
                if ok { correct += 1 }
                if issued < total { add() }
            }
            return correct
        }

        #expect(correct == total)
        #expect(session.tasks.isEmpty)
    }

    @Test("parallel plain-HTTP transfers to one host do not queue behind each other")
    func plainHTTPDoesNotWaitForMultiplexing() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        let order = EventLog()

        // The slow responses stop halfway at a gate that opens only once the fast one has
        // completed (or 30 s passed): a fast request queued behind them cannot complete first.
        await withTaskGroup(of: Void.self) { group in
            for slow in 0..<2 {
                group.addTask {
                    let result = try? await session.data(for: Request(url: server.url("/hold/65536?gate=slow&seed=\(slow)")))
                    order.add(result?.0.count == 65536 ? "slow\(slow)" : "slow\(slow) failed")
                }
            }
            group.addTask {
                // Started once both slow ones are on the wire, held half-sent at the gate.
                let held = await Wait.poll(timeout: .seconds(10)) { server.heldAtGate("slow") == 2 }
                order.add(held ? "held" : "slow ones not held")
                let fast = Task {
                    let result = try? await session.data(for: Request(url: server.url("/bytes/12")))
                    order.add(result?.0.count == 12 ? "fast" : "fast failed")
                }
                let done = await Wait.poll(timeout: .seconds(30)) { order.all.contains { $0.hasPrefix("fast") } }
                if !done { order.add("fast not done while the slow ones were held") }
                server.openGate("slow")
                await fast.value
            }
        }

        #expect(Array(order.all.prefix(2)) == ["held", "fast"], "\(order.all)")
        #expect(Set(order.all.dropFirst(2)) == ["slow0", "slow1"], "\(order.all)")
    }

    @Test("POST and PUT of a file body are received exactly")
    func fileUploadsAreExact() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let source = directory.file("upload.bin")
        let payload = TestServer.bytes(seed: 11, count: 3 << 20)
        try payload.write(to: source)
        let session = try makeSession()
        defer { session.invalidateAndCancel() }

        for method in [HTTPMethod.post, .put] {
            let (body, response) = try await session.upload(for: Request(url: server.url("/upload"), method: method),
                                                            fromFile: source)

            #expect(response.statusCode == 200)
            let answer = try JSONSerialization.jsonObject(with: body) as? [String: Any]
            #expect(answer?["length"] as? Int == payload.count)
            #expect(answer?["sha256"] as? String == FileDigest.sha256(payload))
        }
    }

    @Test("HTTP/2 is negotiated and several requests share one connection")
    func http2IsMultiplexed() async throws {
        let nginx = try NginxFixture.shared()
        let file = try nginx.ensureFile(size: 16 << 10, seed: 5)
        let url = nginx.url(.http2, file.path)
        let session = try makeSession { $0.caFile = nginx.caFile }
        defer { session.invalidateAndCancel() }
        let metrics = Locked<[TaskMetrics]>([])
        session.hooks.taskDidFinishCollectingMetrics = { _, _, m in metrics.withLock { $0.append(m) } }

        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<16 {
                group.addTask {
                    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                        let task = session.dataTask(with: Request(url: url)) { _, _, _ in done.resume() }
                        task.resume()
                    }
                }
            }
        }

        let collected = metrics.withLock { $0 }
        #expect(!collected.isEmpty)
        #expect(collected.allSatisfy { $0.httpVersion == "2" })
        // 16 concurrent requests on a multiplexing session need far fewer connections.
        #expect(collected.filter { !$0.reusedConnection }.count < 16)
    }

    @Test("maxIdleConnections caps the idle pool: with 1, two origins used in turn reconnect; with 2, they reuse")
    func idleConnectionCap() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer {
            a.stop()
            b.stop()
        }
        #expect(SessionConfiguration.default.maxIdleConnections == 0, "0: the engine's 256")
        for cap in [1, 2] {
            let session = try makeSession { $0.maxIdleConnections = cap }
            defer { session.invalidateAndCancel() }
            let metrics = Locked<[TaskMetrics]>([])
            session.hooks.taskDidFinishCollectingMetrics = { _, _, m in metrics.withLock { $0.append(m) } }
            let (acceptedA, acceptedB) = (a.acceptedConnections, b.acceptedConnections)

            // One at a time, A B A B: each ends (its connection idle) before the next starts.
            // Connections of the previous round are closed with its session: none is left.
            try await Wait.until("no connection left from before", timeout: .seconds(30)) {
                a.openConnections + b.openConnections == 0
            }
            for (index, server) in [a, b, a, b].enumerated() {
                let failure: TransferError? = await withCheckedContinuation { done in
                    session.dataTask(with: Request(url: server.url("/bytes/100?seed=\(index)"))) { _, _, error in
                        done.resume(returning: error)
                    }.resume()
                }
                #expect(failure == nil, "cap \(cap), request \(index): \(String(describing: failure))")
            }

            try await Wait.until("the metrics of the four requests", timeout: .seconds(30)) {
                metrics.withLock { $0.count } == 4
            }
            let reused = metrics.withLock { $0.map(\.reusedConnection) }
            let opened = (a.acceptedConnections - acceptedA, b.acceptedConnections - acceptedB)
            if cap == 1 {
                // When the second connection falls idle, one of the two is closed (the older, or
                // either when both ended within the same millisecond): of requests 3 and 4 at
                // most one finds its origin's connection, and one connection stays open.
                #expect(reused.filter { $0 }.count <= 1, "cap 1: \(reused)")
                #expect(opened.0 + opened.1 >= 3, "cap 1: connections opened \(opened)")
                try await Wait.until("one connection left open with cap 1", timeout: .seconds(30)) {
                    a.openConnections + b.openConnections == 1
                }
            } else {
                #expect(reused == [false, false, true, true], "cap 2: \(reused)")
                #expect(opened == (1, 1), "cap 2: connections opened \(opened)")
            }
        }
    }

    @Test("a refused connection is a cannotConnect error")
    func refusedConnection() async throws {
        let port = try FreePort.reserve()   // bound then closed: nothing listens there
        let session = try makeSession()
        defer { session.invalidateAndCancel() }

        await #expect { try await session.data(for: Request(url: URL(string: "http://127.0.0.1:\(port)/")!)) }
            throws: { ($0 as? TransferError)?.code == .cannotConnect }
    }

    @Test("a server that stalls fails with timedOut within the timeout")
    func stallTimesOut() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession { $0.timeoutIntervalForResource = 1 }
        defer { session.invalidateAndCancel() }

        // The server never answers and never closes: only the client's own timeout ends this.
        await #expect { try await session.data(for: Request(url: server.url("/stall-headers"))) }
            throws: { ($0 as? TransferError)?.code == .timedOut }

        // The server saw the request, and then saw the client give up and hang up.
        #expect(server.requestCount == 1)
        #expect(server.waitForOpenConnections(0), "the client did not close the stalled connection")
    }

    @Test("cancelling mid-download completes as cancelled and leaves nothing at the destination")
    func cancelMidDownload() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        let destination = try TemporaryDirectory().file("cancelled.bin")
        let outcome = Locked<TransferError?>(nil)
        let received = Atomic<Int64>(0)

        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let task = session.downloadTask(with: Request(url: server.url("/slow?rate=262144&size=8388608")),
                                            to: destination) { _, _, error in
                outcome.withLock { $0 = error }
                done.resume()
            }
            task.observeProgress(.download, on: .global()) { progress in
                received.store(progress.completedUnitCount, ordering: .relaxed)
                if progress.completedUnitCount > 64 << 10 { task.cancel() }
            }
            task.resume()
        }

        #expect(outcome.withLock { $0?.code } == .cancelled)
        #expect(received.load(ordering: .relaxed) > 0)
        #expect(!FileManager.default.fileExists(atPath: destination.path))
        #expect(!FileManager.default.fileExists(atPath: destination.path + ".part"))
    }

    @Test("invalid URLs and headers are invalidRequest errors, not crashes")
    func invalidInput() async throws {
        let session = try makeSession()
        defer { session.invalidateAndCancel() }

        #expect(throws: TransferError.self) { try Request("not a url") }
        #expect(throws: TransferError.self) { try Request("ftp://example.invalid/file") }
        await #expect { try await session.data(for: Request(url: URL(string: "file:///etc/passwd")!)) }
            throws: { ($0 as? TransferError)?.code == .invalidRequest }
        var injected = Request(url: URL(string: "http://127.0.0.1:1/")!)
        injected.headers["X-Evil"] = "a\r\nHost: elsewhere"
        await #expect { try await session.data(for: injected) }
            throws: { ($0 as? TransferError)?.code == .invalidRequest }
        await #expect {
            try await session.upload(for: Request(url: URL(string: "http://127.0.0.1:1/")!),
                                     fromFile: URL(fileURLWithPath: "/nonexistent/file"))
        } throws: { ($0 as? TransferError)?.code == .invalidRequest }
    }

    @Test("bad server behaviour maps to typed errors")
    func serverFaults() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession { $0.maxRedirects = 5 }
        defer { session.invalidateAndCancel() }

        let cases: [(String, TransferError.Code)] = [
            ("/truncate/100000", .truncatedResponse),
            ("/garbage", .badResponse),
            ("/redirect-loop", .tooManyRedirects),
            ("/redirect-to?url=ftp://127.0.0.1/x", .redirectRefused),
            ("/redirect-to?url=file:///etc/passwd", .redirectRefused),
        ]
        for (path, code) in cases {
            await #expect("\(path) → \(code)") { try await session.data(for: Request(url: server.url(path))) }
                throws: { ($0 as? TransferError)?.code == code }
        }
    }

    @Test("a final head without header lines is judged on its own, not on the previous head's lines")
    func headAfterInterimHeadIsFresh() async throws {
        // Found by fuzz_header_cb: the engine kept the 103's Location in the
        // block and took the final 302 for a redirect to follow.
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession { $0.maxRedirects = 5 }
        defer { session.invalidateAndCancel() }

        let (body, response) = try await session.data(for: Request(url: server.url("/stale-location")))

        #expect(response.statusCode == 302)
        #expect(response.headers.value(for: "Location") == nil)
        #expect(body == Data("body".utf8))
    }

    @Test("a download that fails leaves nothing behind")
    func failedDownloadLeavesNothing() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        let destination = try TemporaryDirectory().file("truncated.bin")

        await #expect { try await session.download(for: Request(url: server.url("/truncate/1000000")), to: destination) }
            throws: { ($0 as? TransferError)?.code == .truncatedResponse }

        #expect(!FileManager.default.fileExists(atPath: destination.path))
        #expect(!FileManager.default.fileExists(atPath: destination.path + ".part"))
    }

    @Test("an untrusted certificate is a TLS failure and sends no request")
    func untrustedCertificate() async throws {
        let nginx = try NginxFixture.shared()
        let session = try makeSession()   // system anchors: our throwaway CA is not among them
        defer { session.invalidateAndCancel() }

        await #expect { try await session.data(for: Request(url: nginx.url(.https, "/"))) }
            throws: { ($0 as? TransferError)?.code == .tlsFailure }
    }
}

/// A loopback port that nothing listens on (bound, then released).
enum FreePort {
    static func reserve() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw TransferError(.internalError, "cannot reserve a port") }
        return UInt16(bigEndian: address.sin_port)
    }
}
