import Foundation
import TestSupport
import Testing
import Transfer

/// Issue 11 items 3 and 4 against nginx on random loopback ports (throwaway CA
/// → intermediate → leaf made by the fixture): an invalid policy stays
/// fail-closed whatever the hooks do, and a server-trust challenge is accepted
/// only by a credential made from that trust, never by a user/password.
@Suite("Security: server-trust challenges and invalid policies", .serialized)
struct SecurityChallengeTests {
    /// A private nginx (stopped at exit, like the shared one): these handshakes
    /// must not disturb suites that count the shared instance's requests.
    private static let privateNginx = Result { try NginxFixture.start() }

    private var nginx: NginxFixture {
        get throws { try Self.privateNginx.get() }
    }

    /// A policy that cannot be installed: an enforced host rule with one pin, no backup.
    private var invalidPolicy: SecurityPolicy {
        var policy = SecurityPolicy.defaultPolicy
        policy.pinPolicy = PinPolicy(rules: [HostPinPolicy(host: "localhost", publicKeyHashes: [
            Data(repeating: 2, count: 32).base64EncodedString(),
        ])])
        return policy
    }

    /// A fresh connection for every request, so each one is judged by a new handshake.
    private func fresh(_ url: URL) -> Request {
        Request(url: url, headers: ["Connection": "close"])
    }

    private func isRefusedTrust(_ error: any Error) -> Bool {
        guard let error = error as? TransferError else { return false }
        return error.code == .serverTrustRejected || error.code == .tlsFailure
    }

    @Test("after setSecurityPolicy threw, changing hooks does not bring the last valid policy back",
          arguments: [false, true])
    func invalidPolicyStaysClosedAcrossHookChanges(viaProperty: Bool) async throws {
        let nginx = try self.nginx
        let session = try makeSession { $0.caFile = nginx.caFile }
        defer { session.invalidateAndCancel() }
        let url = nginx.url(.https, try nginx.ensureFile(size: 1024, seed: 41).path)
        let (body, ok) = try await session.data(for: fresh(url))
        #expect(ok.statusCode == 200)
        #expect(body.count == 1024)   // the valid default policy trusts the fixture's CA

        if viaProperty {
            session.securityPolicy = invalidPolicy
        } else {
            #expect(throws: TransferError.self) { try session.setSecurityPolicy(invalidPolicy) }
        }
        // Adding, then removing, a challenge hook makes the session rebuild the
        // engine's policy twice.
        session.hooks.sessionDidReceiveChallenge = { _, _ in .performDefaultHandling }
        await #expect(throws: (any Error).self) { try await session.data(for: fresh(url)) }
        session.hooks.sessionDidReceiveChallenge = nil

        await #expect { try await session.data(for: fresh(url)) } throws: { error in
            (error as? TransferError)?.code == .serverTrustRejected
        }
        // A valid policy opens the session again.
        try session.setSecurityPolicy(.defaultPolicy)
        let (bodyAgain, again) = try await session.data(for: fresh(url))
        #expect(again.statusCode == 200)
        #expect(bodyAgain.count == 1024)
    }

    @Test("a 401-style hook answering every challenge with a password does not make an untrusted server acceptable")
    func passwordDoesNotAcceptUntrustedServer() async throws {
        let nginx = try self.nginx
        let session = try makeSession()   // system anchors: the fixture's CA is unknown to them
        defer { session.invalidateAndCancel() }
        let seen = Protected<[AuthenticationChallenge]>([])
        session.hooks.sessionDidReceiveChallenge = { _, challenge in
            seen.withLock { $0.append(challenge) }
            return .useCredential(Credential(user: "ann", password: "s3cret"))
        }
        let url = nginx.url(.https, "/")

        await #expect { try await session.data(for: fresh(url)) } throws: { isRefusedTrust($0) }

        let challenge = try #require(seen.withLock { $0.first })
        #expect(challenge.kind == .serverTrust)
        #expect(challenge.port == Int(nginx.httpsPort))
        #expect(challenge.port == url.port)
        #expect(challenge.policyVerdict?.isValid == false)
    }

    @Test("a credential made from the challenge's trust accepts the server; one from another chain does not")
    func trustCredentialAcceptsOnlyItsOwnChain() async throws {
        let nginx = try self.nginx
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        let ports = Protected<[Int]>([])
        session.hooks.sessionDidReceiveChallenge = { _, challenge in
            ports.withLock { $0.append(challenge.port) }
            guard let trust = challenge.serverTrust else { return .performDefaultHandling }
            return .useCredential(.serverTrust(trust))
        }

        let (body, response) = try await session.data(for: fresh(nginx.url(.http2, try nginx.ensureFile(size: 1024, seed: 42).path)))

        #expect(response.statusCode == 200)
        #expect(body.count == 1024)
        #expect(ports.withLock { $0.first } == Int(nginx.http2Port))

        // A trust credential for other certificates (here: the leaf alone, not
        // the leaf and intermediate the server sent) is the default handling.
        session.hooks.sessionDidReceiveChallenge = { _, challenge in
            guard let trust = challenge.serverTrust else { return .performDefaultHandling }
            return .useCredential(.serverTrust(ServerTrust(certificates: Array(trust.certificates.prefix(1)))))
        }
        await #expect { try await session.data(for: fresh(nginx.url(.https, "/"))) } throws: { isRefusedTrust($0) }
    }

    @Test("a trust credential answers no 401: the 401 is the result")
    func trustCredentialDoesNotAnswerBasic() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        session.hooks.taskDidReceiveChallenge = { _, _, _ in .useCredential(.serverTrust(ServerTrust(certificates: []))) }

        let (_, response) = try await session.data(for: Request(url: server.url("/basic-auth/ann/s3cret")))

        #expect(response.statusCode == 401)
        #expect(server.requests.filter { $0.path == "/basic-auth/ann/s3cret" }.count == 1)
    }
}
