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
