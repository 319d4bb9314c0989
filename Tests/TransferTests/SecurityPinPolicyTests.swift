import Foundation
import Testing
import TestSupport

@testable import Transfer

/// A syntactically valid pin that matches nothing in the test PKI.
let unrelatedPin = Data(repeating: 7, count: 32).base64EncodedString()

@Suite("Per-host pin policies")
struct SecurityPinPolicyTests {
    func policy(_ rules: [HostPinPolicy], validatesDomainName: Bool = true) -> SecurityPolicy {
        var policy = SecurityPolicy.defaultPolicy
        policy.validatesDomainName = validatesDomainName
        policy.pinPolicy = PinPolicy(rules: rules)
        return policy
    }

    @Test("an enforced rule accepts a chain holding a pinned key and refuses one without")
    func enforced() throws {
        let pki = try PKI.make()
        let good = HostPinPolicy(host: "localhost", publicKeyHashes: [pki.intermediate.publicKeySHA256, unrelatedPin])
        let bad = HostPinPolicy(host: "localhost", publicKeyHashes: [pki.otherRoot.publicKeySHA256, unrelatedPin])

        #expect(policy([good]).evaluate(serverTrust: pki.trust(pki.leaf), forDomain: "localhost") == .valid)
        #expect(isNoPin(policy([bad]).evaluate(serverTrust: pki.trust(pki.leaf), forDomain: "localhost")))
    }

    @Test("a pin on the root matches through the validated chain even when the server does not send the root")
    func rootPinThroughValidatedChain() throws {
        let pki = try PKI.make()
        let rule = HostPinPolicy(host: "localhost", publicKeyHashes: [pki.root.publicKeySHA256, unrelatedPin])

        #expect(policy([rule]).evaluate(serverTrust: pki.trust(pki.leaf), forDomain: "localhost") == .valid)
    }

    @Test("certificate pins in a rule match the chain")
    func certificatePins() throws {
        let pki = try PKI.make()
        let rule = HostPinPolicy(host: "localhost", certificates: [pki.intermediate, pki.otherRoot])

        #expect(policy([rule]).evaluate(serverTrust: pki.trust(pki.rotated), forDomain: "localhost") == .valid)
        let wrong = HostPinPolicy(host: "localhost", certificates: [pki.leaf, pki.otherRoot])
        #expect(isNoPin(policy([wrong]).evaluate(serverTrust: pki.trust(pki.rotated), forDomain: "localhost")))
    }

    @Test("a report-only rule lets a mismatching chain through")
    func reportOnly() throws {
        let pki = try PKI.make()
        let rule = HostPinPolicy(host: "localhost", publicKeyHashes: [unrelatedPin], enforcement: .reportOnly)

        #expect(policy([rule]).evaluate(serverTrust: pki.trust(pki.leaf), forDomain: "localhost") == .valid)
    }

    @Test("an expired rule no longer applies")
    func expiration() throws {
        let pki = try PKI.make()
        let beforeEvaluation = CertificateFactory.evaluationDate.addingTimeInterval(-86_400)
        let afterEvaluation = CertificateFactory.evaluationDate.addingTimeInterval(86_400)
        let expired = HostPinPolicy(host: "localhost", publicKeyHashes: [unrelatedPin, unrelatedPin.uppercased()],
                                    expiration: beforeEvaluation)
        let current = HostPinPolicy(host: "localhost", publicKeyHashes: [unrelatedPin, unrelatedPin.uppercased()],
                                    expiration: afterEvaluation)

        #expect(policy([expired]).evaluate(serverTrust: pki.trust(pki.leaf), forDomain: "localhost") == .valid)
        #expect(isNoPin(policy([current]).evaluate(serverTrust: pki.trust(pki.leaf), forDomain: "localhost")))
    }

