import Foundation
import Synchronization
import TestSupport
import Testing
import Transfer

/// The session's SecurityPolicy enforced in real handshakes against nginx
/// (throwaway CA → intermediate → leaf for localhost / 127.0.0.1).
@Suite("Security policy in the session's handshakes", .serialized)
struct SecuritySessionTests {
    private func certificate(_ path: String) throws -> Certificate {
        let pem = try Data(contentsOf: URL(fileURLWithPath: path))
        guard let first = try SecurityPolicy.certificates(fromPEM: pem).first else {
            throw TransferError(.internalError, "no certificate in \(path)")
        }
        return first
    }

    @Test("public-key and certificate pins that match let the request through, over HTTP/1.1 and HTTP/2")
    func matchingPins() async throws {
        let nginx = try NginxFixture.shared()
        let session = try makeSession { $0.caFile = nginx.caFile }
        defer { session.invalidateAndCancel() }
        let leaf = try certificate(nginx.serverCertificateFile)
        let intermediate = try certificate(nginx.intermediateFile)
        let file = try nginx.ensureFile(size: 4096, seed: 11)

        var byKey = SecurityPolicy.policy(pinningMode: .publicKey)
        byKey.pinnedPublicKeyHashes = [leaf.publicKeySHA256]
        try session.setSecurityPolicy(byKey)
        for (listener, version) in [(NginxFixture.Listener.https, "1.1"), (.http2, "2")] {
            let (data, response) = try await session.data(for: Request(url: nginx.url(listener, file.path)))
            #expect(response.statusCode == 200)
            #expect(response.httpVersion == version)
            #expect(FileDigest.sha256(data) == file.sha256)
        }

        try session.setSecurityPolicy(.policy(pinningMode: .certificate, pinnedCertificates: [intermediate]))
        let (_, response) = try await session.data(for: Request(url: nginx.url(.http2, "/")))
        #expect(response.httpVersion == "2")
    }

    @Test("a pin that matches nothing refuses the server before any request is sent")
    func wrongPinIsRefused() async throws {
        let nginx = try NginxFixture.shared()
        let session = try makeSession { $0.caFile = nginx.caFile }
        defer { session.invalidateAndCancel() }
        // A connection made before the policy change must not be reused after it.
        _ = try await session.data(for: Request(url: nginx.url(.https, "/")))
        let requestsBefore = try nginx.status().requests

        var policy = SecurityPolicy.policy(pinningMode: .publicKey)
        policy.pinnedPublicKeyHashes = ["sha256//" + Data(repeating: 1, count: 32).base64EncodedString()]
        try session.setSecurityPolicy(policy)

        for listener in [NginxFixture.Listener.https, .http2] {
            await #expect { try await session.data(for: Request(url: nginx.url(listener, "/"))) }
                throws: { error in
                    guard let error = error as? TransferError else { return false }
                    return error.code == .serverTrustRejected
                }
        }
        // stub_status counts requests: the refused handshakes sent none (the
        // status request itself is the only new one).
        #expect(try nginx.status().requests == requestsBefore + 1)
    }

    @Test("an invalid policy is an error, assigning one fails closed, and AF's refused combination refuses")
    func invalidPolicy() async throws {
        let nginx = try NginxFixture.shared()
        let session = try makeSession { $0.caFile = nginx.caFile }
        defer { session.invalidateAndCancel() }
        var noBackupPin = SecurityPolicy.defaultPolicy
        noBackupPin.pinPolicy = PinPolicy(rules: [HostPinPolicy(host: "localhost", publicKeyHashes: [
            Data(repeating: 2, count: 32).base64EncodedString(),
        ])])

        #expect(throws: TransferError.self) { try session.setSecurityPolicy(noBackupPin) }
        session.securityPolicy = noBackupPin
        await #expect { try await session.data(for: Request(url: nginx.url(.https, "/"))) }
            throws: { ($0 as? TransferError)?.code == .serverTrustRejected }

        // AFSecurityPolicy: validating the domain while allowing invalid
        // certificates without pins is refused at evaluation.
        var refused = SecurityPolicy.defaultPolicy
        refused.allowInvalidCertificates = true
        refused.validatesDomainName = true
        try session.setSecurityPolicy(refused)
        await #expect { try await session.data(for: Request(url: nginx.url(.https, "/"))) }
            throws: { ($0 as? TransferError)?.code == .serverTrustRejected }
    }

    @Test("the challenge hook sees the server's chain and can trust an untrusted server or refuse a trusted one")
    func challengeHook() async throws {
        let nginx = try NginxFixture.shared()
        let session = try makeSession()   // system anchors: our CA is unknown to them
        defer { session.invalidateAndCancel() }
        let seen = Protected<[String]>([])
        session.hooks.sessionDidReceiveChallenge = { _, challenge in
            seen.withLock { $0.append("\(challenge.kind) \(challenge.serverTrust?.certificates.count ?? 0)") }
            return .useCredential(.serverTrust(challenge.serverTrust!))
        }

        let file = try nginx.ensureFile(size: 4096, seed: 12)
        let (data, response) = try await session.data(for: Request(url: nginx.url(.https, file.path)))
        #expect(response.statusCode == 200)
        #expect(FileDigest.sha256(data) == file.sha256)
        #expect(seen.withLock { $0.first } == "serverTrust 2")   // leaf + intermediate

        let trusting = try makeSession { $0.caFile = nginx.caFile }
        defer { trusting.invalidateAndCancel() }
        trusting.hooks.sessionDidReceiveChallenge = { _, _ in .cancelAuthenticationChallenge }
        await #expect { try await trusting.data(for: Request(url: nginx.url(.https, "/"))) }
            throws: { ($0 as? TransferError)?.code == .serverTrustRejected }
    }

    @Test("a report-only rule lets the connection through and POSTs one rate-limited JSON report")
    func reportOnlyPins() async throws {
        let nginx = try NginxFixture.shared()
        let collector = try await TestServer.start()
        defer { collector.stop() }
        let session = try makeSession { $0.caFile = nginx.caFile }
        defer { session.invalidateAndCancel() }
        let reports = Protected<[PinFailureReport]>([])
        var policy = SecurityPolicy.defaultPolicy
        let wrongPins = [Data(repeating: 3, count: 32).base64EncodedString(), Data(repeating: 4, count: 32).base64EncodedString()]
        policy.pinPolicy = PinPolicy(rules: [HostPinPolicy(patterns: ["localhost"], publicKeyHashes: wrongPins,
                                                           enforcement: .reportOnly)],
                                     reportURL: collector.url("/upload"),
                                     reportHandler: { report in reports.withLock { $0.append(report) } })
        try session.setSecurityPolicy(policy)

        let file = try nginx.ensureFile(size: 4096, seed: 13)
        for _ in 0..<2 {
            // Fresh connections: each handshake is checked (and reported) again.
            let fresh = Request(url: nginx.url(.https, file.path), headers: ["Connection": "close"])
            let (data, response) = try await session.data(for: fresh)
            #expect(response.statusCode == 200)
            #expect(FileDigest.sha256(data) == file.sha256)
        }

        #expect(await Wait.poll(timeout: .seconds(5)) { reports.withLock { $0.count } >= 1 })
        #expect(reports.withLock { $0.first?.enforced } == false)
        #expect(await Wait.poll(timeout: .seconds(5)) { collector.requests.contains { $0.path == "/upload" } })
        #expect(collector.requests.filter { $0.path == "/upload" && $0.method == "POST" }.count == 1)
    }
}
