import Foundation
import TestSupport
import Testing
import Transfer

/// Issue 11 item 2: a new policy reaches connections and TLS sessions made under the old one.
/// Servers are `openssl s_server` on loopback with the CertificateFactory PKI (root → intermediate → leaf
/// for localhost); the interactive one answers only when the test tells it to.
@Suite("A policy change reaches running transfers, idle connections and cached TLS sessions", .serialized)
struct SecurityPolicyChangeTests {
    /// A policy whose single pin matches no key of our PKI.
    private func rejectingPolicy() -> SecurityPolicy {
        var policy = SecurityPolicy.policy(pinningMode: .publicKey)
        policy.pinnedPublicKeyHashes = ["sha256//" + Data(repeating: 5, count: 32).base64EncodedString()]
        return policy
    }

    /// Commands reach the engine in order: once a request submitted after `setSecurityPolicy` has
    /// completed, the policy is installed.
    private func barrier(_ session: SessionManager, _ plain: TestServer) async throws {
        let (_, response) = try await session.data(for: Request(url: plain.url("/bytes/1")))
        #expect(response.statusCode == 200)
    }

    /// Whether s_server's log shows that the client ended the connection.
    private func closed(_ output: String) -> Bool {
        output.contains("CONNECTION CLOSED") || output.contains("unexpected eof")
    }

    private func waitForOutput(_ server: OpenSSLServer, _ text: String) async -> Bool {
        await Wait.poll(timeout: .seconds(10)) { server.output.contains(text) }
    }

    @Test("a redirect hop of a transfer started under the old policy is judged by the new one (no session resumption)")
    func redirectHopAfterPolicyChange() async throws {
        let pki = try CertificateFactory.shared()
        let chain = try pki.serverChainFile(for: pki.leaf)
        // B: TLS 1.2 with a session cache, so a client that kept B's session resumes it without
        // B's certificate being sent (and so without any verification).
        let target = try OpenSSLServer(certificateFile: chain, keyFile: pki.leaf.keyFile, extraArguments: ["-tls1_2"])
        defer { target.stop() }
        let origin = try OpenSSLServer(certificateFile: chain, keyFile: pki.leaf.keyFile, mode: "")
        defer { origin.stop() }
        let plain = try await TestServer.start()
        defer { plain.stop() }
        let session = try makeSession { $0.caFile = pki.root.certificateFile.path }
        defer { session.invalidateAndCancel() }

        // Under the old policy: a full handshake with B, whose TLS session is cached.
        let (_, warm) = try await session.data(for: Request(url: URL(string: target.url())!))
        #expect(warm.statusCode == 200)

        // A transfer starts under the old policy; its first hop (A) is accepted and held.
        async let held = session.data(for: Request(url: URL(string: origin.url() + "redir")!))
        #expect(await waitForOutput(origin, "GET /redir"), "\(origin.output)")

        try session.setSecurityPolicy(rejectingPolicy())
        try await barrier(session, plain)
        origin.send("HTTP/1.1 302 Found\r\nLocation: \(target.url())\r\nContent-Length: 0\r\n"
                    + "Connection: close\r\n\r\n")

        let outcome: Result<Int, any Error>
        do {
            outcome = .success(try await held.1.statusCode)
        } catch {
            outcome = .failure(error)
        }
        guard case .failure(let error) = outcome else {
            Issue.record("the redirect hop was not refused: \(outcome)")
            return
        }
        #expect((error as? TransferError)?.code == .serverTrustRejected, "\(error)")
    }