    @Test("host patterns: exact, one-label wildcard, include subdomains, exclusions")
    func patterns() throws {
        let pki = try PKI.make()
        let pins = [pki.otherRoot.publicKeySHA256, unrelatedPin]  // never match: a hit shows as noPinMatched
        func applies(_ rule: HostPinPolicy, _ host: String) -> Bool {
            isNoPin(policy([rule], validatesDomainName: false).evaluate(serverTrust: pki.trust(pki.leaf),
                                                                        forDomain: host))
        }
        let exact = HostPinPolicy(host: "pin.test", publicKeyHashes: pins)
        let subdomains = HostPinPolicy(host: "pin.test", includeSubdomains: true, publicKeyHashes: pins)
        let wildcard = HostPinPolicy(host: "*.pin.test", publicKeyHashes: pins)
        let deepWildcard = HostPinPolicy(host: "*.pin.test", includeSubdomains: true, publicKeyHashes: pins)
        let excluding = HostPinPolicy(patterns: ["*.pin.test"], exclusions: ["status.pin.test"], publicKeyHashes: pins)

        #expect(applies(exact, "pin.test"))
        #expect(applies(exact, "PIN.test."))
        #expect(!applies(exact, "api.pin.test"))
        #expect(applies(subdomains, "a.b.pin.test"))
        #expect(!applies(subdomains, "notpin.test"))
        #expect(applies(wildcard, "api.pin.test"))
        #expect(!applies(wildcard, "pin.test"))
        #expect(!applies(wildcard, "a.b.pin.test"))
        #expect(applies(deepWildcard, "a.b.pin.test"))
        #expect(applies(excluding, "api.pin.test"))
        #expect(!applies(excluding, "status.pin.test"))
    }

    @Test("the most specific matching rule wins, in any order (issue 11 item 5)")
    func mostSpecificRuleWins() throws {
        let pki = try PKI.make()
        let specific = HostPinPolicy(host: "api.pin.test", publicKeyHashes: [pki.root.publicKeySHA256, unrelatedPin])
        let broad = HostPinPolicy(host: "*.pin.test", publicKeyHashes: [pki.otherRoot.publicKeySHA256, unrelatedPin])

        #expect(policy([specific, broad]).evaluate(serverTrust: pki.trust(pki.leaf), forDomain: "api.pin.test") == .valid)
        #expect(policy([broad, specific]).evaluate(serverTrust: pki.trust(pki.leaf), forDomain: "api.pin.test") == .valid)
        #expect(isNoPin(policy([specific, broad]).evaluate(serverTrust: pki.trust(pki.leaf), forDomain: "www.pin.test")))
    }

    @Test("an enforced rule with a single pin is a configuration error; report-only may have one")
    func backupPinRequired() throws {
        let pki = try PKI.make()
        let single = HostPinPolicy(host: "localhost", publicKeyHashes: [pki.root.publicKeySHA256])

        #expect(throws: TransferError.self) { try single.validate() }
        do {
            try single.validate()
        } catch {
            #expect(error.code == .invalidRequest)
            #expect(error.message.contains("at least two pins"))
        }
        var whole = SecurityPolicy.defaultPolicy
        whole.pinPolicy = PinPolicy(rules: [single])
        #expect(throws: TransferError.self) { try whole.validate() }
        whole.pinnedPublicKeyHashes = ["nope"]
        whole.pinPolicy = nil
        #expect(throws: TransferError.self) { try whole.validate() }
        var reportOnly = single
        reportOnly.enforcement = .reportOnly
        try reportOnly.validate()
        #expect(isPolicyInvalid(policy([single]).evaluate(serverTrust: pki.trust(pki.leaf), forDomain: "localhost")))
    }

