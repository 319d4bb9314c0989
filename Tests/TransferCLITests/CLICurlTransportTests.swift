import Foundation
import Testing
import TestSupport

/// A one-shot HTTP/1.1 responder on a listening socket (TCP or Unix): it keeps the
/// first bytes the client sends and answers `body`, for what TestServer cannot see
/// (an HTTP/2 preface, a Unix domain socket).
private final class RawResponder: Sendable {
    private let received = Locked(Data())
    private let done = Locked(false)

    init(listening fd: Int32, body: String) {
        let received = received
        let done = done
        Thread.detachNewThread {
            defer {
                close(fd)
                done.withLock { $0 = true }
            }
            let client = accept(fd, nil, nil)
            guard client >= 0 else { return }
            defer { close(client) }
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(client, $0.baseAddress!, $0.count) }
                if n <= 0 { break }
                let head = received.withLock { data -> Data in
                    data.append(contentsOf: buffer[0..<n])
                    return data
                }
                if head.count >= 24 && head.starts(with: Data("PRI * HTTP/2.0".utf8)) { break }
                if head.range(of: Data("\r\n\r\n".utf8)) != nil { break }
            }
            let answer = "HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
            _ = answer.utf8CString.withUnsafeBufferPointer { write(client, $0.baseAddress!, $0.count - 1) }
        }
    }

    var text: String { String(decoding: received.withLock { $0 }, as: UTF8.self) }

    func waitUntilDone() async -> Bool { await Wait.poll(timeout: .seconds(30)) { self.done.withLock { $0 } } }
}

/// Issue 29, item 2 (transport): options that need the engine.
@Suite("transfer command: curl's transport options")
struct CLICurlTransportTests {
    @Test("--unix-socket connects to the socket; the URL still names Host and path")
    func unixSocket() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("s").path
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() where index < raw.count - 1 { raw[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0 && listen(fd, 4) == 0
            }
        }
        #expect(bound)
        let responder = RawResponder(listening: fd, body: "over unix")

        let output = try CLI.run(["-s", "--unix-socket", path, "http://example.invalid/via/unix"])

        #expect(output.status == 0, "\(output.stderrText)")
        #expect(output.stdoutText == "over unix")
        #expect(await responder.waitUntilDone())
        #expect(responder.text.hasPrefix("GET /via/unix HTTP/1.1\r\n"), "\(responder.text)")
        #expect(responder.text.contains("Host: example.invalid\r\n"))
    }

    @Test("--http2-prior-knowledge starts with the HTTP/2 preface on cleartext; --http1.0 sends HTTP/1.0")
    func httpVersions() async throws {
        let (fd, port) = try LoopbackListener.open(backlog: 4)
        let responder = RawResponder(listening: fd, body: "")
        let server = try await TestServer.start()
        defer { server.stop() }

        _ = try CLI.run(["-s", "--http2-prior-knowledge", "--connect-timeout", "5", "--max-time", "10",
                         "http://127.0.0.1:\(port)/h2"])
        let http10 = try CLI.run(["-s", "--http1.0", server.url("/echo").absoluteString])

        #expect(await responder.waitUntilDone())
        #expect(responder.text.hasPrefix("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), "\(responder.text)")
        #expect(http10.status == 0, "\(http10.stderrText)")
        let echo = try JSONSerialization.jsonObject(with: http10.stdout) as? [String: Any]
        #expect((echo?["http_version"] as? String)?.hasSuffix("1.0") == true, "\(http10.stdoutText)")
    }

    @Test("--socks5 resolves here and --socks5-hostname lets the proxy resolve, as -x socks5:// and socks5h://")
    func socksSpellings() throws {
        let origin = try TestServer.start()
        defer { origin.stop() }
        let socks = try TestSOCKS5Server(hosts: ["cli-origin.test": "127.0.0.1"])
        defer { socks.stop() }

        let local = try CLI.run(["-s", "--socks5", "127.0.0.1:\(socks.port)", "--discard",
                                 origin.url("/bytes/2").absoluteString])
        let remote = try CLI.run(["-s", "--socks5-hostname", "127.0.0.1:\(socks.port)", "--discard",
                                  "http://cli-origin.test:\(origin.port)/bytes/2"])

        #expect(local.status == 0, "\(local.stderrText)")
        #expect(remote.status == 0, "\(remote.stderrText)")
        #expect(socks.requests.map(\.destination) == [.ipv4("127.0.0.1"), .name("cli-origin.test")])
    }

    @Test("--connect-to sends a request for another host and port to our server, Host unchanged")
    func connectTo() throws {
        let server = try TestServer.start()
        defer { server.stop() }

        let output = try CLI.run(["-s", "--connect-to", "bench.example:80:127.0.0.1:\(server.port)",
                                  "http://bench.example/bytes/5?seed=3"])
        let bad = try CLI.run(["-s", "--connect-to", "bench.example:80", "http://bench.example/"])

        #expect(output.status == 0, "\(output.stderrText)")
        #expect(output.stdout == TestServer.bytes(seed: 3, count: 5))
        #expect(server.requests.first?.header("Host") == "bench.example")
        #expect(bad.status == 2, "\(bad.stderrText)")
    }

    @Test("-4 reaches an IPv4 address; -6 refuses it (exit 4) and nothing is sent")
    func addressFamilies() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let url = server.url("/bytes/3").absoluteString

        let v4 = try CLI.run(["-s", "-4", "--discard", url])
        let v6 = try CLI.run(["-s", "-6", "--discard", url])

        #expect(v4.status == 0, "\(v4.stderrText)")
        #expect(v6.status == 4, "\(v6.stderrText)")
        #expect(server.requests.count == 1)
    }
}

