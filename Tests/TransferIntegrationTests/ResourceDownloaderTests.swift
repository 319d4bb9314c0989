import Dispatch
import Foundation
import Testing
import TestSupport
import Transfer

/// ResourceDownloader over real loopback sockets. Order and concurrency are
/// made observable with TestServer's `/hold` gates, never with the clock.
@Suite("Resource downloader")
struct ResourceDownloaderTests {
    private struct DecodeRefused: Error {}

    /// Results of completion handlers, in the order they ran.
    private final class Results: Sendable {
        let items = Locked<[(tag: String, result: Result<ResourceDownloader<Data>.Resource, TransferError>)]>([])

        func handler(_ tag: String) -> ResourceDownloader<Data>.CompletionHandler {
            { result in self.items.withLock { $0.append((tag, result)) } }
        }

        var count: Int { items.withLock { $0.count } }
        var tags: [String] { items.withLock { $0.map(\.tag) } }

        func result(_ tag: String) -> Result<ResourceDownloader<Data>.Resource, TransferError>? {
            items.withLock { items in items.first { $0.tag == tag }?.result }
        }

        func waitFor(_ count: Int) async throws {
            try await Wait.until("\(count) completions", timeout: defaultDeadline) { self.count >= count }
        }
    }

    @Test("100 concurrent requests for 10 URLs make exactly 10 transfers, and every caller gets its body")
    func coalescing() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let downloader = ResourceDownloader(session: session, maximumActiveDownloads: 4)
        let results = Results()
        let size = 4096

        // Given every request registered while the first transfers are held at the gate...
        DispatchQueue.concurrentPerform(iterations: 100) { index in
            let seed = index % 10
            let request = Request(url: server.url("/hold/\(size)?gate=g&seed=\(seed)"))
            downloader.download(request, completionHandler: results.handler("\(seed)"))
        }
        try await Wait.until("4 transfers held", timeout: defaultDeadline) { server.heldAtGate("g") == 4 }
        #expect(downloader.activeDownloadCount == 4)
        #expect(downloader.queuedDownloadCount == 6)

        // ...when the gate opens...
        server.openGate("g")
        try await results.waitFor(100)

