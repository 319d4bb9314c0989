import CTransfer
import Foundation
import TestSupport
import Testing

/// curl's sockets in the loop's epoll set (ct_watch.c): a keep-alive connection stays in the
/// set between its transfers, and an idle one the server closes is taken out, not spun on.
@Suite("Sockets in the epoll set", .serialized)
struct EpollWatchTests {
    /// Runs one GET to its end on `harness`; returns its outcome.
    private func get(_ harness: PhaseHarness, _ url: String) throws -> PhaseOutcome {
        let id = try harness.submit(url)
        let outcome = try harness.waitForFinish(id)
        try harness.waitForPhase(id, CT_PHASE_DONE)
        return outcome
    }

    @Test("thirty GETs on one keep-alive connection register its socket once, not twice per request")
    func keepAliveStaysInTheSet() throws {
        let server = try TestServer.start()
        defer { _ = server.stop() }
        let harness = try PhaseHarness()
        defer { harness.destroy() }

        // The first transfer opens the connection and adds its socket.
        let first = try get(harness, server.url("/bytes/100?seed=0").absoluteString)
        #expect(first.code == CT_OK)
        let before = ct_loop_epoll_ctl_calls(harness.loop)
        for index in 1...30 {
            let outcome = try get(harness, server.url("/bytes/100?seed=\(index)").absoluteString)
            #expect(outcome.code == CT_OK)
            #expect(outcome.reusedConnection)
            #expect(outcome.body == TestServer.bytes(seed: UInt64(index), count: 100))
        }
        // Removed and added again per request, it was 60 calls.
        let calls = ct_loop_epoll_ctl_calls(harness.loop) - before
        #expect(calls <= 2, "\(calls) epoll_ctl calls for 30 requests")
        #expect(server.acceptedConnections == 1)
    }

    @Test("an idle connection the server closes leaves the set, and the next GET connects again")
    func closedIdleConnectionLeavesTheSet() throws {
        let server = try TestServer.start()
        defer { _ = server.stop() }
        let harness = try PhaseHarness()
        defer { harness.destroy() }

        let first = try get(harness, server.url("/bytes/64?seed=1").absoluteString)
        #expect(first.code == CT_OK)
        let before = ct_loop_epoll_ctl_calls(harness.loop)

        // When: the server closes the idle connection (its FIN makes the socket readable).
        server.closeOpenConnections()
        try Wait.until("the server to close the connection", timeout: .seconds(10)) {
            server.openConnections == 0
        }
        // Then: the loop takes the idle socket out of the set (one EPOLL_CTL_DEL), instead of
        // waking again and again for an event nobody reads.
        try Wait.until("the loop to drop the idle socket", timeout: .seconds(10)) {
            ct_loop_epoll_ctl_calls(harness.loop) == before + 1
        }
        let afterDrop = ct_loop_wakeups(harness.loop)

        // And the next GET finds the connection dead and opens a new one.
        let second = try get(harness, server.url("/bytes/64?seed=2").absoluteString)
        #expect(second.code == CT_OK)
        #expect(second.body == TestServer.bytes(seed: 2, count: 64))
        #expect(!second.reusedConnection)
        #expect(server.acceptedConnections == 2)
        #expect(ct_loop_wakeups(harness.loop) > afterDrop)
    }
}
