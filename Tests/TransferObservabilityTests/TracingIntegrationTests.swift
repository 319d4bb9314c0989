import Foundation
import InMemoryTracing
import TestSupport
import Testing
import Tracing
import TransferTracing

@testable import Transfer

/// A session tracing with `tracer`, with no global bootstrap.
func tracingSession(_ tracer: InMemoryTracer,
                    configure: (inout SessionConfiguration) -> Void = { _ in }) throws -> SessionManager
{
    var configuration = SessionConfiguration.ephemeral
    configuration.timeoutIntervalForRequest = 20
    configuration.requestInstruments = [TransferTracing(tracer: tracer)]
    configure(&configuration)
    return try SessionManager(configuration: configuration)
}

extension FinishedInMemorySpan {
    func string(_ name: String) -> String? {
        if case .string(let value) = attributes.get(name) { return value }
        return nil
    }

    func int(_ name: String) -> Int64? {
        if case .int64(let value) = attributes.get(name) { return value }
        return nil
    }
}

@Suite("TransferTracing over real sockets", .serialized)
struct TracingIntegrationTests {
    /// Runs `body` under a parent span; returns the parent's finished span.
    private static func underParent(_ tracer: InMemoryTracer, _ body: () async throws -> Void) async rethrows
        -> InMemorySpan
    {
        let parent = tracer.startSpan("parent")
        try await ServiceContext.withValue(parent.context) { try await body() }
        parent.end()
        return parent
    }

