import Foundation
import Testing
import TestSupport

@testable import Transfer

/// Fixtures shared by the security tests: the throwaway PKI as `Certificate`s, anchored at its root.
struct PKI {
    let factory: CertificateFactory
    let root, intermediate, leaf, rotated, expired, future, wrongHost, selfSigned, otherRoot, otherLeaf: Certificate
    let anchors: TrustAnchors

    static func make() throws -> PKI {
        let f = try CertificateFactory.shared()
        func c(_ t: TestCertificate) throws -> Certificate { try Certificate(derData: t.der) }
        let root = try c(f.root)
        return PKI(factory: f, root: root, intermediate: try c(f.intermediate), leaf: try c(f.leaf),
                   rotated: try c(f.rotatedLeaf), expired: try c(f.expiredLeaf), future: try c(f.notYetValidLeaf),
                   wrongHost: try c(f.wrongHostLeaf), selfSigned: try c(f.selfSigned), otherRoot: try c(f.otherRoot),
                   otherLeaf: try c(f.otherLeaf), anchors: try TrustAnchors(certificates: [root]))
    }

    /// `leaf` + intermediate, evaluated at the fixed date against the test root.
    func trust(_ leaf: Certificate, intermediate withIntermediate: Bool = true,
               date: Date? = CertificateFactory.evaluationDate) -> ServerTrust {
        ServerTrust(certificates: withIntermediate ? [leaf, intermediate] : [leaf], host: "localhost",
                    evaluationDate: date, anchors: anchors)
    }
}

func chainKind(_ evaluation: TrustEvaluation) -> ChainFailure.Kind? {
    if case .chainInvalid(let failure) = evaluation { return failure.kind }
    return nil
}

func isNoPin(_ evaluation: TrustEvaluation) -> Bool {
    if case .noPinMatched = evaluation { return true }
    return false
}

func isPolicyInvalid(_ evaluation: TrustEvaluation) -> Bool {
    if case .policyInvalid = evaluation { return true }
    return false
}

@Suite("SecurityPolicy without pinning")
struct SecurityPolicyNoPinningTests {
    @Test("a complete chain to a trusted root for the right host is valid")
    func validChain() throws {
        let pki = try PKI.make()

        let evaluation = SecurityPolicy.defaultPolicy.evaluate(serverTrust: pki.trust(pki.leaf), forDomain: "localhost")

        #expect(evaluation == .valid)
        #expect(SecurityPolicy.defaultPolicy.isTrusted(serverTrust: pki.trust(pki.leaf), forDomain: "LOCALHOST"))
    }

    @Test("an expired leaf is refused as expired, with OpenSSL's error code")
    func expired() throws {
        let pki = try PKI.make()

        let evaluation = SecurityPolicy.defaultPolicy.evaluate(serverTrust: pki.trust(pki.expired), forDomain: "localhost")

        guard case .chainInvalid(let failure) = evaluation else {
            Issue.record("expected chainInvalid, got \(evaluation)")
            return
        }
        #expect(failure.kind == .expired)
        #expect(failure.verifyError == 10)  // X509_V_ERR_CERT_HAS_EXPIRED
        #expect(failure.message.contains("expired"))
    }

    @Test("a leaf that is not yet valid is refused as not yet valid")
    func notYetValid() throws {
        let pki = try PKI.make()

        let evaluation = SecurityPolicy.defaultPolicy.evaluate(serverTrust: pki.trust(pki.future), forDomain: "localhost")

        #expect(chainKind(evaluation) == .notYetValid)
    }

    @Test("the evaluation date decides validity: the valid leaf is expired in 2036 and unborn in 2023")
    func evaluationDateMatters() throws {
        let pki = try PKI.make()
        let policy = SecurityPolicy.defaultPolicy

        let later = policy.evaluate(serverTrust: pki.trust(pki.leaf, date: Date(timeIntervalSince1970: 2_082_758_400)),
                                    forDomain: "localhost")
        let earlier = policy.evaluate(serverTrust: pki.trust(pki.leaf, date: Date(timeIntervalSince1970: 1_672_531_200)),
                                      forDomain: "localhost")
        let now = policy.evaluate(serverTrust: pki.trust(pki.leaf, date: nil), forDomain: "localhost")

        #expect(chainKind(later) == .expired)
        #expect(chainKind(earlier) == .notYetValid)
        #expect(now == .valid)
    }