    @Test("malformed pins and patterns are refused with a message")
    func malformed() {
        let cases: [HostPinPolicy] = [
            HostPinPolicy(host: "localhost", publicKeyHashes: ["not base64", unrelatedPin]),
            HostPinPolicy(host: "localhost", publicKeyHashes: [Data(count: 20).base64EncodedString(), unrelatedPin]),
            HostPinPolicy(host: "a..b", publicKeyHashes: [unrelatedPin, unrelatedPin]),
            HostPinPolicy(host: "api.*.test", publicKeyHashes: [unrelatedPin, unrelatedPin]),
            HostPinPolicy(host: "", publicKeyHashes: [unrelatedPin, unrelatedPin]),
            HostPinPolicy(patterns: [], publicKeyHashes: [unrelatedPin, unrelatedPin]),
        ]
        for rule in cases {
            #expect(throws: TransferError.self, "\(rule.patterns)") { try rule.validate() }
        }
    }

    @Test("sha256// prefixed pins are accepted")
    func curlStylePins() throws {
        let pki = try PKI.make()
        let rule = HostPinPolicy(host: "localhost",
                                 publicKeyHashes: ["sha256//" + pki.intermediate.publicKeySHA256, unrelatedPin])

        try rule.validate()
        #expect(policy([rule]).evaluate(serverTrust: pki.trust(pki.leaf), forDomain: "localhost") == .valid)
    }

    @Test("a pin report serialises to HPKP-shaped JSON")
    func reportJSON() throws {
        let pki = try PKI.make()
        let report = PinFailureReport(host: "api.pin.test", port: 443, pattern: "*.pin.test",
                                      chain: [pki.leaf, pki.intermediate], pins: [unrelatedPin],
                                      date: Date(timeIntervalSince1970: 0), expiration: nil, enforced: false)

        let object = try JSONSerialization.jsonObject(with: report.jsonData()) as? [String: Any]

        #expect(object?["hostname"] as? String == "api.pin.test")
        #expect(object?["port"] as? Int == 443)
        #expect((object?["served-certificate-chain"] as? [String])?.count == 2)
        #expect(object?["known-pins"] as? [String] == ["pin-sha256=\"\(unrelatedPin)\""])
        #expect(object?["date-time"] as? String == "1970-01-01T00:00:00Z")
    }
}

@Suite("Certificates and loaders")
struct SecurityCertificateTests {
    @Test("the SPKI pin equals the one the openssl command line computes")
    func spkiMatchesOpenSSL() throws {
        let pki = try PKI.make()
        let dir = pki.factory.directory
        let pub = dir.appendingPathComponent("leaf-spki-\(UUID().uuidString).der")
        try CertificateFactory.openssl(["x509", "-in", pki.factory.leaf.certificateFile.path, "-pubkey", "-noout",
                                        "-out", pub.path + ".pem"])
        try CertificateFactory.openssl(["pkey", "-pubin", "-in", pub.path + ".pem", "-outform", "DER", "-out", pub.path])
        let digest = try CertificateFactory.openssl(["dgst", "-sha256", "-binary", "-out", pub.path + ".sha", pub.path])
        _ = digest
        let expected = try Data(contentsOf: URL(fileURLWithPath: pub.path + ".sha")).base64EncodedString()

        #expect(pki.leaf.publicKeySHA256 == expected)
        #expect(pki.rotated.publicKeySHA256 != expected)
    }

    @Test("subject, issuer, dates and flags are read from the certificate")
    func info() throws {
        let pki = try PKI.make()

        #expect(pki.leaf.subject.contains("CN=localhost"))
        #expect(pki.leaf.issuer.contains("CN=Transfer Test Intermediate"))
        #expect(pki.expired.notAfter == Date(timeIntervalSince1970: 1_609_459_200))  // 2021-01-01
        #expect(pki.root.isCertificateAuthority && pki.root.isSelfSigned)
        #expect(!pki.leaf.isCertificateAuthority && !pki.leaf.isSelfSigned)
        #expect(pki.selfSigned.isSelfSigned)
    }

