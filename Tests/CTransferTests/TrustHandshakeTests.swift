import CTransfer
import Foundation
import Synchronization
import Testing
import TestSupport

/// Text of a fixed C char array (message fields).
func cText<T>(_ tuple: T) -> String {
    withUnsafeBytes(of: tuple) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
}

/// An owned `ct_trust_policy` built through the C API.
final class PolicyHandle {
    let pointer: OpaquePointer

    init(mode: ct_pinning_mode = CT_PINNING_NONE, pinned: [TestCertificate] = [], allowInvalid: Bool = false,
         validatesDomain: Bool = true) throws {
        var out: OpaquePointer?
        try #require(ct_trust_policy_create(&out) == CT_OK)
        pointer = try #require(out)
        #expect(ct_trust_policy_set_mode(pointer, mode) == CT_OK)
        #expect(ct_trust_policy_set_allow_invalid(pointer, allowInvalid ? 1 : 0) == CT_OK)
        #expect(ct_trust_policy_set_validates_domain(pointer, validatesDomain ? 1 : 0) == CT_OK)
        for certificate in pinned {
            let rc = certificate.der.withUnsafeBytes {
                ct_trust_policy_add_pinned_certificate(pointer, $0.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                                       $0.count)
            }
            #expect(rc == CT_OK)
        }
    }