    @Test("a leaf for another name is a hostname mismatch, unless the domain is nil or not validated")
    func wrongHost() throws {
        let pki = try PKI.make()
        var lenient = SecurityPolicy.defaultPolicy
        lenient.validatesDomainName = false

        let strict = SecurityPolicy.defaultPolicy.evaluate(serverTrust: pki.trust(pki.wrongHost), forDomain: "localhost")
        let noDomain = SecurityPolicy.defaultPolicy.evaluate(serverTrust: pki.trust(pki.wrongHost), forDomain: nil)
        let notValidated = lenient.evaluate(serverTrust: pki.trust(pki.wrongHost), forDomain: "localhost")

        #expect(strict == .hostnameMismatch(host: "localhost"))
        #expect(noDomain == .valid)
        #expect(notValidated == .valid)
    }

    @Test("IP addresses are matched against IP subject alternative names")
    func ipAddresses() throws {
        let pki = try PKI.make()
        let policy = SecurityPolicy.defaultPolicy

        #expect(policy.evaluate(serverTrust: pki.trust(pki.leaf), forDomain: "127.0.0.1") == .valid)
        #expect(policy.evaluate(serverTrust: pki.trust(pki.leaf), forDomain: "::1") == .valid)
        #expect(policy.evaluate(serverTrust: pki.trust(pki.leaf), forDomain: "10.0.0.1")
            == .hostnameMismatch(host: "10.0.0.1"))
    }

    @Test("a wildcard name covers one label only")
    func wildcardNames() throws {
        let pki = try PKI.make()
        let policy = SecurityPolicy.defaultPolicy

        #expect(policy.evaluate(serverTrust: pki.trust(pki.leaf), forDomain: "api.pin.test") == .valid)
        #expect(policy.evaluate(serverTrust: pki.trust(pki.leaf), forDomain: "a.b.pin.test")
            == .hostnameMismatch(host: "a.b.pin.test"))
    }

    @Test("a self-signed leaf is refused as self-signed")
    func selfSigned() throws {
        let pki = try PKI.make()

        let evaluation = SecurityPolicy.defaultPolicy.evaluate(serverTrust: pki.trust(pki.selfSigned, intermediate: false),
                                                               forDomain: "localhost")

        #expect(chainKind(evaluation) == .selfSigned)
    }

    @Test("an incomplete chain (leaf without its intermediate) has an unknown issuer")
    func incompleteChain() throws {
        let pki = try PKI.make()

        let evaluation = SecurityPolicy.defaultPolicy.evaluate(serverTrust: pki.trust(pki.leaf, intermediate: false),
                                                               forDomain: "localhost")

        #expect(chainKind(evaluation) == .unknownIssuer)
    }

    @Test("a leaf from another CA is refused: unknown issuer, or an untrusted root when it is sent")
    func otherCA() throws {
        let pki = try PKI.make()
        let alone = ServerTrust(certificates: [pki.otherLeaf], evaluationDate: CertificateFactory.evaluationDate,
                                anchors: pki.anchors)
        let withRoot = ServerTrust(certificates: [pki.otherLeaf, pki.otherRoot],
                                   evaluationDate: CertificateFactory.evaluationDate, anchors: pki.anchors)

        #expect(chainKind(SecurityPolicy.defaultPolicy.evaluate(serverTrust: alone, forDomain: "localhost"))
            == .unknownIssuer)
        #expect(chainKind(SecurityPolicy.defaultPolicy.evaluate(serverTrust: withRoot, forDomain: "localhost"))
            == .selfSigned)
    }

    @Test("the system anchors do not trust the test root")
    func systemAnchors() throws {
        let pki = try PKI.make()
        let trust = ServerTrust(certificates: [pki.leaf, pki.intermediate], evaluationDate: CertificateFactory.evaluationDate)

        let evaluation = SecurityPolicy.defaultPolicy.evaluate(serverTrust: trust, forDomain: "localhost")

        #expect(chainKind(evaluation) == .unknownIssuer)
    }

    @Test("allowing invalid certificates while validating a domain without pins is refused")
    func allowInvalidWithDomainIsRefused() throws {
        let pki = try PKI.make()
        var policy = SecurityPolicy.defaultPolicy
        policy.allowInvalidCertificates = true

        let evaluation = policy.evaluate(serverTrust: pki.trust(pki.leaf), forDomain: "localhost")

        #expect(isPolicyInvalid(evaluation))
        #expect(policy.evaluate(serverTrust: pki.trust(pki.selfSigned), forDomain: nil) == .valid)
    }

    @Test("allowing invalid certificates without domain validation accepts anything")
    func allowInvalidAcceptsAnything() throws {
        let pki = try PKI.make()
        var policy = SecurityPolicy.defaultPolicy
        policy.allowInvalidCertificates = true
        policy.validatesDomainName = false

        for leaf in [pki.selfSigned, pki.expired, pki.wrongHost, pki.otherLeaf] {
            #expect(policy.evaluate(serverTrust: pki.trust(leaf, intermediate: false), forDomain: "localhost") == .valid)
        }
    }
}

