import Foundation
import Testing
import TestSupport

/// A throwaway CA and a leaf for `*.example.test` signed by it, made with the
/// openssl command line in a temporary directory.
struct WildcardCertificate {
    let directory: TemporaryDirectory
    var caFile: String { directory.file("ca.pem").path }
    var chainFile: String { directory.file("leaf.pem").path }
    var keyFile: String { directory.file("leaf.key").path }

    init() throws {
        directory = try TemporaryDirectory()
        let dir = directory.path
        let curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        try CertificateFactory.openssl(
            ["req", "-x509"] + curve + [
                "-keyout", dir + "/ca.key", "-out", dir + "/ca.pem", "-days", "30",
                "-subj", "/CN=Transfer Wildcard Test CA",
                "-addext", "basicConstraints=critical,CA:true",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            ])
        try CertificateFactory.openssl(
            ["req", "-new"] + curve + [
                "-keyout", dir + "/leaf.key", "-out", dir + "/leaf.csr", "-subj", "/CN=*.example.test",
            ])
        let extensions = """
            basicConstraints = critical, CA:false
            keyUsage = critical, digitalSignature
            extendedKeyUsage = serverAuth
            subjectAltName = DNS:*.example.test

            """
        try Data(extensions.utf8).write(to: directory.file("leaf.ext"))
        try CertificateFactory.openssl([
            "x509", "-req", "-in", dir + "/leaf.csr", "-CA", dir + "/ca.pem", "-CAkey", dir + "/ca.key",
            "-CAcreateserial", "-out", dir + "/leaf.pem", "-days", "30", "-extfile", dir + "/leaf.ext",
        ])
    }
}

@Suite("transfer command: --resolve")
struct CLIResolveTests {
    @Test("--resolve sends a wildcard name to 127.0.0.1: *.example.test covers a.example.test, not a.b.example.test")
    func wildcardThroughResolve() throws {
        let certificate = try WildcardCertificate()
        let nginx = try NginxFixture.start(serverCertificate: (certificate.chainFile, certificate.keyFile))
        defer { nginx.stop() }
        let content = Data("wildcard body\n".utf8) + TestServer.bytes(seed: 81, count: 10_000)
        try content.write(to: URL(fileURLWithPath: nginx.contentRoot + "/wild.bin"))
        let port = nginx.httpsPort

        let covered = try CLI.run([
            "get", "-s", "--cacert", certificate.caFile, "--resolve", "a.example.test:\(port):127.0.0.1",
            "https://a.example.test:\(port)/wild.bin",
        ])
        let twoLabels = try CLI.run([
            "get", "-s", "--cacert", certificate.caFile, "--resolve", "a.b.example.test:\(port):127.0.0.1",
            "https://a.b.example.test:\(port)/wild.bin",
        ])

        #expect(covered.status == 0, "\(covered.stderrText)")
        #expect(covered.stdout == content)
        // A wildcard covers exactly one label: a TLS failure (6), not a pin refusal or a connect error.
        #expect(twoLabels.status == 6, "\(twoLabels.stderrText)")
        #expect(twoLabels.stdout.isEmpty)
    }

    @Test("bad --resolve syntax is a usage error (exit 2)", arguments: [
        "a.example.test:443",
        "a.example.test:443:",
        ":443:127.0.0.1",
        "a.example.test:https:127.0.0.1",
        "a.example.test:70000:127.0.0.1",
        "a.example.test:0:127.0.0.1",
        "a.example.test:443:not-an-address",
        "a.example.test:443:127.0.0.1,",
        "a.example.test:443:[127.0.0.1]",
    ])
    func badSyntax(entry: String) throws {
        let output = try CLI.run(["get", "-s", "--resolve", entry, "https://a.example.test:443/"])

        #expect(output.status == 2, "\(entry): \(output.stderrText)")
        #expect(output.stderrText.contains("--resolve"))
    }

    @Test("good --resolve forms are accepted: several addresses and IPv6 in brackets")
    func goodSyntax() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let port = server.url("/").port ?? 0

        let output = try CLI.run([
            "get", "-s", "--resolve", "name.example.test:\(port):127.0.0.1,[::1]",
            "http://name.example.test:\(port)/bytes/100",
        ])

        #expect(output.status == 0, "\(output.stderrText)")
        #expect(output.stdout.count == 100)
        #expect(server.requests.last?.header("host") == "name.example.test:\(port)")
    }
}
