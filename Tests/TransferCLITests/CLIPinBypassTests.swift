import Foundation
import Testing
import TestSupport

/// Issue 11 item 1 through the command line: appending someone else's pinned certificates exits 7.
@Suite("transfer command: pins are matched against the verified chain only")
struct CLIPinBypassTests {
    /// The base64 SHA-256 of `certificate`'s SubjectPublicKeyInfo, by openssl.
    private func pin(_ certificate: TestCertificate) throws -> String {
        let script = "openssl x509 -in '\(certificate.certificateFile.path)' -pubkey -noout"
            + " | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64"
        let output = try Command.run("/bin/sh", ["-c", script])
        return output.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("a server from CA A appending the pinned root and leaf of B is refused with exit 7")
    func appendedPinsExit7() throws {
        let pki = try CertificateFactory.shared()
        let directory = try TemporaryDirectory()
        let presented = directory.file("presented.pem")
        var pem = ""
        for file in [pki.leaf.certificateFile, pki.intermediate.certificateFile, pki.otherRoot.certificateFile,
                     pki.otherLeaf.certificateFile] {
            pem += try Command.run("/bin/cat", [file.path]).stdoutText
        }
        try pem.write(to: presented, atomically: true, encoding: .utf8)
        let server = try OpenSSLServer(certificateFile: presented, keyFile: pki.leaf.keyFile)
        defer { server.stop() }
        let forged = try [pin(pki.otherRoot), pin(pki.otherLeaf)]
        let own = try pin(pki.root)

        let bypass = try CLI.run(["get", "--cacert", pki.root.certificateFile.path, "--pinning-mode", "public-key",
                                  "--pin-sha256", forged[0], "--pin-sha256", forged[1], server.url()])
        let control = try CLI.run(["get", "--cacert", pki.root.certificateFile.path, "--pinning-mode", "public-key",
                                   "--pin-sha256", own, "--pin-sha256", forged[0], server.url()])

        #expect(forged.allSatisfy { $0.count == 44 }, "\(forged)")
        #expect(bypass.status == 7, "\(bypass.stderrText)")
        #expect(bypass.stderrText.contains("server trust refused"))
        #expect(bypass.stdout.isEmpty)
        #expect(control.status == 0, "\(control.stderrText)")
    }
}
