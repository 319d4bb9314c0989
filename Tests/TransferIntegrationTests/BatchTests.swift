import Foundation
import TestSupport
import Testing

@testable import Transfer

@Suite("Batch API")
struct BatchTests {
    @Test("results come back in the order of the requests")
    func order() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        // Later requests are smaller, so they tend to finish first.
        let sizes = (0..<40).map { 40_000 - $0 * 997 }
        let requests = sizes.enumerated().map { Request(url: server.url("/bytes/\($0.element)?seed=\($0.offset)")) }

        let results = await session.data(for: requests, maxConcurrentRequests: 8)

        #expect(results.count == requests.count)
        for (index, result) in results.enumerated() {
            let (data, response) = try result.get()
            #expect(response.statusCode == 200)
            #expect(data == TestServer.bytes(seed: UInt64(index), count: sizes[index]), "element \(index)")
        }
    }

    @Test("each element carries its own error beside the successes")
    func mixedErrors() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let requests = [
            Request(url: server.url("/bytes/100?seed=1")),
            Request(url: server.url("/status/404")),
            Request(url: server.url("/truncate/4000?send=1000")),
            Request(url: URL(string: "ftp://127.0.0.1/file")!),
            Request(url: server.url("/bytes/10"), headers: ["Bad Name": "x"]),
            Request(url: server.url("/bytes/200?seed=2")),
        ]

        let results = await session.data(for: requests, maxConcurrentRequests: 3)

        #expect(try results[0].get().0 == TestServer.bytes(seed: 1, count: 100))
        #expect(try results[1].get().1.statusCode == 404)
        #expect(Self.code(results[2]) == .truncatedResponse)
        #expect(Self.code(results[3]) == .invalidRequest)
        #expect(Self.code(results[4]) == .invalidRequest)
        #expect(try results[5].get().0 == TestServer.bytes(seed: 2, count: 200))
    }

    private static func code(_ result: Result<(Data, HTTPResponse), TransferError>) -> TransferError.Code? {
        if case .failure(let error) = result { return error.code }
        return nil
    }

    @Test("an empty batch returns an empty array at once")
    func empty() async throws {
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }

        let results = await session.data(for: [])
        var streamed = 0
        for await _ in session.results(for: []) { streamed += 1 }

        #expect(results.isEmpty)
        #expect(streamed == 0)
    }

    @Test("cancelling the Swift task cancels the running requests and the queued ones")
    func cancellation() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let requests = (0..<10).map { _ in Request(url: server.url("/hold/100000?gate=batch")) }

        let waiting = Task { await session.data(for: requests, maxConcurrentRequests: 4) }
        try await Wait.until("four requests held at the gate", timeout: .seconds(10)) { server.heldAtGate("batch") == 4 }
        waiting.cancel()
        let results = await waiting.value

        #expect(results.count == 10)
        #expect(results.allSatisfy { Self.code($0) == .cancelled })
        try await Wait.until("the engine to drop every transfer", timeout: .seconds(10)) {
            session.engine.activeCount == 0
        }
        #expect(server.requestCount == 4)
    }

    @Test("results(for:) yields each index once, as requests finish, with metrics when asked")
    func sequence() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let requests = (0..<20).map { Request(url: server.url("/bytes/\(100 + $0)")) }

        var seen: [Int: BatchResult] = [:]
        let options = BatchOptions(maxConcurrentRequests: 5, discardsBodies: true, collectsMetrics: true)
        for await element in session.results(for: requests, options: options) {
            #expect(seen[element.index] == nil)
            seen[element.index] = element
        }

        #expect(seen.count == 20)
        for (index, element) in seen {
            #expect(try element.result.get().0.isEmpty)
            #expect(element.bytesReceived == Int64(100 + index))
            #expect(element.metrics?.bodyBytesReceived == Int64(100 + index))
        }
    }

    @Test("a batch on a session with a hook runs as tasks and the hook sees each request")
    func hookedSession() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let completed = Locked(0)
        var hooks = SessionHooks()
        hooks.taskDidComplete = { _, _, _ in completed.withLock { $0 += 1 } }
        session.hooks = hooks
        let requests = (0..<12).map { Request(url: server.url("/bytes/\(50 + $0)?seed=\($0)")) }

        let results = await session.data(for: requests, maxConcurrentRequests: 4)

        for (index, result) in results.enumerated() {
            #expect(try result.get().0 == TestServer.bytes(seed: UInt64(index), count: 50 + index))
        }
        try await Wait.until("the hook for every request", timeout: .seconds(10)) { completed.withLock { $0 } == 12 }
    }

    @Test("1,000 requests against nginx all succeed, 64 at a time")
    func thousandAgainstNginx() async throws {
        let nginx = try NginxFixture.shared()
        let file = try nginx.ensureFile(size: 1024, seed: 77)
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let requests = (0..<1000).map { _ in Request(url: nginx.url(.http, file.path)) }
        let expected = TestServer.bytes(seed: 77, count: 1024)

        let results = await session.data(for: requests)

        #expect(results.count == 1000)
        var failures = 0
        for result in results {
            guard case .success(let (data, response)) = result, response.statusCode == 200, data == expected else {
                failures += 1
                continue
            }
        }
        #expect(failures == 0)
    }
}
