import CoreMetrics
import Foundation
import MetricsTestKit
import TestSupport
import Testing
import TransferMetrics

@testable import Transfer

/// A session recording through `factory`, with no global bootstrap.
func metricsSession(_ factory: TestMetrics, options: TransferMetrics.Options = .init(),
                    configure: (inout SessionConfiguration) -> Void = { _ in }) throws -> (SessionManager, TransferMetrics)
{
    let metrics = TransferMetrics(factory: factory, options: options)
    var configuration = SessionConfiguration.ephemeral
    configuration.timeoutIntervalForRequest = 20
    configuration.requestInstruments = [metrics]
    configure(&configuration)
    return (try SessionManager(configuration: configuration), metrics)
}

/// Whether the session's own settings (its instruments included) leave
/// `request` on the fast path. Not `takesFastPath(_:)`: that also reads who
/// observes the task notifications process-wide, which tests of other suites
/// running at the same time do.
func keepsFastPath(_ session: SessionManager, _ request: Request) -> Bool {
    session.fastPathOpen.load(ordering: .relaxed) && !session.observation.blocksFastPath
        && session.configuration.interceptor == nil && request.body == nil
}

@Suite("TransferMetrics over real sockets", .serialized)
struct MetricsIntegrationTests {
    typealias Label = TransferMetrics.Label
    typealias Dimension = TransferMetrics.Dimension

    @Test("fast-path requests are counted by method, status and error, with timers and body sizes")
    func fastPathCounters() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let factory = TestMetrics()
        let (session, _) = try metricsSession(factory)
        let ok = Request(url: server.url("/bytes/1000"))
        // The instrument keeps the request on the fast path.
        #expect(keepsFastPath(session, ok))
        _ = try await session.data(for: ok)
        _ = try await session.data(for: ok)
        _ = try await session.data(for: Request(url: server.url("/status/404")))

        let okDimensions = [(Dimension.method, "GET"), (Dimension.statusCode, "200"), (Dimension.statusClass, "2xx")]
        #expect(try factory.expectCounter(Label.requests, okDimensions).totalValue == 2)
        let notFound = [(Dimension.method, "GET"), (Dimension.statusCode, "404"), (Dimension.statusClass, "4xx")]
        #expect(try factory.expectCounter(Label.requests, notFound).totalValue == 1)
        let duration = try factory.expectTimer(Label.duration, okDimensions)
        #expect(duration.values.count == 2)
        #expect(duration.values.allSatisfy { $0 > 0 })
        #expect(try factory.expectTimer(Label.timeToFirstByte, okDimensions).values.count == 2)
        #expect(try factory.expectRecorder(Label.responseBodySize, okDimensions).values == [1000, 1000])
        #expect(try factory.expectRecorder(Label.requestBodySize, okDimensions).values == [0, 0])
        // Every request that started has ended.
        let active = try factory.expectMeter(Label.activeRequests, [(Dimension.method, "GET")])
        #expect(active.lastValue == 0)
        #expect(session.tasks.isEmpty)
    }

    @Test("a failure carries error.type, the TransferError.Code name")
    func errorType() async throws {
        // A port that was listening and is closed now: the connection is refused.
        let server = try await TestServer.start()
        let url = server.url("/bytes/1")
        #expect(server.stop())
        let factory = TestMetrics()
        let (session, _) = try metricsSession(factory)
        await #expect(throws: TransferError.self) { _ = try await session.data(for: Request(url: url)) }
        let counters = factory.counters(label: Label.requests)
        #expect(counters.count == 1)
        let dimensions = counters.first?.dimensions ?? []
        #expect(dimensions.contains { $0 == (Dimension.errorType, "cannotConnect") })
        #expect(dimensions.contains { $0 == (Dimension.method, "GET") })
        #expect(!dimensions.contains { $0.0 == Dimension.serverAddress })
    }

    @Test("task-path requests (POST with a body) are counted, with bytes sent and per-host dimensions when asked")
    func taskPathPerHost() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let factory = TestMetrics()
        let (session, _) = try metricsSession(factory, options: .init(perHostDimensions: true, sessionLabel: "api"))
        var request = Request(url: server.url("/upload"), method: .post)
        request.body = .data(Data(repeating: 7, count: 512))
        #expect(!session.takesFastPath(request))
        _ = try await session.data(for: request)
        let dimensions = [(Dimension.session, "api"), (Dimension.method, "POST"),
                          (Dimension.serverAddress, "127.0.0.1"), (Dimension.serverPort, String(server.port)),
                          (Dimension.statusCode, "200"), (Dimension.statusClass, "2xx")]
        #expect(try factory.expectCounter(Label.requests, dimensions).totalValue == 1)
        #expect(try factory.expectRecorder(Label.requestBodySize, dimensions).values == [512])
    }

    @Test("batches on the fast path are counted once per request")
    func batch() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let factory = TestMetrics()
        let (session, _) = try metricsSession(factory)
        let requests = (0..<20).map { _ in Request(url: server.url("/bytes/10")) }
        let results = await session.data(for: requests, maxConcurrentRequests: 4)
        #expect(results.allSatisfy { (try? $0.get()) != nil })
        let ok = [(Dimension.method, "GET"), (Dimension.statusCode, "200"), (Dimension.statusClass, "2xx")]
        #expect(try factory.expectCounter(Label.requests, ok).totalValue == 20)
    }

    @Test("pool gauges: open connections, active and idle, and queued requests")
    func poolGauges() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let factory = TestMetrics()
        let (session, metrics) = try metricsSession(factory, options: .init(sessionLabel: "pool"))
        _ = try await session.data(for: Request(url: server.url("/bytes/10")))
        // Keep-alive: the connection stays open, idle, once the request is done.
        try await Wait.until("the engine counts the finished transfer out", timeout: .seconds(10)) {
            session.connectionPoolStatistics.activeTransfers == 0
        }
        let stats = session.connectionPoolStatistics
        #expect(stats.openConnections == 1)
        #expect(stats.idleConnections == 1)
        #expect(stats.connectionsInUse == 0)
        #expect(stats.queuedTransfers == 0)
        metrics.recordPool(of: session)
        let idle = try factory.expectGauge(Label.openConnections,
                                           [(Dimension.session, "pool"), (Dimension.connectionState, "idle")])
        #expect(idle.lastValue == 1)
        let active = try factory.expectGauge(Label.openConnections,
                                             [(Dimension.session, "pool"), (Dimension.connectionState, "active")])
        #expect(active.lastValue == 0)
        #expect(try factory.expectGauge(Label.queuedRequests, [(Dimension.session, "pool")]).lastValue == 0)

        // A request held mid-body by the server: its connection is in use.
        let held = Task { try await session.data(for: Request(url: server.url("/hold/1000?gate=pool"))) }
        try await Wait.until("the server holds the response", timeout: .seconds(10)) { server.heldAtGate("pool") == 1 }
        let running = session.connectionPoolStatistics
        #expect(running.connectionsInUse == 1)
        #expect(running.openConnections == 1)
        metrics.recordPool(of: session)
        #expect(active.lastValue == 1)
        #expect(idle.lastValue == 0)
        server.openGate("pool")
        _ = try await held.value
    }
}