@Suite("SecurityPolicy certificate pinning")
struct SecurityPolicyCertificatePinningTests {
    @Test("a pinned root, intermediate or leaf is enough, without any other anchor")
    func pinnedAtEveryDepth() throws {
        let pki = try PKI.make()
        let noAnchors = try TrustAnchors(certificates: [])

        for pinned in [pki.root, pki.intermediate, pki.leaf] {
            let policy = SecurityPolicy.policy(pinningMode: .certificate, pinnedCertificates: [pinned])
            var trust = pki.trust(pki.leaf)
            trust.anchors = noAnchors

            #expect(policy.evaluate(serverTrust: trust, forDomain: "localhost") == .valid, "pinned \(pinned.subject)")
        }
    }

    @Test("a pinned leaf works even when the server sends no intermediate")
    func pinnedLeafWithoutChain() throws {
        let pki = try PKI.make()
        let policy = SecurityPolicy.policy(pinningMode: .certificate, pinnedCertificates: [pki.leaf])

        #expect(policy.evaluate(serverTrust: pki.trust(pki.leaf, intermediate: false), forDomain: "localhost") == .valid)
    }

    @Test("a pinned self-signed certificate is trusted without allowing invalid certificates")
    func pinnedSelfSigned() throws {
        let pki = try PKI.make()
        let policy = SecurityPolicy.policy(pinningMode: .certificate, pinnedCertificates: [pki.selfSigned])

        #expect(policy.evaluate(serverTrust: pki.trust(pki.selfSigned, intermediate: false), forDomain: "localhost")
            == .valid)
    }

    @Test("a chain to another CA, or a rotated leaf when the old leaf is pinned, matches no pin")
    func foreignChains() throws {
        let pki = try PKI.make()
        let pinnedRoot = SecurityPolicy.policy(pinningMode: .certificate, pinnedCertificates: [pki.root])
        let pinnedLeaf = SecurityPolicy.policy(pinningMode: .certificate, pinnedCertificates: [pki.leaf])
        let other = ServerTrust(certificates: [pki.otherLeaf, pki.otherRoot],
                                evaluationDate: CertificateFactory.evaluationDate, anchors: pki.anchors)

        #expect(isNoPin(pinnedRoot.evaluate(serverTrust: other, forDomain: "localhost")))
        #expect(isNoPin(pinnedLeaf.evaluate(serverTrust: pki.trust(pki.rotated, intermediate: false),
                                            forDomain: "localhost")))
        #expect(isNoPin(SecurityPolicy.policy(pinningMode: .certificate)
            .evaluate(serverTrust: pki.trust(pki.leaf), forDomain: "localhost")))
    }

    @Test("pinning does not excuse an expired leaf or a wrong host name")
    func pinningStillValidates() throws {
        let pki = try PKI.make()
        let policy = SecurityPolicy.policy(pinningMode: .certificate, pinnedCertificates: [pki.root])

        #expect(chainKind(policy.evaluate(serverTrust: pki.trust(pki.expired), forDomain: "localhost")) == .expired)
        #expect(policy.evaluate(serverTrust: pki.trust(pki.wrongHost), forDomain: "localhost")
            == .hostnameMismatch(host: "localhost"))
        #expect(policy.evaluate(serverTrust: pki.trust(pki.wrongHost), forDomain: nil) == .valid)
    }

    @Test("allowing invalid certificates with pins and domain validation is a valid policy")
    func allowInvalidWithPins() throws {
        let pki = try PKI.make()
        var policy = SecurityPolicy.policy(pinningMode: .certificate, pinnedCertificates: [pki.selfSigned])
        policy.allowInvalidCertificates = true

        #expect(policy.evaluate(serverTrust: pki.trust(pki.selfSigned, intermediate: false), forDomain: "localhost")
            == .valid)
    }
}

