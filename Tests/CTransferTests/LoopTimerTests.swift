import CTransfer
import Foundation
import TestSupport
import Testing

/// curl's timeout is epoll_wait's timeout (ct_loop.c, no timerfd): a transfer that only
/// waits on curl's timer, with no socket event and no command, must still be driven.
@Suite("curl's timer through epoll_wait", .serialized)
struct LoopTimerTests {
    @Test("a silent server: only curl's timer ends the transfer, as timed out")
    func timeoutWithoutEvents() throws {
        let server = try TestServer.start()
        defer { _ = server.stop() }
        let harness = try PhaseHarness()

        let id = try harness.submit(server.url("/stall-headers").absoluteString) { spec, _ in
            spec.timeout_ms = 300
        }
        let outcome = try harness.waitForFinish(id)
        #expect(outcome.code == CT_E_TIMED_OUT)
        harness.destroy()
    }

    @Test("many short transfers in a row each complete: no timeout is lost between them")
    func manyInARow() throws {
        let server = try TestServer.start()
        defer { _ = server.stop() }
        let harness = try PhaseHarness()
        for n in 0..<200 {
            let id = try harness.submit(server.url("/bytes/100?seed=\(n)").absoluteString)
            let outcome = try harness.waitForFinish(id)
            #expect(outcome.code == CT_OK)
            #expect(outcome.body == TestServer.bytes(seed: UInt64(n), count: 100))
        }
        harness.destroy()
    }
}