@Suite("transfer command: curl's TLS options", .enabled(if: NginxFixture.isInstalled, "nginx is not installed"))
struct CLICurlTLSTests {
    @Test("--tls-max 1.2 settles on TLS 1.2, --tlsv1.3 on TLS 1.3 (as -v says); a minimum above the maximum is exit 2")
    func tlsVersions() throws {
        let nginx = try NginxFixture.shared()
        let file = try nginx.ensureFile(size: 1000, seed: 29)
        let url = nginx.url(.https, file.path).absoluteString

        let max12 = try CLI.run(["-v", "--progress", "none", "--tls-max", "1.2", "--cacert", nginx.caFile,
                                 "--discard", url])
        let min13 = try CLI.run(["-v", "--progress", "none", "--tlsv1.3", "--cacert", nginx.caFile, "--discard", url])
        let bad = try CLI.run(["--tlsv1.3", "--tls-max", "1.2", url])

        #expect(max12.status == 0, "\(max12.stderrText)")
        #expect(max12.stderrText.contains("SSL connection using TLSv1.2"), "\(max12.stderrText)")
        #expect(min13.status == 0, "\(min13.stderrText)")
        #expect(min13.stderrText.contains("SSL connection using TLSv1.3"), "\(min13.stderrText)")
        #expect(bad.status == 2, "\(bad.stderrText)")
    }

    @Test("--pinnedpubkey sha256//… pins the server's key: the right hash downloads, a wrong one exits 7")
    func pinnedPublicKey() throws {
        let nginx = try NginxFixture.shared()
        let file = try nginx.ensureFile(size: 1000, seed: 31)
        let url = nginx.url(.https, file.path).absoluteString
        let script = "openssl x509 -in '\(nginx.serverCertificateFile)' -pubkey -noout"
            + " | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64"
        let pin = try Command.run("/bin/sh", ["-c", script]).stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
        let wrong = Data(repeating: 7, count: 32).base64EncodedString()

        let right = try CLI.run(["-s", "--cacert", nginx.caFile, "--pinnedpubkey", "sha256//\(wrong);sha256//\(pin)",
                                 "--discard", url])
        let refused = try CLI.run(["-s", "--cacert", nginx.caFile, "--pinnedpubkey", "sha256//\(wrong)", "--discard",
                                   url])
        let file_ = try CLI.run(["-s", "--pinnedpubkey", "/tmp/key.pem", url])

        #expect(right.status == 0, "\(right.stderrText)")
        #expect(refused.status == 7, "\(refused.stderrText)")
        #expect(file_.status == 2)
        #expect(file_.stderrText.contains("--pinnedpubkey: only sha256//"))
    }

    @Test("--ciphers and --tls13-ciphers pick the cipher (the defaults take AES-256); none in common is exit 6")
    func ciphers() throws {
        let nginx = try NginxFixture.shared()
        let file = try nginx.ensureFile(size: 1000, seed: 30)
        let url = nginx.url(.https, file.path).absoluteString
        let base = ["-v", "--progress", "none", "--cacert", nginx.caFile, "--discard"]

        let tls12 = try CLI.run(base + ["--tls-max", "1.2", "--ciphers",
                                        "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES128-GCM-SHA256", url])
        let tls13 = try CLI.run(base + ["--tlsv1.3", "--tls13-ciphers", "TLS_AES_128_GCM_SHA256", url])
        let none = try CLI.run(["-s", "--cacert", nginx.caFile, "--tls-max", "1.2", "--ciphers", "NULL-MD5", url])

        #expect(tls12.status == 0, "\(tls12.stderrText)")
        #expect(tls12.stderrText.contains("SSL connection using TLSv1.2 / ECDHE-"), "\(tls12.stderrText)")
        #expect(tls12.stderrText.contains("-AES128-GCM-SHA256"))
        #expect(tls13.status == 0, "\(tls13.stderrText)")
        #expect(tls13.stderrText.contains("SSL connection using TLSv1.3 / TLS_AES_128_GCM_SHA256"),
                "\(tls13.stderrText)")
        #expect(none.status == 6, "\(none.stderrText)")
    }
}
