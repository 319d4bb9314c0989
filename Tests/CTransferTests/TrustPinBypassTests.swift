import CTransfer
import Foundation
import Testing
import TestSupport

/// Starts `openssl s_server` presenting `leaf`'s chain (leaf + intermediate, or the leaf alone) followed
/// by `appended`: certificates the server sends without holding their keys.
func appendingServer(_ leaf: KeyPath<CertificateFactory, TestCertificate>, chain: Bool = true,
                     appended: [TestCertificate]) throws -> (OpenSSLServer, TemporaryDirectory) {
    let pki = try CertificateFactory.shared()
    let cert = pki[keyPath: leaf]
    let base = chain ? try pki.serverChainFile(for: cert) : cert.certificateFile
    var pem = try #require(readFile(base))
    for extra in appended {
        pem.append(try #require(readFile(extra.certificateFile)))
    }
    let directory = try TemporaryDirectory()
    let file = directory.file("presented.pem")
    try pem.write(to: file)
    return (try OpenSSLServer(certificateFile: file, keyFile: cert.keyFile), directory)
}

/// Reads a file with read(2) (Foundation's readers report leaks under ASan on this toolchain).
private func readFile(_ url: URL) -> Data? {
    let fd = open(url.path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var result = Data()
    var buffer = [UInt8](repeating: 0, count: 16384)
    while true {
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 && errno == EINTR { continue }
        if n < 0 { return nil }
        if n == 0 { return result }
        result.append(contentsOf: buffer[0..<n])
    }
}

/// A self-signed CA certificate with the intermediate's subject and key identifier but its own key:
/// it names itself the leaf's issuer, yet its signature never verifies the leaf.
func impostorIntermediate(in directory: TemporaryDirectory) throws -> TestCertificate {
    let pki = try CertificateFactory.shared()
    let ext = try CertificateFactory.openssl(["x509", "-in", pki.intermediate.certificateFile.path, "-noout",
                                              "-ext", "subjectKeyIdentifier"])
    let skid = try #require(ext.split(separator: "\n").last?.trimmingCharacters(in: .whitespaces))
    let key = directory.file("impostor.key")
    let cert = directory.file("impostor.pem")
    let der = directory.file("impostor.der")
    try CertificateFactory.openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key.path,
                                    "-out", cert.path, "-days", "3650",
                                    "-subj", "/CN=Transfer Test Intermediate/O=Transfer",
                                    "-addext", "basicConstraints=critical,CA:TRUE",
                                    "-addext", "subjectKeyIdentifier=\(skid)"])
    try CertificateFactory.openssl(["x509", "-in", cert.path, "-outform", "DER", "-out", der.path])
    return TestCertificate(name: "impostor", certificateFile: cert, keyFile: key,
                           der: try #require(readFile(der)))
}

/// Issue 11 item 1 (CVE-2016-2402 class): a server holding a certificate from a trusted CA (A) must not pass
/// pinning by appending the pinned root or leaf of another hierarchy (B) whose keys it does not hold.
@Suite("Pins are matched only against the verified chain (openssl s_server)")
struct TrustPinBypassTests {
    @Test("public-key mode: leaf from CA A plus the pinned root B appended is refused")
    func publicKeyAppendedRoot() throws {
        let pki = try CertificateFactory.shared()
        let (s, dir) = try appendingServer(\.leaf, appended: [pki.otherRoot])
        defer { s.stop(); _ = dir }
        let policy = try PolicyHandle(mode: CT_PINNING_PUBLIC_KEY, pinned: [pki.otherRoot])

        let result = probe(s.url(), policy: policy, caFile: pki.root.certificateFile)

        #expect(result.code == CT_E_SERVER_TRUST, "\(cText(result.message))")
        #expect(result.reason == Int32(CT_TLS_NO_PIN_MATCHED.rawValue))
        #expect(result.http_status == 0)
    }

    @Test("public-key mode: leaf from CA A plus the pinned leaf B appended is refused")
    func publicKeyAppendedLeaf() throws {
        let pki = try CertificateFactory.shared()
        let (s, dir) = try appendingServer(\.leaf, appended: [pki.otherLeaf])
        defer { s.stop(); _ = dir }
        let policy = try PolicyHandle(mode: CT_PINNING_PUBLIC_KEY, pinned: [pki.otherLeaf])

        let result = probe(s.url(), policy: policy, caFile: pki.root.certificateFile)

        #expect(result.code == CT_E_SERVER_TRUST, "\(cText(result.message))")
        #expect(result.reason == Int32(CT_TLS_NO_PIN_MATCHED.rawValue))
        #expect(result.http_status == 0)
    }

    @Test("public-key mode: a pin on the verified chain's own root still passes when extras are appended")
    func publicKeyOwnRootPasses() throws {
        let pki = try CertificateFactory.shared()
        let (s, dir) = try appendingServer(\.leaf, appended: [pki.otherRoot, pki.otherLeaf])
        defer { s.stop(); _ = dir }
        let policy = try PolicyHandle(mode: CT_PINNING_PUBLIC_KEY, pinned: [pki.root])

        let result = probe(s.url(), policy: policy, caFile: pki.root.certificateFile)

        #expect(result.code == CT_OK, "\(cText(result.message))")
        #expect(result.http_status == 200)
    }

    @Test("per-host rule: the pinned root B or leaf B appended does not satisfy the rule")
    func hostRuleAppended() throws {
        let pki = try CertificateFactory.shared()
        for extra in [pki.otherRoot, pki.otherLeaf] {
            let (s, dir) = try appendingServer(\.leaf, appended: [extra])
            defer { s.stop(); _ = dir }
            let keyRule = try PolicyHandle()
            #expect(keyRule.addRule("localhost", pins: [spki(extra), otherPin]).0 == CT_OK)
            let certRule = try PolicyHandle()
            #expect(certRule.addCertificateRule("localhost", certificates: [extra]) == CT_OK)

            let byKey = probe(s.url(), policy: keyRule, caFile: pki.root.certificateFile)
            let byCert = probe(s.url(), policy: certRule, caFile: pki.root.certificateFile)

            #expect(byKey.code == CT_E_SERVER_TRUST, "\(extra.name): \(cText(byKey.message))")
            #expect(byKey.reason == Int32(CT_TLS_NO_PIN_MATCHED.rawValue), "\(extra.name)")
            #expect(byCert.code == CT_E_SERVER_TRUST, "\(extra.name): \(cText(byCert.message))")
            #expect(byCert.reason == Int32(CT_TLS_NO_PIN_MATCHED.rawValue), "\(extra.name)")
        }
    }

    @Test("allow invalid certificates: unrelated appended certificates never count, the real chain does")
    func allowInvalidAppended() throws {
        let pki = try CertificateFactory.shared()
        let (s, dir) = try appendingServer(\.leaf, appended: [pki.otherRoot, pki.otherLeaf])
        defer { s.stop(); _ = dir }
        let forged = try PolicyHandle(mode: CT_PINNING_PUBLIC_KEY, pinned: [pki.otherRoot, pki.otherLeaf],
                                      allowInvalid: true)
        let real = try PolicyHandle(mode: CT_PINNING_PUBLIC_KEY, pinned: [pki.intermediate], allowInvalid: true)
        let ruleForged = try PolicyHandle(allowInvalid: true, validatesDomain: false)
        #expect(ruleForged.addRule("localhost", pins: [spki(pki.otherRoot), spki(pki.otherLeaf)]).0 == CT_OK)

        let refused = probe(s.url(), policy: forged)
        let accepted = probe(s.url(), policy: real)
        let refusedByRule = probe(s.url(), policy: ruleForged)

        #expect(refused.code == CT_E_SERVER_TRUST, "\(cText(refused.message))")
        #expect(refused.reason == Int32(CT_TLS_NO_PIN_MATCHED.rawValue))
        #expect(accepted.code == CT_OK, "\(cText(accepted.message))")
        #expect(refusedByRule.code == CT_E_SERVER_TRUST, "\(cText(refusedByRule.message))")
    }

    @Test("allow invalid certificates: a presented certificate with the issuer's name and key id but another key does not count")
    func allowInvalidImpostorIssuer() throws {
        let pki = try CertificateFactory.shared()
        let dir = try TemporaryDirectory()
        let impostor = try impostorIntermediate(in: dir)
        let (s, serverDir) = try appendingServer(\.leaf, chain: false, appended: [impostor, pki.otherRoot])
        defer { s.stop(); _ = serverDir }
        let policy = try PolicyHandle(mode: CT_PINNING_PUBLIC_KEY, pinned: [impostor], allowInvalid: true)
        let watched = try PolicyHandle(mode: CT_PINNING_PUBLIC_KEY, pinned: [impostor], allowInvalid: true)
        let handler = ChallengeAnswer(CT_TLS_REJECTED_BY_DELEGATE)
        handler.install(on: watched)

        let result = probe(s.url(), policy: policy)
        _ = probe(s.url(), policy: watched)

        #expect(result.code == CT_E_SERVER_TRUST, "\(cText(result.message))")
        #expect(result.reason == Int32(CT_TLS_NO_PIN_MATCHED.rawValue))
        // The challenge handler sees the chain walked from the leaf, not everything that was sent.
        let seen = handler.seen.withLock { $0 }
        #expect(seen.first?.chain == 1)
        #expect(seen.first?.proposed == Int32(CT_TLS_NO_PIN_MATCHED.rawValue))
    }
}

extension PolicyHandle {
    /// Adds a per-host rule whose pins are whole certificates.
    func addCertificateRule(_ pattern: String, certificates: [TestCertificate]) -> ct_code {
        let cPattern = strdup(pattern)
        defer { free(cPattern) }
        var patterns = [UnsafePointer(cPattern)]
        let copies = certificates.map { certificate -> UnsafeMutablePointer<UInt8> in
            let p = UnsafeMutablePointer<UInt8>.allocate(capacity: certificate.der.count)
            certificate.der.copyBytes(to: p, count: certificate.der.count)
            return p
        }
        defer { copies.forEach { $0.deallocate() } }
        var ders = copies.map { UnsafePointer($0) }
        var lengths = certificates.map { $0.der.count }
        // Two pins are required for an enforced rule: pad with a key nobody has.
        let pad = strdup(otherPin)
        defer { free(pad) }
        var pins = [UnsafePointer(pad)]
        return patterns.withUnsafeMutableBufferPointer { patternBuffer in
            ders.withUnsafeMutableBufferPointer { derBuffer in
                lengths.withUnsafeMutableBufferPointer { lengthBuffer in
                    pins.withUnsafeMutableBufferPointer { pinBuffer in
                        var spec = ct_host_rule_spec()
                        spec.patterns = UnsafePointer(OpaquePointer(patternBuffer.baseAddress))
                        spec.pattern_count = 1
                        spec.spki_sha256 = UnsafePointer(OpaquePointer(pinBuffer.baseAddress))
                        spec.spki_count = 1
                        spec.cert_ders = UnsafePointer(OpaquePointer(derBuffer.baseAddress))
                        spec.cert_lengths = UnsafePointer(lengthBuffer.baseAddress)
                        spec.cert_count = certificates.count
                        var message = [CChar](repeating: 0, count: 256)
                        return ct_trust_policy_add_host_rule(pointer, &spec, &message)
                    }
                }
            }
        }
    }
}