@Suite("SecurityPolicy public-key pinning")
struct SecurityPolicyPublicKeyPinningTests {
    @Test("the pinned leaf key matches the leaf but not a leaf with a rotated key")
    func leafKey() throws {
        let pki = try PKI.make()
        let policy = SecurityPolicy.policy(pinningMode: .publicKey, pinnedCertificates: [pki.leaf])

        #expect(policy.evaluate(serverTrust: pki.trust(pki.leaf), forDomain: "localhost") == .valid)
        #expect(isNoPin(policy.evaluate(serverTrust: pki.trust(pki.rotated), forDomain: "localhost")))
    }

    @Test("a pinned intermediate key survives a leaf key rotation")
    func intermediateKey() throws {
        let pki = try PKI.make()
        let policy = SecurityPolicy.policy(pinningMode: .publicKey, pinnedCertificates: [pki.intermediate])

        #expect(policy.evaluate(serverTrust: pki.trust(pki.rotated), forDomain: "localhost") == .valid)
    }

    @Test("a key pinned by its SPKI hash alone matches")
    func spkiHash() throws {
        let pki = try PKI.make()
        var policy = SecurityPolicy.policy(pinningMode: .publicKey)
        policy.pinnedPublicKeyHashes = [pki.root.publicKeySHA256]

        #expect(policy.evaluate(serverTrust: pki.trust(pki.leaf), forDomain: "localhost") == .valid)
    }

    @Test("the chain is still validated unless invalid certificates are allowed")
    func validationThenPins() throws {
        let pki = try PKI.make()
        var policy = SecurityPolicy.policy(pinningMode: .publicKey, pinnedCertificates: [pki.intermediate])

        #expect(chainKind(policy.evaluate(serverTrust: pki.trust(pki.expired), forDomain: "localhost")) == .expired)
        policy.allowInvalidCertificates = true
        #expect(policy.evaluate(serverTrust: pki.trust(pki.expired), forDomain: "localhost") == .valid)
        #expect(isNoPin(policy.evaluate(serverTrust: pki.trust(pki.otherLeaf, intermediate: false),
                                         forDomain: "localhost")))
    }

    @Test("a self-signed server is accepted by its pinned key when invalid certificates are allowed")
    func selfSignedByKey() throws {
        let pki = try PKI.make()
        var policy = SecurityPolicy.policy(pinningMode: .publicKey, pinnedCertificates: [pki.selfSigned])
        let trust = pki.trust(pki.selfSigned, intermediate: false)

        #expect(chainKind(policy.evaluate(serverTrust: trust, forDomain: "localhost")) == .selfSigned)
        policy.allowInvalidCertificates = true
        #expect(policy.evaluate(serverTrust: trust, forDomain: "localhost") == .valid)
    }

    @Test("public-key mode without any pin refuses domain validation with invalid certificates allowed")
    func noPinsIsPolicyInvalid() throws {
        let pki = try PKI.make()
        var policy = SecurityPolicy.policy(pinningMode: .publicKey)
        policy.allowInvalidCertificates = true

        #expect(isPolicyInvalid(policy.evaluate(serverTrust: pki.trust(pki.leaf), forDomain: "localhost")))
    }
}