    @Test("an idle pooled TLS connection made under the old policy is closed when the policy changes")
    func idleConnectionClosed() async throws {
        let pki = try CertificateFactory.shared()
        let server = try OpenSSLServer(certificateFile: try pki.serverChainFile(for: pki.leaf),
                                       keyFile: pki.leaf.keyFile, mode: "")
        defer { server.stop() }
        let plain = try await TestServer.start()
        defer { plain.stop() }
        let session = try makeSession { $0.caFile = pki.root.certificateFile.path }
        defer { session.invalidateAndCancel() }

        async let first = session.data(for: Request(url: URL(string: server.url() + "keep")!))
        #expect(await waitForOutput(server, "GET /keep"), "\(server.output)")
        server.send("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        let (body, response) = try await first
        #expect(response.statusCode == 200)
        #expect(body == Data("ok".utf8))
        #expect(!closed(server.output), "\(server.output)")  // kept alive in the pool

        try session.setSecurityPolicy(rejectingPolicy())
        try await barrier(session, plain)

        // s_server sees the client end the connection (an EOF without close_notify: the engine
        // shuts the idle socket down under curl, which then finds the connection dead).
        #expect(await Wait.poll(timeout: .seconds(10)) { closed(server.output) }, "\(server.output)")
    }

    @Test("a connection busy when the policy changes is closed once its transfer ends")
    func busyConnectionClosedWhenIdle() async throws {
        let pki = try CertificateFactory.shared()
        let server = try OpenSSLServer(certificateFile: try pki.serverChainFile(for: pki.leaf),
                                       keyFile: pki.leaf.keyFile, mode: "")
        defer { server.stop() }
        let plain = try await TestServer.start()
        defer { plain.stop() }
        let session = try makeSession { $0.caFile = pki.root.certificateFile.path }
        defer { session.invalidateAndCancel() }

        async let first = session.data(for: Request(url: URL(string: server.url() + "busy")!))
        #expect(await waitForOutput(server, "GET /busy"), "\(server.output)")
        try session.setSecurityPolicy(rejectingPolicy())
        try await barrier(session, plain)
        #expect(!closed(server.output), "\(server.output)")  // in use: left alone

        server.send("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        let (body, response) = try await first
        #expect(response.statusCode == 200)
        #expect(body == Data("ok".utf8))

        #expect(await Wait.poll(timeout: .seconds(10)) { closed(server.output) }, "\(server.output)")
    }

    /// Connections waiting in the accept backlog of the loopback listener on `port` (the listening
    /// socket's rx_queue in /proc/net/tcp), or -1 when it cannot be read.
    private func pendingConnections(onPort port: Int) -> Int {
        let fd = open("/proc/net/tcp", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return -1 }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            bytes.append(contentsOf: buffer[0..<n])
        }
        let local = "0100007F:" + String(format: "%04X", port)
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ")
            // sl local rem st tx_queue:rx_queue; 0A is LISTEN
            guard fields.count > 4, fields[1] == local, fields[3] == "0A" else { continue }
            return Int(fields[4].split(separator: ":").last ?? "", radix: 16) ?? -1
        }
        return -1
    }

    @Test("a redirect hop back to the same server after a policy change does not reuse the old connection")
    func sameHostHopAfterPolicyChange() async throws {
        let pki = try CertificateFactory.shared()
        let server = try OpenSSLServer(certificateFile: try pki.serverChainFile(for: pki.leaf),
                                       keyFile: pki.leaf.keyFile, mode: "")
        defer { server.stop() }
        let plain = try await TestServer.start()
        defer { plain.stop() }
        let session = try makeSession { $0.caFile = pki.root.certificateFile.path }
        defer { session.invalidateAndCancel() }

        async let held = session.data(for: Request(url: URL(string: server.url() + "first")!))
        #expect(await waitForOutput(server, "GET /first"), "\(server.output)")
        try session.setSecurityPolicy(rejectingPolicy())
        try await barrier(session, plain)
        // A keep-alive redirect to the same origin: the old code sends the next request over this
        // connection, which the new policy never judged.
        server.send("HTTP/1.1 302 Found\r\nLocation: /second\r\nContent-Length: 0\r\n\r\n")

        // Either the hop arrives on the old connection, or the client opens a new one, which waits in
        // s_server's accept backlog while it serves the first.
        let decided = await Wait.poll(timeout: .seconds(10)) {
            server.output.contains("GET /second") || pendingConnections(onPort: server.port) >= 1
        }
        #expect(decided, "\(server.output)")
        let reused = server.output.contains("GET /second")
        if reused {
            server.send("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        } else {
            server.send("q\n")  // s_server: end this connection, accept the next (the hop's new one)
        }

        let outcome: Result<Int, any Error>
        do {
            outcome = .success(try await held.1.statusCode)
        } catch {
            outcome = .failure(error)
        }
        #expect(!reused, "the hop reused the connection made under the old policy")
        guard case .failure(let error) = outcome else {
            Issue.record("the redirect hop was not refused: \(outcome)")
            return
        }
        #expect((error as? TransferError)?.code == .serverTrustRejected, "\(error)")
    }
}
