import Foundation
import TestSupport
import Testing
import Transfer

/// Issue 12, item 3: a server-trust challenge hook that does not answer must
/// not stall the other transfers of its session for ever. The handshake waits
/// at most `serverTrustChallengeTimeout`, then refuses the server (fail closed).
@Suite("Off the loop: the server-trust challenge hook is bounded", .serialized)
struct OffLoopTrustChallengeTests {
    /// A private nginx: these handshakes must not disturb suites that count the
    /// shared instance's requests.
    private static let privateNginx = Result { try NginxFixture.start() }

    @Test("a hook that never answers: a plain GET of the same session completes, then the handshake fails closed")
    func blockedHookDoesNotStallTheSession() async throws {
        let nginx = try Self.privateNginx.get()
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try makeSession {
            $0.caFile = nginx.caFile
            $0.serverTrustChallengeTimeout = 0.5
        }
        let gate = Latch()
        let entered = Locked(false)
        let returned = Locked(false)
        // The hook runs on the delegate queue and blocks until the test opens
        // the gate, long after the bound.
        session.hooks.sessionDidReceiveChallenge = { _, _ in
            entered.withLock { $0 = true }
            gate.wait()
            returned.withLock { $0 = true }
            return .useCredential(Credential(user: "late", password: "answer"))
        }
        defer {
            gate.open()
            session.invalidateAndCancel()
        }

        let tlsResult = Locked<TransferError??>(nil)
        let tls = session.dataTask(with: Request(url: nginx.url(.https, "/"), headers: ["Connection": "close"])) {
            _, _, error in tlsResult.withLock { $0 = .some(error) }
        }
        tls.resume()
        try await Wait.until("the challenge hook runs", timeout: .seconds(30)) { entered.withLock { $0 } }

        // The hook is blocked and so is the delegate queue: watch the GET in the
        // engine's own counters, which the engine thread writes directly.
        let getResult = Locked<(Data?, TransferError?)?>(nil)
        let get = session.dataTask(with: Request(url: server.url("/bytes/1024"))) { _, data, error in
            getResult.withLock { $0 = (data, error) }
        }
        get.resume()
        try await Wait.until("the 1 KiB GET is received while the hook still blocks", timeout: .seconds(30)) {
            get.countOfBytesReceived == 1024
        }
        #expect(returned.withLock { $0 } == false)   // the order: GET done, hook still blocked

        gate.open()
        try await Wait.until("both tasks complete", timeout: .seconds(30)) {
            tlsResult.withLock { $0 != nil } && getResult.withLock { $0 != nil }
        }
        let tlsError = try #require(tlsResult.withLock { $0 } ?? nil)
        #expect(tlsError.code == .serverTrustRejected)
        #expect(tlsError.trustFailureReason == .challengeTimedOut)
        #expect(tlsError.message.contains("no answer in time"))
        let (data, error) = try #require(getResult.withLock { $0 })
        #expect(error == nil)
        #expect(data == TestServer.bytes(seed: 0, count: 1024))
    }

    @Test("a hook that answers within the bound still decides the handshake")
    func promptHookStillDecides() async throws {
        let nginx = try Self.privateNginx.get()
        let session = try makeSession {
            $0.caFile = nginx.caFile
            $0.serverTrustChallengeTimeout = 30
        }
        defer { session.invalidateAndCancel() }
        session.hooks.sessionDidReceiveChallenge = { _, _ in .cancelAuthenticationChallenge }
        await #expect {
            try await session.data(for: Request(url: nginx.url(.https, "/"), headers: ["Connection": "close"]))
        } throws: { error in
            guard let error = error as? TransferError else { return false }
            return error.code == .serverTrustRejected && error.trustFailureReason == .rejectedByDelegate
        }
    }
}

/// A gate that stays open once opened (every waiter passes).
private final class Latch: @unchecked Sendable {
    private let condition = NSCondition()
    private var isOpen = false

    func open() {
        condition.withLock {
            isOpen = true
            condition.broadcast()
        }
    }

    func wait() {
        condition.withLock {
            while !isOpen { condition.wait() }
        }
    }
}