        // ...then the server saw one request per URL and each caller got its URL's bytes.
        #expect(server.requestCount == 10)
        for (tag, result) in results.items.withLock({ $0 }) {
            let seed = try #require(UInt64(tag))
            let resource = try result.get()
            #expect(resource.value == TestServer.bytes(seed: seed, count: size))
            #expect(!resource.isFromCache)
        }
        try await Wait.until("all slots free", timeout: defaultDeadline) { downloader.activeDownloadCount == 0 }
    }

    @Test("queued downloads start in the chosen order", arguments: [
        (ResourceDownloader<Data>.Prioritization.fifo, ["A", "B", "C", "D"]),
        (ResourceDownloader<Data>.Prioritization.lifo, ["A", "D", "C", "B"]),
    ])
    func prioritization(order: ResourceDownloader<Data>.Prioritization, expected: [String]) async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let downloader = ResourceDownloader(session: session, prioritization: order, maximumActiveDownloads: 1)
        let results = Results()

        // Given A running and held, and B, C, D queued behind it in that order...
        downloader.download(
            Request(url: server.url("/hold/1000?gate=a&seed=1")), completionHandler: results.handler("A"))
        try await Wait.until("A held", timeout: defaultDeadline) { server.heldAtGate("a") == 1 }
        for (tag, seed) in [("B", 2), ("C", 3), ("D", 4)] {
            downloader.download(Request(url: server.url("/bytes/100?seed=\(seed)&tag=\(tag)")),
                                completionHandler: results.handler(tag))
        }
        #expect(downloader.queuedDownloadCount == 3)

        // ...when A is let go...
        server.openGate("a")
        try await results.waitFor(4)

        // ...then the queue is served in the chosen order: the order requests reach the server (the
        // completion handlers run on a concurrent queue, so the order they run in proves nothing).
        #expect(Set(results.tags) == Set(expected))
        let served = server.requests.map { request -> String in
            request.path.hasPrefix("/hold") ? "A" : String(request.target.suffix(1))
        }
        #expect(served == expected)
    }

    @Test("cancelling one receipt leaves the shared transfer to the others")
    func cancelOneReceipt() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let downloader = ResourceDownloader(session: session)
        let results = Results()
        let request = Request(url: server.url("/hold/200000?gate=c&seed=9"))

        let first = try #require(downloader.download(request, completionHandler: results.handler("first")))
        downloader.download(request, completionHandler: results.handler("second"))
        try await Wait.until("held", timeout: defaultDeadline) { server.heldAtGate("c") == 1 }

        downloader.cancel(first)
        try await results.waitFor(1)
        server.openGate("c")
        try await results.waitFor(2)

        #expect(results.tags == ["first", "second"])
        #expect(throws: TransferError.self) { try results.result("first")?.get() }
        if case .failure(let error)? = results.result("first") { #expect(error.code == .cancelled) }
        #expect(try results.result("second")?.get().value == TestServer.bytes(seed: 9, count: 200_000))
        #expect(server.requestCount == 1)
        // Cancelling again, after the result, changes nothing.
        downloader.cancel(first)
        #expect(results.count == 2)
    }

    @Test("cancelling the last receipt cancels the transfer")
    func cancelLastReceipt() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let downloader = ResourceDownloader(session: session)
        let results = Results()
        let request = Request(url: server.url("/hold/200000?gate=never&seed=9"))

        let receipt = try #require(downloader.download(request, completionHandler: results.handler("only")))
        try await Wait.until("held", timeout: defaultDeadline) { server.heldAtGate("never") == 1 }
        downloader.cancel(receipt)

        try await results.waitFor(1)
        if case .failure(let error)? = results.result("only") {
            #expect(error.code == .cancelled)
        } else {
            Issue.record("the cancelled receipt got a value")
        }
        // The gate never opens: only a cancelled transfer frees its slot and closes its connection.
        try await Wait.until("slot freed", timeout: defaultDeadline) { downloader.activeDownloadCount == 0 }
        try await Wait.until("connection closed", timeout: defaultDeadline) { server.openConnections == 0 }
    }

    @Test("cancelling a queued receipt takes it out of the queue before any request")
    func cancelQueued() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let downloader = ResourceDownloader(session: session, maximumActiveDownloads: 1)
        let results = Results()

        downloader.download(Request(url: server.url("/hold/1000?gate=q")), completionHandler: results.handler("A"))
        let queued = try #require(
            downloader.download(Request(url: server.url("/bytes/10?seed=5")), completionHandler: results.handler("B")))
        #expect(downloader.queuedDownloadCount == 1)
        downloader.cancel(queued)
        #expect(downloader.queuedDownloadCount == 0)
        server.openGate("q")
        try await results.waitFor(2)
        try await Wait.until("slot freed", timeout: defaultDeadline) { downloader.activeDownloadCount == 0 }

        #expect(results.tags == ["B", "A"])
        #expect(server.requests.map(\.path) == ["/hold/1000"])
    }

    @Test("a failing decode is a typed error for every caller and caches nothing")
    func failingDecode() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let cache = AutoPurgingCache<String>(memoryCapacity: 10_000, preferredMemoryUsageAfterPurge: 5_000) {
            $0.utf8.count
        }
        let downloader = ResourceDownloader<String>(session: session, cache: cache) { _, _ in throw DecodeRefused() }
        let request = Request(url: server.url("/json"))

        for _ in 0..<2 {
            let error = await #expect(throws: TransferError.self) { try await downloader.value(for: request) }
            #expect(error?.code == .serializationFailed)
            #expect(error?.underlyingError is DecodeRefused)
        }

        #expect(cache.count == 0)
        #expect(cache.memoryUsage == 0)
        #expect(server.requestCount == 2)
    }

    @Test("an error status fails before decoding and caches nothing")
    func errorStatus() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let cache = AutoPurgingCache<Data>()
        let downloader = ResourceDownloader(session: session, cache: cache)

        let error = await #expect(throws: TransferError.self) {
            try await downloader.value(for: Request(url: server.url("/status/404")))
        }

        #expect(error?.code == .unacceptableStatusCode)
        #expect(cache.count == 0)
    }

    @Test("a serializer decodes values, and the cache answers repeated requests without a transfer")
    func serializerAndCache() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let cache = AutoPurgingCache<JSONValue?>(memoryCapacity: 10_000, preferredMemoryUsageAfterPurge: 5_000) {
            _ in 100
        }
        let downloader = ResourceDownloader(session: session, serializer: JSONResponseSerializer(), cache: cache)
        let request = Request(url: server.url("/json"))

        let first = try await downloader.resource(for: request)
        let second = try await downloader.resource(for: request)
        var reload = request
        reload.cachePolicy = .reloadIgnoringLocalCacheData
        let third = try await downloader.resource(for: reload)

        #expect(first.value?["name"] == .string("transfer"))
        #expect(!first.isFromCache)
        #expect(second.isFromCache)
        #expect(second.value == first.value)
        #expect(!third.isFromCache)
        #expect(server.requestCount == 2)
    }

    @Test("the cache purges down to the preferred size, least recently used first")
    func cachePurge() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let cache = AutoPurgingCache<Data>(memoryCapacity: 100_000, preferredMemoryUsageAfterPurge: 60_000)
        let downloader = ResourceDownloader(session: session, cache: cache)
        func request(_ seed: Int) -> Request { Request(url: server.url("/bytes/30000?seed=\(seed)")) }

        for seed in 1...3 { _ = try await downloader.value(for: request(seed)) }
        #expect(cache.memoryUsage == 90_000)
        // Seed 1 read again from the cache: seed 2 becomes the least recently used.
        #expect(try await downloader.resource(for: request(1)).isFromCache)
        _ = try await downloader.value(for: request(4))

        #expect(cache.memoryUsage == 60_000)
        #expect(cache.value(for: request(1)) == TestServer.bytes(seed: 1, count: 30_000))
        #expect(cache.value(for: request(4)) == TestServer.bytes(seed: 4, count: 30_000))
        #expect(cache.value(for: request(2)) == nil)
        #expect(cache.value(for: request(3)) == nil)
        #expect(server.requestCount == 4)
    }

    @Test("cancelling the awaiting Swift task throws cancelled and ends the transfer")
    func asyncCancellation() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let downloader = ResourceDownloader(session: session)
        let request = Request(url: server.url("/hold/200000?gate=never&seed=3"))

        let task = Task { try await downloader.value(for: request) }
        try await Wait.until("held", timeout: defaultDeadline) { server.heldAtGate("never") == 1 }
        task.cancel()
        let outcome = await task.result

        guard case .failure(let error as TransferError) = outcome else {
            Issue.record("expected a TransferError, got \(outcome)")
            return
        }
        #expect(error.code == .cancelled)
        try await Wait.until("slot freed", timeout: defaultDeadline) { downloader.activeDownloadCount == 0 }
    }
}
