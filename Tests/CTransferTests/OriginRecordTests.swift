import CTransfer
import Foundation
import TestSupport
import Testing

/// The per-origin records of the connection limit (ct_origin.c): one kept idle after its last
/// transfer is found again by the next request to its origin instead of being freed and
/// allocated per request, and however many origins a loop sees it keeps at most
/// `CT_ORIGIN_IDLE_MAX` of them idle.
@Suite("Per-origin records of the connection limit", .serialized)
struct OriginRecordTests {
    /// Runs one GET of `path` on `server` as host `host` (resolved to the server) to its end.
    private func get(_ harness: PhaseHarness, _ server: TestServer, host: String, _ path: String) throws
        -> PhaseOutcome
    {
        let id = try harness.submit("http://\(host):\(server.port)\(path)") { spec, strings in
            spec.resolve = strings.array(["\(host):\(server.port):127.0.0.1"])
            spec.resolve_count = 1
        }
        let outcome = try harness.waitForFinish(id)
        // DONE comes after the transfer left its origin.
        try harness.waitForPhase(id, CT_PHASE_DONE)
        return outcome
    }

    private func stats(_ harness: PhaseHarness) -> ct_origin_stats {
        var stats = ct_origin_stats()
        ct_loop_origin_stats(harness.loop, &stats)
        return stats
    }

    @Test("one request at a time to an origin reuses its idle record")
    func idleRecordReused() throws {
        let server = try TestServer.start()
        defer { _ = server.stop() }
        let harness = try PhaseHarness(maxConnectionsPerHost: 2)
        defer { harness.destroy() }

        for index in 0..<20 {
            let outcome = try get(harness, server, host: "one.test", "/bytes/64?seed=\(index)")
            #expect(outcome.code == CT_OK)
            #expect(outcome.body == TestServer.bytes(seed: UInt64(index), count: 64))
            let now = stats(harness)
            #expect(now.records == 1 && now.idle == 1, "after request \(index): \(now)")
        }
        #expect(stats(harness).allocated == 1)
    }

    @Test("requests alternating between two origins find both records without making more")
    func alternatingOrigins() throws {
        let server = try TestServer.start()
        defer { _ = server.stop() }
        let harness = try PhaseHarness(maxConnectionsPerHost: 2)
        defer { harness.destroy() }

        for index in 0..<12 {
            let host = index % 2 == 0 ? "one.test" : "two.test"
            let outcome = try get(harness, server, host: host, "/bytes/32?seed=\(index)")
            #expect(outcome.code == CT_OK)
            #expect(outcome.body == TestServer.bytes(seed: UInt64(index), count: 32))
        }
        let now = stats(harness)
        #expect(now.allocated == 2 && now.records == 2 && now.idle == 2, "\(now)")
    }

    @Test("a URL that only begins like the last origin's (then its user part ends) counts in its own origin")
    func lookalikeBeginning() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let harness = try PhaseHarness(maxConnectionsPerHost: 1)
        defer { harness.destroy() }
        let port = server.port
        let resolve = ["a.test:\(port):127.0.0.1", "b.test:\(port):127.0.0.1"]

        // a.test's one connection is taken until the test ends.
        let held = try harness.submit("http://a.test:\(port)/hold/100000?gate=lookalike") { spec, strings in
            spec.resolve = strings.array(resolve)
            spec.resolve_count = 2
        }
        try await Wait.until("the request held at the gate", timeout: .seconds(10)) {
            server.heldAtGate("lookalike") == 1
        }
        // Begins with "http://a.test:PORT" byte for byte, but that is the
        // user part: the host is b.test, whose limit is free. Counted in
        // a.test's origin, it would wait behind the held request.
        let other = try harness.submit("http://a.test:\(port)@b.test:\(port)/bytes/16?seed=5") { spec, strings in
            spec.resolve = strings.array(resolve)
            spec.resolve_count = 2
        }
        let outcome = try harness.waitForFinish(other, timeout: .seconds(10))

        #expect(outcome.code == CT_OK)
        #expect(outcome.body == TestServer.bytes(seed: 5, count: 16))
        #expect(stats(harness).records == 2)
        #expect(harness.results(held).isEmpty)
    }

    @Test("after many distinct origins at most CT_ORIGIN_IDLE_MAX records stay, the most recently used")
    func idleRecordsBounded() throws {
        let server = try TestServer.start()
        defer { _ = server.stop() }
        let harness = try PhaseHarness(maxConnectionsPerHost: 1)
        defer { harness.destroy() }
        let bound = Int64(CT_ORIGIN_IDLE_MAX)
        let origins = Int(bound) + 16

        for index in 0..<origins {
            let outcome = try get(harness, server, host: "o\(index).test", "/bytes/16?seed=\(index)")
            #expect(outcome.code == CT_OK)
            let now = stats(harness)
            let kept = min(Int64(index + 1), bound)
            #expect(now.records == kept && now.idle == kept, "after origin \(index): \(now)")
        }
        #expect(stats(harness).allocated == Int64(origins))

        // The newest idle record is found again; the oldest was freed and is made anew.
        #expect(try get(harness, server, host: "o\(origins - 1).test", "/bytes/16?seed=1").code == CT_OK)
        #expect(stats(harness).allocated == Int64(origins))
        #expect(try get(harness, server, host: "o0.test", "/bytes/16?seed=2").code == CT_OK)
        let last = stats(harness)
        #expect(last.allocated == Int64(origins) + 1)
        #expect(last.records == bound && last.idle == bound)
    }
}
