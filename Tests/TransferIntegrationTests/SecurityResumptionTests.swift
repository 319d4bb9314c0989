import Foundation
import TestSupport
import Testing
import Transfer

/// Issue 14 item 3: TLS session resumption for repeat connections to the same host, under the
/// same trust rules. The server is `openssl s_server -www` (TLS 1.3, session tickets on), which
/// closes every connection after its answer, so each request is a new connection, and whose status
/// page says whether the session of that connection was `New` or `Reused`.
@Suite("TLS session resumption for repeat connections, within one trust policy", .serialized)
struct SecurityResumptionTests {
    private enum Handshake: Equatable { case new, reused }

    /// One request on a new connection; what the server says about the session.
    private func handshake(_ session: SessionManager, _ server: OpenSSLServer) async throws -> Handshake? {
        let (data, response) = try await session.data(for: Request(url: URL(string: server.url())!))
        #expect(response.statusCode == 200)
        let page = String(decoding: data, as: UTF8.self)
        if page.contains("\nNew, ") { return .new }
        if page.contains("\nReused, ") { return .reused }
        Issue.record("s_server's page names no session kind: \(page.prefix(300))")
        return nil
    }

    @Test("a second connection to the same host resumes; a new policy makes the next one a full handshake")
    func resumesUntilThePolicyChanges() async throws {
        let pki = try CertificateFactory.shared()
        let server = try OpenSSLServer(certificateFile: try pki.serverChainFile(for: pki.leaf),
                                       keyFile: pki.leaf.keyFile)
        defer { server.stop() }
        let session = try makeSession { $0.caFile = pki.root.certificateFile.path }
        defer { session.invalidateAndCancel() }

        #expect(try await handshake(session, server) == .new)
        #expect(try await handshake(session, server) == .reused)

        // A policy that still accepts the server: the session made under the old one is not
        // resumed (the handshake is verified again, pins included), the new session is.
        var pinned = SecurityPolicy.policy(pinningMode: .publicKey)
        pinned.pinnedPublicKeyHashes = [try Certificate(derData: pki.leaf.der).publicKeySHA256]
        try session.setSecurityPolicy(pinned)
        #expect(try await handshake(session, server) == .new)
        #expect(try await handshake(session, server) == .reused)
    }

    /// Issue 27 item 3: libcurl 7.88 sets SSL_OP_NO_TICKET on every SSL_CTX, so a TLS 1.2
    /// server that resumes only by session ticket (no session cache: nginx's default) made every
    /// reconnect a full handshake. The engine clears it; the ticket is kept under the same trust
    /// marker as a TLS 1.3 one.
    @Test("a TLS 1.2 server without a session cache resumes the second connection by ticket")
    func resumesByTicketOverTLS12() async throws {
        let pki = try CertificateFactory.shared()
        let server = try OpenSSLServer(certificateFile: try pki.serverChainFile(for: pki.leaf),
                                       keyFile: pki.leaf.keyFile, extraArguments: ["-tls1_2", "-no_cache"])
        defer { server.stop() }
        let session = try makeSession { $0.caFile = pki.root.certificateFile.path }
        defer { session.invalidateAndCancel() }

        #expect(try await handshake(session, server) == .new)
        #expect(try await handshake(session, server) == .reused)
    }

    @Test("a session resumed under an accepting policy is never resumed past a policy that rejects the server")
    func rejectingPolicyIsNotBypassedByResumption() async throws {
        let pki = try CertificateFactory.shared()
        let server = try OpenSSLServer(certificateFile: try pki.serverChainFile(for: pki.leaf),
                                       keyFile: pki.leaf.keyFile)
        defer { server.stop() }
        let session = try makeSession { $0.caFile = pki.root.certificateFile.path }
        defer { session.invalidateAndCancel() }

        #expect(try await handshake(session, server) == .new)
        #expect(try await handshake(session, server) == .reused)

        var rejecting = SecurityPolicy.policy(pinningMode: .publicKey)
        rejecting.pinnedPublicKeyHashes = ["sha256//" + Data(repeating: 9, count: 32).base64EncodedString()]
        try session.setSecurityPolicy(rejecting)
        do {
            let (_, response) = try await session.data(for: Request(url: URL(string: server.url())!))
            Issue.record("the server was accepted under a policy that pins another key: \(response.statusCode)")
        } catch {
            #expect((error as? TransferError)?.code == .serverTrustRejected, "\(error)")
        }
    }
}