    /// Adds a rule for `pattern` with SPKI pins; returns the code and the engine's message.
    @discardableResult
    func addRule(_ pattern: String, pins: [String], reportOnly: Bool = false, expires: Int64 = 0,
                 includeSubdomains: Bool = false, exclusions: [String] = []) -> (ct_code, String) {
        var message = [CChar](repeating: 0, count: 256)
        let cPattern = strdup(pattern)
        let cPins = pins.map { UnsafePointer(strdup($0)) }
        let cExclusions = exclusions.map { UnsafePointer(strdup($0)) }
        defer {
            free(cPattern)
            cPins.forEach { free(UnsafeMutablePointer(mutating: $0)) }
            cExclusions.forEach { free(UnsafeMutablePointer(mutating: $0)) }
        }
        var patterns = [UnsafePointer(cPattern)]
        let rc = patterns.withUnsafeMutableBufferPointer { patternBuffer in
            cPins.withUnsafeBufferPointer { pinBuffer in
                cExclusions.withUnsafeBufferPointer { exclusionBuffer in
                    var spec = ct_host_rule_spec()
                    spec.patterns = UnsafePointer(OpaquePointer(patternBuffer.baseAddress))
                    spec.pattern_count = 1
                    spec.spki_sha256 = UnsafePointer(OpaquePointer(pinBuffer.baseAddress))
                    spec.spki_count = pins.count
                    spec.exclusions = UnsafePointer(OpaquePointer(exclusionBuffer.baseAddress))
                    spec.exclusion_count = exclusions.count
                    spec.report_only = reportOnly ? 1 : 0
                    spec.expires_unix = expires
                    spec.include_subdomains = includeSubdomains ? 1 : 0
                    return ct_trust_policy_add_host_rule(pointer, &spec, &message)
                }
            }
        }
        return (rc, String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    deinit { ct_trust_policy_release(pointer) }
}

func spki(_ certificate: TestCertificate) -> String {
    var out = [CChar](repeating: 0, count: 64)
    _ = certificate.der.withUnsafeBytes {
        ct_cert_spki_sha256($0.baseAddress!.assumingMemoryBound(to: UInt8.self), $0.count, &out, out.count)
    }
    return String(decoding: out.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

let otherPin = Data(repeating: 9, count: 32).base64EncodedString()

/// Starts `openssl s_server` with `leaf` (+ the intermediate unless `chain` is false).
func server(_ leaf: KeyPath<CertificateFactory, TestCertificate>, chain: Bool = true,
            extra: [String] = []) throws -> OpenSSLServer {
    let pki = try CertificateFactory.shared()
    let cert = pki[keyPath: leaf]
    let file = chain ? try pki.serverChainFile(for: cert) : cert.certificateFile
    return try OpenSSLServer(certificateFile: file, keyFile: cert.keyFile, extraArguments: extra)
}

func probe(_ url: String, policy: PolicyHandle? = nil, caFile: URL? = nil, insecure: Bool = false)
    -> ct_trust_probe_result
{
    var result = ct_trust_probe_result()
    _ = ct_trust_probe(policy?.pointer, url, caFile?.path, insecure ? 1 : 0, 0, 10_000, &result)
    return result
}

@Suite("TLS handshake through the trust hook (openssl s_server)")
struct TrustHandshakeTests {
    @Test("a valid chain to the configured CA file completes the request, by name and by IP")
    func validChain() throws {
        let pki = try CertificateFactory.shared()
        let s = try server(\.leaf)
        defer { s.stop() }

        let byName = probe(s.url(), caFile: pki.root.certificateFile)
        let byIP = probe(s.url(host: "127.0.0.1"), caFile: pki.root.certificateFile)

        #expect(byName.code == CT_OK, "\(cText(byName.message))")
        #expect(byName.http_status == 200)
        #expect(byName.handshakes == 1)
        #expect(byName.reason == Int32(CT_TLS_OK.rawValue))
        #expect(byIP.code == CT_OK, "\(cText(byIP.message))")
    }

    @Test("the system anchors refuse the test CA before any request is sent")
    func systemAnchorsRefuse() throws {
        let s = try server(\.leaf)
        defer { s.stop() }

        let result = probe(s.url())

        #expect(result.code == CT_E_TLS)
        #expect(result.reason == Int32(CT_TLS_CHAIN_INVALID.rawValue))
        #expect(result.verify_error == 20)  // X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY
        #expect(result.http_status == 0)
    }

    @Test("expired, not yet valid, wrong host, incomplete chain and self-signed servers are refused with their reason")
    func refusals() throws {
        let pki = try CertificateFactory.shared()
        let cases: [(KeyPath<CertificateFactory, TestCertificate>, Bool, ct_tls_reason, Int32)] = [
            (\.expiredLeaf, true, CT_TLS_CHAIN_INVALID, 10),
            (\.notYetValidLeaf, true, CT_TLS_CHAIN_INVALID, 9),
            (\.wrongHostLeaf, true, CT_TLS_HOSTNAME_MISMATCH, 62),
            (\.leaf, false, CT_TLS_CHAIN_INVALID, 20),
            (\.selfSigned, false, CT_TLS_CHAIN_INVALID, 18),
            (\.otherLeaf, false, CT_TLS_CHAIN_INVALID, 20),
        ]
        for (leaf, chain, reason, verifyError) in cases {
            let s = try server(leaf, chain: chain)
            defer { s.stop() }

            let result = probe(s.url(), caFile: pki.root.certificateFile)

            #expect(result.code == CT_E_TLS, "\(leaf): \(cText(result.message))")
            #expect(result.reason == Int32(reason.rawValue), "\(leaf)")
            #expect(result.verify_error == verifyError, "\(leaf)")
            #expect(result.http_status == 0, "\(leaf)")
        }
    }

    @Test("insecure accepts a self-signed server for another name")
    func insecure() throws {
        let s = try server(\.wrongHostLeaf, chain: false)
        defer { s.stop() }

        let result = probe(s.url(), insecure: true)

        #expect(result.code == CT_OK, "\(cText(result.message))")
        #expect(result.http_status == 200)
    }

    @Test("certificate pinning trusts a pinned root without a CA file and refuses a foreign one")
    func certificatePinning() throws {
        let s = try server(\.leaf)
        defer { s.stop() }
        let pinnedRoot = try PolicyHandle(mode: CT_PINNING_CERTIFICATE, pinned: [CertificateFactory.shared().root])
        let pinnedOther = try PolicyHandle(mode: CT_PINNING_CERTIFICATE,
                                           pinned: [CertificateFactory.shared().otherRoot])

        let trusted = probe(s.url(), policy: pinnedRoot)
        let refused = probe(s.url(), policy: pinnedOther)

        #expect(trusted.code == CT_OK, "\(cText(trusted.message))")
        #expect(refused.code == CT_E_SERVER_TRUST)
        #expect(refused.reason == Int32(CT_TLS_NO_PIN_MATCHED.rawValue))
        #expect(refused.http_status == 0)
    }

    @Test("a pinned self-signed server is trusted over TLS 1.2 and TLS 1.3")
    func pinnedSelfSigned() throws {
        let policy = try PolicyHandle(mode: CT_PINNING_CERTIFICATE, pinned: [CertificateFactory.shared().selfSigned])
        for version in ["-tls1_2", "-tls1_3"] {
            let s = try server(\.selfSigned, chain: false, extra: [version])
            defer { s.stop() }

            let result = probe(s.url(), policy: policy)

            #expect(result.code == CT_OK, "\(version): \(cText(result.message))")
        }
    }

    @Test("public-key pinning refuses a leaf whose key was rotated, over TLS 1.2 too")
    func publicKeyRotation() throws {
        let pki = try CertificateFactory.shared()
        let policy = try PolicyHandle(mode: CT_PINNING_PUBLIC_KEY, pinned: [pki.leaf])
        for version in ["-tls1_2", "-tls1_3"] {
            let old = try server(\.leaf, extra: [version])
            defer { old.stop() }
            let rotated = try server(\.rotatedLeaf, extra: [version])
            defer { rotated.stop() }

            #expect(probe(old.url(), policy: policy, caFile: pki.root.certificateFile).code == CT_OK, "\(version)")
            let refused = probe(rotated.url(), policy: policy, caFile: pki.root.certificateFile)
            #expect(refused.code == CT_E_SERVER_TRUST, "\(version)")
            #expect(refused.reason == Int32(CT_TLS_NO_PIN_MATCHED.rawValue), "\(version)")
        }
    }

    @Test("an invalid policy (allow invalid + validate domain, no pins) refuses every server")
    func invalidPolicy() throws {
        let s = try server(\.leaf)
        defer { s.stop() }
        let policy = try PolicyHandle(allowInvalid: true)

        let result = probe(s.url(), policy: policy, caFile: try CertificateFactory.shared().root.certificateFile)

        #expect(result.code == CT_E_SERVER_TRUST)
        #expect(result.reason == Int32(CT_TLS_POLICY_INVALID.rawValue))
    }

    @Test("a policy handed to the engine is frozen")
    func frozenAfterUse() throws {
        let s = try server(\.leaf)
        defer { s.stop() }
        let policy = try PolicyHandle()
        #expect(ct_trust_policy_set_mode(policy.pointer, CT_PINNING_PUBLIC_KEY) == CT_OK)
        #expect(ct_trust_policy_set_mode(policy.pointer, CT_PINNING_NONE) == CT_OK)

        _ = probe(s.url(), policy: policy)

        #expect(ct_trust_policy_set_mode(policy.pointer, CT_PINNING_CERTIFICATE) == CT_E_INVALID_ARGUMENT)
        #expect(policy.addRule("localhost", pins: [otherPin, otherPin]).0 == CT_E_INVALID_ARGUMENT)
    }
}

/// Collects pin reports delivered on the loop (here: the probing) thread.
final class ReportCollector: Sendable {
    struct Entry: Sendable {
        var host: String
        var port: Int32
        var pattern: String
        var chainCount: Int
        var pins: [String]
        var enforced: Bool
    }

    let entries = Locked<[Entry]>([])
    let released = Atomic<Int>(0)

    func install(on policy: PolicyHandle) {
        let ctx = Unmanaged.passRetained(self).toOpaque()
        let rc = ct_trust_policy_set_report_handler(
            policy.pointer,
            { ctx, report in
                let collector = Unmanaged<ReportCollector>.fromOpaque(ctx!).takeUnretainedValue()
                let r = report.pointee
                let pins = (0..<r.pin_count).map { String(cString: r.pins[$0]) }
                collector.entries.withLock {
                    $0.append(Entry(host: String(cString: r.host), port: r.port, pattern: String(cString: r.pattern),
                                    chainCount: r.chain_count, pins: pins, enforced: r.enforced != 0))
                }
            },
            ctx,
            { ctx in
                let collector = Unmanaged<ReportCollector>.fromOpaque(ctx!).takeRetainedValue()
                collector.released.add(1, ordering: .relaxed)
            })
        #expect(rc == CT_OK)
    }
}

@Suite("Per-host pin rules in the handshake")
struct TrustHostRuleHandshakeTests {
    @Test("an enforced rule refuses a chain without its pins and reports it")
    func enforcedRule() throws {
        let pki = try CertificateFactory.shared()
        let s = try server(\.leaf)
        defer { s.stop() }
        let policy = try PolicyHandle()
        #expect(policy.addRule("localhost", pins: [spki(pki.otherRoot), otherPin]).0 == CT_OK)
        let collector = ReportCollector()
        collector.install(on: policy)

        let result = probe(s.url(), policy: policy, caFile: pki.root.certificateFile)

        #expect(result.code == CT_E_SERVER_TRUST)
        #expect(result.reason == Int32(CT_TLS_NO_PIN_MATCHED.rawValue))
        let entries = collector.entries.withLock { $0 }
        #expect(entries.count == 1)
        #expect(entries.first?.host == "localhost")
        #expect(entries.first?.port == Int32(s.port))
        #expect(entries.first?.enforced == true)
        #expect(entries.first?.chainCount == 3)  // leaf, intermediate, root (validated chain)
        #expect(entries.first?.pins == [spki(pki.otherRoot), otherPin])
    }

    @Test("a report-only rule lets the request through and reports the mismatch")
    func reportOnlyRule() throws {
        let pki = try CertificateFactory.shared()
        let s = try server(\.leaf)
        defer { s.stop() }
        let policy = try PolicyHandle()
        #expect(policy.addRule("localhost", pins: [otherPin], reportOnly: true).0 == CT_OK)
        let collector = ReportCollector()
        collector.install(on: policy)

        let result = probe(s.url(), policy: policy, caFile: pki.root.certificateFile)

        #expect(result.code == CT_OK, "\(cText(result.message))")
        #expect(result.http_status == 200)
        #expect(collector.entries.withLock { $0.map(\.enforced) } == [false])
    }

    @Test("a matching rule passes silently; a rule for another host does not apply")
    func matchingAndUnrelatedRules() throws {
        let pki = try CertificateFactory.shared()
        let s = try server(\.leaf)
        defer { s.stop() }
        let policy = try PolicyHandle()
        #expect(policy.addRule("localhost", pins: [spki(pki.intermediate), otherPin]).0 == CT_OK)
        #expect(policy.addRule("127.0.0.1", pins: [otherPin, spki(pki.otherRoot)]).0 == CT_OK)
        let collector = ReportCollector()
        collector.install(on: policy)

        let byName = probe(s.url(), policy: policy, caFile: pki.root.certificateFile)
        let byIP = probe(s.url(host: "127.0.0.1"), policy: policy, caFile: pki.root.certificateFile)

        #expect(byName.code == CT_OK, "\(cText(byName.message))")
        #expect(byIP.code == CT_E_SERVER_TRUST)
        #expect(collector.entries.withLock { $0.map(\.host) } == ["127.0.0.1"])
    }

    @Test("the report context is released exactly once with the policy")
    func reportContextReleased() throws {
        let collector = ReportCollector()
        do {
            let policy = try PolicyHandle()
            collector.install(on: policy)
            #expect(collector.released.load(ordering: .relaxed) == 0)
        }
        #expect(collector.released.load(ordering: .relaxed) == 1)
    }

    @Test("the backup-pin rule and bad input are refused with a sentence")
    func ruleValidation() throws {
        let policy = try PolicyHandle()

        let single = policy.addRule("localhost", pins: [otherPin])
        let badPin = policy.addRule("localhost", pins: ["abc", otherPin])
        let badPattern = policy.addRule("*.", pins: [otherPin, otherPin])
        let reportOnlySingle = policy.addRule("localhost", pins: [otherPin], reportOnly: true)

        #expect(single.0 == CT_E_INVALID_ARGUMENT)
        #expect(single.1.contains("at least two pins"))
        #expect(badPin.0 == CT_E_INVALID_ARGUMENT)
        #expect(badPin.1.contains("abc"))
        #expect(badPattern.0 == CT_E_INVALID_ARGUMENT)
        #expect(badPattern.1.contains("pattern"))
        #expect(reportOnlySingle.0 == CT_OK)
    }
}

@Suite("Redirect hops through the trust hook")
struct TrustRedirectHandshakeTests {
    /// A trusted `localhost` server whose `/redir` answers 302 to `target`.
    func redirector(to target: String) throws -> (OpenSSLServer, URL) {
        let pki = try CertificateFactory.shared()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("redir-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let response = "HTTP/1.0 302 Found\r\nLocation: \(target)\r\nContent-Length: 0\r\n\r\n"
        try response.write(to: dir.appendingPathComponent("redir"), atomically: true, encoding: .utf8)
        let server = try OpenSSLServer(certificateFile: try pki.serverChainFile(for: pki.leaf), keyFile: pki.leaf.keyFile,
                                       mode: "-HTTP", workingDirectory: dir)
        return (server, dir)
    }

    func follow(_ url: String, policy: PolicyHandle? = nil) throws -> ct_trust_probe_result {
        var result = ct_trust_probe_result()
        _ = ct_trust_probe(policy?.pointer, url, try CertificateFactory.shared().root.certificateFile.path, 0, 1,
                           10_000, &result)
        return result
    }

    @Test("a redirect from a trusted host to an expired one is refused at the second handshake")
    func redirectToExpired() throws {
        let bad = try server(\.expiredLeaf)
        defer { bad.stop() }
        let (good, dir) = try redirector(to: bad.url(host: "127.0.0.1"))
        defer {
            good.stop()
            try? FileManager.default.removeItem(at: dir)
        }

        let result = try follow(good.url() + "redir")

        #expect(result.code == CT_E_TLS, "\(cText(result.message))")
        #expect(result.handshakes == 2)
        #expect(result.verify_error == 10)
    }

    @Test("a per-host rule applies to the redirect target's host, not the first host")
    func redirectHostRule() throws {
        let pki = try CertificateFactory.shared()
        let target = try server(\.leaf)
        defer { target.stop() }
        let (origin, dir) = try redirector(to: target.url(host: "127.0.0.1"))
        defer {
            origin.stop()
            try? FileManager.default.removeItem(at: dir)
        }
        let policy = try PolicyHandle()
        #expect(policy.addRule("127.0.0.1", pins: [spki(pki.otherRoot), otherPin]).0 == CT_OK)
        let unpinned = try PolicyHandle()

        let refused = try follow(origin.url() + "redir", policy: policy)
        let allowed = try follow(origin.url() + "redir", policy: unpinned)

        #expect(refused.code == CT_E_SERVER_TRUST, "\(cText(refused.message))")
        #expect(refused.handshakes == 2)
        #expect(allowed.code == CT_OK, "\(cText(allowed.message))")
        #expect(allowed.handshakes == 2)
        #expect(allowed.http_status == 200)
    }
}

/// Records challenges and answers them with a fixed reason.
final class ChallengeAnswer: Sendable {
    let answer: ct_tls_reason
    let seen = Locked<[(host: String, chain: Int, proposed: Int32)]>([])

    init(_ answer: ct_tls_reason) { self.answer = answer }

    func install(on policy: PolicyHandle) {
        let rc = ct_trust_policy_set_challenge_handler(
            policy.pointer,
            { ctx, challenge in
                let me = Unmanaged<ChallengeAnswer>.fromOpaque(ctx!).takeUnretainedValue()
                let c = challenge.pointee
                me.seen.withLock { $0.append((String(cString: c.host), c.chain_count, c.proposed_reason)) }
                return Int32(me.answer.rawValue)
            },
            Unmanaged.passRetained(self).toOpaque(),
            { ctx in Unmanaged<ChallengeAnswer>.fromOpaque(ctx!).release() })
        #expect(rc == CT_OK)
    }
}

@Suite("Server-trust challenge handler in the handshake")
struct TrustChallengeHandshakeTests {
    @Test("answering 'use credential' trusts a self-signed server the policy refused")
    func useCredential() throws {
        let s = try server(\.selfSigned, chain: false)
        defer { s.stop() }
        let policy = try PolicyHandle()
        let handler = ChallengeAnswer(CT_TLS_OK)
        handler.install(on: policy)

        let result = probe(s.url(), policy: policy)

        #expect(result.code == CT_OK, "\(cText(result.message))")
        let seen = handler.seen.withLock { $0 }
        #expect(seen.count == 1)
        #expect(seen.first?.host == "localhost")
        #expect(seen.first?.chain == 1)
        #expect(seen.first?.proposed == Int32(CT_TLS_CHAIN_INVALID.rawValue))
    }

    @Test("answering 'cancel' refuses a server the policy trusted")
    func cancel() throws {
        let pki = try CertificateFactory.shared()
        let s = try server(\.leaf)
        defer { s.stop() }
        let policy = try PolicyHandle()
        let handler = ChallengeAnswer(CT_TLS_REJECTED_BY_DELEGATE)
        handler.install(on: policy)

        let result = probe(s.url(), policy: policy, caFile: pki.root.certificateFile)

        #expect(result.code == CT_E_SERVER_TRUST)
        #expect(result.reason == Int32(CT_TLS_REJECTED_BY_DELEGATE.rawValue))
        #expect(result.http_status == 0)
        #expect(handler.seen.withLock { $0.first?.proposed } == Int32(CT_TLS_OK.rawValue))
        #expect(handler.seen.withLock { $0.first?.chain } == 2)
    }
}
