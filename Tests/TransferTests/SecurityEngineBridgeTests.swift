import CTransfer
import Foundation
import Synchronization
import Testing
import TestSupport

@testable import Transfer

/// The Swift → C bridge of SecurityPolicy (report and challenge trampolines), driven through a
/// real handshake with ct_trust_probe against `openssl s_server` on loopback.
/// (Uses sockets: move to TransferIntegrationTests if the unit target must stay socket-free.)
@Suite("SecurityPolicy in the engine's handshake")
struct SecurityEngineBridgeTests {
    func serve(_ cert: TestCertificate, chain: Bool = true) throws -> OpenSSLServer {
        let pki = try CertificateFactory.shared()
        return try OpenSSLServer(certificateFile: chain ? try pki.serverChainFile(for: cert) : cert.certificateFile,
                                 keyFile: cert.keyFile)
    }

    func probe(_ policy: EngineTrustPolicy, _ url: String, caFile: URL?) -> ct_trust_probe_result {
        var result = ct_trust_probe_result()
        _ = ct_trust_probe(policy.pointer, url, caFile?.path, 0, 0, 10_000, &result)
        return result
    }

    @Test("a certificate-pinning policy built in Swift admits the pinned server and refuses a rotated leaf")
    func pinningThroughBridge() throws {
        let pki = try PKI.make()
        let good = try serve(pki.factory.leaf)
        defer { good.stop() }
        let rotated = try serve(pki.factory.rotatedLeaf, chain: false)
        defer { rotated.stop() }
        let policy = try SecurityPolicy.policy(pinningMode: .certificate, pinnedCertificates: [pki.leaf])
            .makeEnginePolicy()

        #expect(probe(policy, good.url(), caFile: nil).code == CT_OK)
        let refused = probe(policy, rotated.url(), caFile: nil)
        #expect(refused.code == CT_E_SERVER_TRUST)
        let error = TransferError(.serverTrustRejected, "refused")
        var withReason = error
        withReason.tlsReason = refused.reason
        #expect(withReason.trustFailureReason == .noPinMatched)
    }

    @Test("report-only mismatches reach the Swift report handler on its queue, with the chain")
    func reportHandler() async throws {
        let pki = try PKI.make()
        let server = try serve(pki.factory.leaf)
        defer { server.stop() }
        let reports = Locked<[PinFailureReport]>([])
        let delivered = DispatchSemaphore(value: 0)
        var security = SecurityPolicy.defaultPolicy
        security.pinPolicy = PinPolicy(rules: [
            HostPinPolicy(host: "localhost", publicKeyHashes: [unrelatedPin], enforcement: .reportOnly)
        ]) { report in
            reports.withLock { $0.append(report) }
            delivered.signal()
        }
        let policy = try security.makeEnginePolicy()

        let result = probe(policy, server.url(), caFile: pki.factory.root.certificateFile)

        #expect(result.code == CT_OK)
        #expect(delivered.wait(timeout: .now() + 10) == .success)
        let report = try #require(reports.withLock { $0.first })
        #expect(report.host == "localhost")
        #expect(report.port == server.port)
        #expect(report.enforced == false)
        #expect(report.chain == [pki.leaf, pki.intermediate, pki.root])
        #expect(report.pins == [unrelatedPin])
    }

    @Test("the challenge handler sees the chain and the policy's verdict, and its answer decides")
    func challengeHandler() throws {
        let pki = try PKI.make()
        let server = try serve(pki.factory.selfSigned, chain: false)
        defer { server.stop() }
        let seen = Locked<[TrustEvaluation]>([])
        let trusting = try SecurityPolicy.defaultPolicy.makeEnginePolicy { trust, verdict in
            seen.withLock { $0.append(verdict) }
            return trust.leaf == pki.selfSigned ? .useCredential : .performDefaultHandling
        }
        let refusing = try SecurityPolicy.defaultPolicy.makeEnginePolicy { _, _ in .cancel }
        let deferring = try SecurityPolicy.defaultPolicy.makeEnginePolicy { _, _ in .performDefaultHandling }

        #expect(probe(trusting, server.url(), caFile: nil).code == CT_OK)
        #expect(probe(refusing, server.url(), caFile: nil).reason == Int32(CT_TLS_REJECTED_BY_DELEGATE.rawValue))
        #expect(probe(deferring, server.url(), caFile: nil).code == CT_E_TLS)
        let verdict = try #require(seen.withLock { $0.first })
        guard case .chainInvalid(let failure) = verdict else {
            Issue.record("expected chainInvalid, got \(verdict)")
            return
        }
        #expect(failure.kind == .selfSigned)
    }
}