    @Test("PEM bundles, DER files and directories load; garbage is refused")
    func loaders() throws {
        let pki = try PKI.make()
        let chainFile = try pki.factory.serverChainFile(for: pki.factory.leaf)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pins-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try pki.root.derData.write(to: dir.appendingPathComponent("root.cer"))
        try Data(contentsOf: chainFile).write(to: dir.appendingPathComponent("chain.pem"))
        try Data("ignored".utf8).write(to: dir.appendingPathComponent("notes.txt"))

        let bundle = try SecurityPolicy.certificates(fromPEM: Data(contentsOf: chainFile))
        let fromDirectory = try SecurityPolicy.certificates(inDirectory: dir)

        #expect(bundle == [pki.leaf, pki.intermediate])
        #expect(fromDirectory == [pki.root, pki.leaf, pki.intermediate])
        #expect(throws: TransferError.self) { try Certificate(derData: Data("nope".utf8)) }
        #expect(throws: TransferError.self) { try Certificate(derData: pki.leaf.derData + Data([0])) }
        #expect(throws: TransferError.self) { try SecurityPolicy.certificates(fromPEM: Data("-----BEGIN X-----".utf8)) }
        #expect(throws: TransferError.self) {
            try SecurityPolicy.certificates(inDirectory: dir.appendingPathComponent("missing"))
        }
    }

    @Test("anchors load from a PEM file, and a missing file is an error")
    func anchorsFromFile() throws {
        let pki = try PKI.make()
        let anchors = try TrustAnchors(pemFile: pki.factory.root.certificateFile)
        let trust = ServerTrust(certificates: [pki.leaf, pki.intermediate],
                                evaluationDate: CertificateFactory.evaluationDate, anchors: anchors)

        #expect(SecurityPolicy.defaultPolicy.evaluate(serverTrust: trust, forDomain: "localhost") == .valid)
        #expect(throws: TransferError.self) {
            try TrustAnchors(pemFile: URL(fileURLWithPath: "/nonexistent/ca.pem"))
        }
    }

    @Test("a client certificate needs a readable certificate and a PEM key")
    func clientCertificate() throws {
        let pki = try PKI.make()
        let client = try ClientCertificate(certificateFile: pki.factory.leaf.certificateFile,
                                           keyFile: pki.factory.leaf.keyFile)

        #expect(client.certificate == pki.leaf)
        #expect(throws: TransferError.self) {
            try ClientCertificate(certificateFile: pki.factory.leaf.keyFile, keyFile: pki.factory.leaf.keyFile)
        }
        #expect(throws: TransferError.self) {
            try ClientCertificate(certificateFile: pki.factory.leaf.certificateFile,
                                  keyFile: pki.factory.leaf.certificateFile)
        }
        #expect(throws: TransferError.self) {
            try ClientCertificate(certificateFile: URL(fileURLWithPath: "/nonexistent.pem"),
                                  keyFile: pki.factory.leaf.keyFile)
        }
    }
}

@Suite("Trust failure reasons on TransferError")
struct SecurityTransferErrorTests {
    @Test("the engine's reason and verify error turn back into a TrustEvaluation")
    func mapping() {
        var expired = TransferError(.tlsFailure, "certificate has expired", url: URL(string: "https://example.test/x"))
        expired.tlsReason = 1
        expired.verifyError = 10
        var host = TransferError(.tlsFailure, "mismatch", url: URL(string: "https://example.test/x"))
        host.tlsReason = 2
        var rejected = TransferError(.serverTrustRejected, "refused")
        rejected.tlsReason = 5
        let unrelated = TransferError(.timedOut, "slow")

        #expect(chainKind(expired.trustEvaluation ?? .valid) == .expired)
        #expect(host.trustEvaluation == .hostnameMismatch(host: "example.test"))
        #expect(rejected.trustFailureReason == .rejectedByDelegate)
        #expect(rejected.trustEvaluation == .rejectedByChallengeHandler)
        #expect(unrelated.trustEvaluation == nil)
        #expect(TrustEvaluation.noPinMatched(reason: "x").reasonCode == 3)
    }
}
