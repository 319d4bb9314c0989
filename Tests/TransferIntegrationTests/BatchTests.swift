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

    @Test("dropping the results of a batch, never iterated, cancels its requests")
    func droppedResultsCancel() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let requests = (0..<10).map { _ in Request(url: server.url("/hold/100000?gate=dropped")) }

        do {
            let results = session.results(for: requests, options: BatchOptions(maxConcurrentRequests: 4))
            try await Wait.until("four requests held at the gate", timeout: .seconds(10)) {
                server.heldAtGate("dropped") == 4
            }
            withExtendedLifetime(results) {}
        }

        // Held for 100 s unless the batch was cancelled when its results went away.
        try await Wait.until("the engine to drop every transfer", timeout: .seconds(10)) {
            session.engine.activeCount == 0
        }
        #expect(server.requestCount == 4)
    }

    @Test("leaving the iteration after the first result cancels the requests still running")
    func earlyExitCancels() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let requests = [Request(url: server.url("/bytes/16?seed=1"))]
            + (0..<5).map { _ in Request(url: server.url("/hold/100000?gate=early")) }

        var first: BatchResult?
        for await result in session.results(for: requests, options: BatchOptions(maxConcurrentRequests: 6)) {
            first = result
            try await Wait.until("five requests held at the gate", timeout: .seconds(10)) {
                server.heldAtGate("early") == 5
            }
            break
        }

        #expect(first?.index == 0)
        #expect(try first?.result.get().0 == TestServer.bytes(seed: 1, count: 16))
        try await Wait.until("the engine to drop every transfer", timeout: .seconds(10)) {
            session.engine.activeCount == 0
        }
        #expect(server.requestCount == 6)
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
            // Timings are collected when asked for (and only then: CT_FLAG_NO_METRICS).
            #expect(element.metrics?.httpVersion == "1.1")
            #expect(element.metrics?.remoteAddress == "127.0.0.1")
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

    // MARK: - Lazy sequences (issue 30 item 3)

    /// A lazy sequence of `count` requests that counts how many were taken from it.
    struct CountingRequests: Sequence, Sendable {
        let count: Int
        let pulled = Locked(0)
        let make: @Sendable (Int) -> Request

        struct Iterator: IteratorProtocol {
            let sequence: CountingRequests
            var position = 0
            mutating func next() -> Request? {
                guard position < sequence.count else { return nil }
                defer { position += 1 }
                sequence.pulled.withLock { $0 += 1 }
                return sequence.make(position)
            }
        }

        func makeIterator() -> Iterator { Iterator(sequence: self) }
    }

    static let lazyCount = ProcessInfo.processInfo.environment["TRANSFER_TEST_SANITIZER"] == nil ? 2_000 : 300

    @Test("a lazy sequence of 2,000 requests yields each index once and is never read more than the limit (and buffer) ahead",
          arguments: [0, 24])
    func lazySequenceStaysWithinTheLimit(buffered: Int) async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let limit = 16
        let requests = CountingRequests(count: Self.lazyCount) { Request(url: server.url("/bytes/\(16 + $0 % 64)")) }

        var seen = [Bool](repeating: false, count: requests.count)
        var received = 0
        var failures = 0
        var mostAhead = 0
        let options = BatchOptions(maxConcurrentRequests: limit, discardsBodies: true, bufferedResults: buffered)
        for await element in session.results(for: requests, options: options) {
            #expect(!seen[element.index], "index \(element.index) twice")
            seen[element.index] = true
            received += 1
            if received == 1 {
                // A consumer that stops after one result: the batch reads as
                // far as the limit and the buffer allow, and stops there.
                try await Wait.until("the batch has read up to its bound", timeout: .seconds(30)) {
                    requests.pulled.withLock { $0 } >= limit + buffered
                }
            }
            if case .success = element.result, element.bytesReceived == Int64(16 + element.index % 64) {} else {
                failures += 1
            }
            mostAhead = max(mostAhead, requests.pulled.withLock { $0 } - received)
            // A consumer that falls behind now and then: the batch must wait for it.
            if received % 500 == 0 { try await Task.sleep(for: .milliseconds(50)) }
        }

        #expect(received == requests.count)
        #expect(seen.allSatisfy { $0 })
        #expect(failures == 0)
        #expect(requests.pulled.withLock { $0 } == requests.count)
        #expect(mostAhead <= limit + buffered, "the sequence was read \(mostAhead) requests ahead of the consumer")
    }

    @Test("a lazy batch on an observed session runs as tasks within the same limit")
    func lazySequenceAsTasks() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        var hooks = SessionHooks()
        hooks.taskDidComplete = { _, _, _ in }
        session.hooks = hooks
        let limit = 4
        let requests = CountingRequests(count: 300) { Request(url: server.url("/bytes/\(10 + $0 % 7)?seed=\($0)")) }

        var seen = Set<Int>()
        var mostAhead = 0
        for await element in session.results(for: requests, options: BatchOptions(maxConcurrentRequests: limit)) {
            #expect(seen.insert(element.index).inserted)
            #expect(try element.result.get().0 == TestServer.bytes(seed: UInt64(element.index), count: 10 + element.index % 7))
            mostAhead = max(mostAhead, requests.pulled.withLock { $0 } - seen.count)
            if seen.count % 100 == 0 { try await Task.sleep(for: .milliseconds(20)) }
        }

        #expect(seen.count == 300)
        #expect(mostAhead <= limit, "the sequence was read \(mostAhead) requests ahead of the consumer")
    }

    @Test("requests of a lazy batch that cannot take the fast path run as tasks beside the others")
    func lazySequenceMixed() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let body = Data(repeating: 7, count: 100)
        let requests = CountingRequests(count: 200) { index in
            index % 5 == 0
                ? Request(url: server.url("/echo"), method: .post, body: .data(body))
                : Request(url: server.url("/bytes/\(20 + index % 9)?seed=\(index)"))
        }

        var seen = Set<Int>()
        for await element in session.results(for: requests, options: BatchOptions(maxConcurrentRequests: 8)) {
            #expect(seen.insert(element.index).inserted)
            let (data, response) = try element.result.get()
            #expect(response.statusCode == 200)
            if element.index % 5 == 0 {
                #expect(String(decoding: data, as: UTF8.self).contains("\"body_length\":100"))
            } else {
                #expect(data == TestServer.bytes(seed: UInt64(element.index), count: 20 + element.index % 9))
            }
        }

        #expect(seen.count == 200)
    }

    @Test("cancelling the task iterating a lazy batch cancels the running requests and reads no further")
    func lazySequenceCancellation() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let requests = CountingRequests(count: 1_000_000) { _ in Request(url: server.url("/hold/100000?gate=lazy")) }

        let consumer = Task {
            var count = 0
            for await _ in session.results(for: requests, options: BatchOptions(maxConcurrentRequests: 4)) { count += 1 }
            return count
        }
        try await Wait.until("four requests held at the gate", timeout: .seconds(10)) { server.heldAtGate("lazy") == 4 }
        consumer.cancel()
        _ = await consumer.value

        try await Wait.until("the engine to drop every transfer", timeout: .seconds(10)) {
            session.engine.activeCount == 0
        }
        // The results ended: the batch takes nothing more from the sequence.
        #expect(requests.pulled.withLock { $0 } == 4)
        #expect(server.requestCount == 4)
    }
}