    @Test("a fast-path request: one client span, child of the caller's context, its context on the wire")
    func fastPathSpan() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let tracer = InMemoryTracer()
        let session = try tracingSession(tracer)
        let url = URL(string: "http://user:hunter2@127.0.0.1:\(server.port)/bytes/100?token=s3cret&page=2")!
        #expect(keepsFastPath(session, Request(url: url)))
        let parent = try await Self.underParent(tracer) {
            _ = try await session.data(for: Request(url: url))
        }
        let spans = tracer.finishedSpans.filter { $0.operationName == "GET" }
        try #require(spans.count == 1)
        let span = spans[0]
        #expect(span.kind == .client)
        #expect(span.traceID == parent.traceID)
        #expect(span.parentSpanID == parent.spanID)
        #expect(span.string("http.request.method") == "GET")
        #expect(span.int("http.response.status_code") == 200)
        #expect(span.string("server.address") == "127.0.0.1")
        #expect(span.int("server.port") == Int64(server.port))
        #expect(span.int("http.response.body.size") == 100)
        #expect(span.string("error.type") == nil)
        let full = try #require(span.string("url.full"))
        #expect(!full.contains("hunter2") && !full.contains("user@") && !full.contains("s3cret"))
        #expect(full.contains("page=2"))
        if case .double(let connect) = span.attributes.get("transfer.timing.connect") {
            #expect(connect > 0)
        } else {
            Issue.record("no transfer.timing.connect")
        }
        #expect(span.attributes.get("transfer.timing.first_byte") != nil)
        // The tracer's injection reached the server over the socket.
        let recorded = try #require(server.requests.last)
        #expect(recorded.header(InMemoryTracer.traceIDKey) == parent.traceID)
        #expect(recorded.header(InMemoryTracer.spanIDKey) == span.spanID)
    }

    @Test("a redirect chain: one span, one http.redirect event per hop")
    func redirectEvents() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let tracer = InMemoryTracer()
        let session = try tracingSession(tracer)
        _ = try await session.data(for: Request(url: server.url("/redirect/2")))
        let spans = tracer.finishedSpans
        try #require(spans.count == 1)
        let redirects = spans[0].events.filter { $0.name == "http.redirect" }
        #expect(redirects.count == 2)
        #expect(redirects.first?.attributes.get("http.response.status_code") == .int64(302))
        #expect(spans[0].int("http.response.status_code") == 200)
        // Every hop carried the span's context.
        let hops = server.requests.suffix(3)
        #expect(hops.count == 3)
        #expect(hops.allSatisfy { $0.header(InMemoryTracer.spanIDKey) == spans[0].spanID })
    }

    @Test("a retried task: one http.retry event, resend count, and a parent captured at creation")
    func retryEvents() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let tracer = InMemoryTracer()
        let policy = RetryPolicy(maximumAttempts: 3, initialDelay: .milliseconds(1), maximumDelay: .milliseconds(2))
        let session = try tracingSession(tracer) { $0.interceptor = policy }
        let request = Request(url: server.url("/flaky/1?key=trace-retry"))
        #expect(!session.takesFastPath(request))
        let parent = try await Self.underParent(tracer) {
            let (_, response) = try await session.data(for: request)
            #expect(response.statusCode == 200)
        }
        let spans = tracer.finishedSpans.filter { $0.operationName == "GET" }
        try #require(spans.count == 1)
        #expect(spans[0].parentSpanID == parent.spanID)
        #expect(spans[0].events.filter { $0.name == "http.retry" }.count == 1)
        #expect(spans[0].int("http.request.resend_count") == 1)
        #expect(server.requests.suffix(2).allSatisfy { $0.header(InMemoryTracer.spanIDKey) == spans[0].spanID })
    }

    @Test("an error status marks the span; a failure sets error.type")
    func errors() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let tracer = InMemoryTracer()
        let session = try tracingSession(tracer)
        _ = try await session.data(for: Request(url: server.url("/status/503")))
        let closed = server.url("/bytes/1")
        #expect(server.stop())
        await #expect(throws: TransferError.self) { _ = try await session.data(for: Request(url: closed)) }
        let spans = tracer.finishedSpans
        try #require(spans.count == 2)
        #expect(spans[0].string("error.type") == "503")
        #expect(spans[0].status?.code == .error)
        #expect(spans[1].string("error.type") == "cannotConnect")
        #expect(spans[1].errors.count == 1)
    }

    @Test("a batch: every request a child of the context the batch was made in")
    func batchParent() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let tracer = InMemoryTracer()
        let session = try tracingSession(tracer)
        let requests = (0..<12).map { _ in Request(url: server.url("/bytes/10")) }
        let parent = await Self.underParent(tracer) {
            // Two at a time: later windows are taken on the engine's thread.
            let results = await session.data(for: requests, maxConcurrentRequests: 2)
            #expect(results.allSatisfy { (try? $0.get()) != nil })
        }
        let spans = tracer.finishedSpans.filter { $0.operationName == "GET" }
        #expect(spans.count == 12)
        #expect(spans.allSatisfy { $0.parentSpanID == parent.spanID })
        #expect(Set(server.requests.compactMap { $0.header(InMemoryTracer.spanIDKey) }) == Set(spans.map(\.spanID)))
    }

    @Test("a data task made under a context is its child, with its context on the wire")
    func dataTask() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let tracer = InMemoryTracer()
        let session = try tracingSession(tracer)
        let done = Locked<Bool>(false)
        let parent = Self.underParentSync(tracer) {
            session.dataTask(with: Request(url: server.url("/bytes/5"))) { _, _, _ in
                done.withLock { $0 = true }
            }.resume()
        }
        try await Wait.until("the task completes", timeout: .seconds(20)) { done.withLock { $0 } }
        try await Wait.until("the span ends", timeout: .seconds(20)) {
            tracer.finishedSpans.contains { $0.operationName == "GET" }
        }
        let span = try #require(tracer.finishedSpans.first { $0.operationName == "GET" })
        #expect(span.parentSpanID == parent.spanID)
        #expect(server.requests.last?.header(InMemoryTracer.spanIDKey) == span.spanID)
    }

    private static func underParentSync(_ tracer: InMemoryTracer, _ body: () -> Void) -> InMemorySpan {
        let parent = tracer.startSpan("parent")
        ServiceContext.withValue(parent.context) { body() }
        parent.end()
        return parent
    }
}
