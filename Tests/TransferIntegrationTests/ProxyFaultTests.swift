import Foundation
import TestSupport
import Testing
import Transfer

/// Issue 30 item 5, proxies: an HTTP proxy of our own (`FaultyHTTPProxy`) that dies during
/// CONNECT or inside the tunnel, answers 407 forever, or answers 200 and then sends bytes
/// that are not TLS. The origin is TestServer behind TLS (socat, `TLSFront`). Every session
/// has a total timeout, so a hang ends as a failed expectation.
@Suite("Proxy faults", .serialized)
struct ProxyFaultTests {
    private let factory: CertificateFactory

    init() throws {
        factory = try CertificateFactory.shared()
    }

    /// TestServer with TLS in front of it; the caller stops both.
    private func httpsOrigin() async throws -> (TestServer, TLSFront) {
        let origin = try await TestServer.start()
        do {
            let front = try TLSFront(backendPort: origin.port,
                                     certificateChain: try factory.serverChainFile(for: factory.leaf).path,
                                     key: factory.leaf.keyFile.path)
            return (origin, front)
        } catch {
            origin.stop()
            throw error
        }
    }

    private func session(proxyPort: UInt16, credentials: ProxyConfiguration.Credentials? = nil) throws
        -> SessionManager
    {
        try makeSession {
            $0.caFile = factory.root.certificateFile.path
            $0.timeoutIntervalForResource = underSanitizer ? 600 : 60
            $0.proxy = .through(ProxyConfiguration(.http, host: "127.0.0.1", port: Int(proxyPort),
                                                   credentials: credentials))
        }
    }

    private func download(_ session: SessionManager, _ url: URL, to destination: URL, resumable: Bool = false,
                          whenReceiving: (@Sendable () -> Void)? = nil) async throws -> DownloadOutcome
    {
        let done = Completion<DownloadOutcome>()
        let task = session.downloadTask(with: Request(url: url), to: destination, resumable: resumable,
                                        completionHandler: done.handler)
        if let whenReceiving { task.whenReceived(1) { _ in whenReceiving() } }
        task.resume()
        return try await done.result()
    }

    private func exists(_ url: URL) -> Bool { FileManager.default.fileExists(atPath: url.path) }
    private func part(_ url: URL) -> URL { URL(fileURLWithPath: url.path + ".part") }

    @Test("a proxy that resets the connection in the middle of its CONNECT answer is a proxyFailure")
    func proxyDiesDuringConnect() async throws {
        let (origin, front) = try await httpsOrigin()
        defer { front.stop(); origin.stop() }
        let proxy = try FaultyHTTPProxy(.dieDuringConnect)
        defer { proxy.stop() }
        let session = try session(proxyPort: proxy.port)
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let destination = directory.file("never.bin")

        let outcome = try await download(session, URL(string: "https://127.0.0.1:\(front.port)/bytes/1000")!,
                                         to: destination)

        #expect(proxy.requests == ["CONNECT 127.0.0.1:\(front.port) HTTP/1.1"])
        #expect(outcome.error?.code == .proxyFailure, "\(String(describing: outcome.error))")
        #expect(outcome.error?.message.contains("before answering CONNECT") == true,
                "\(String(describing: outcome.error))")
        #expect(proxy.resetCount == 1)
        #expect(!exists(destination))
        #expect(!exists(part(destination)))
        #expect(origin.requests.isEmpty)
    }

    @Test("a proxy that dies inside the tunnel cuts the body: truncated, nothing under the name; --resume continues")
    func proxyDiesInTunnel() async throws {
        let (origin, front) = try await httpsOrigin()
        defer { front.stop(); origin.stop() }
        let size = underSanitizer ? 256 * 1024 : 1024 * 1024
        let url = URL(string: "https://127.0.0.1:\(front.port)/bytes/\(size)?seed=30")!
        let directory = try TemporaryDirectory()
        let destination = directory.file("body.bin")

        // Not resumable: nothing at all is left.
        let dying = try FaultyHTTPProxy(.dieInTunnel(afterBytes: size / 4))
        defer { dying.stop() }
        let session = try session(proxyPort: dying.port)
        defer { session.invalidateAndCancel() }
        let first = try await download(session, url, to: destination, whenReceiving: dying.openGate)
        #expect(dying.resetCount == 1)
        #expect(first.error?.code == .truncatedResponse, "\(String(describing: first.error))")
        #expect(!exists(destination))
        #expect(!exists(part(destination)))

        // Resumable: the part file stays, the name stays free.
        let second = try await download(session, url, to: destination, resumable: true,
                                        whenReceiving: dying.openGate)
        #expect(dying.resetCount == 2)
        #expect(second.error?.code == .truncatedResponse, "\(String(describing: second.error))")
        #expect(!exists(destination))
        #expect(exists(part(destination)))

        // Through a proxy that works, the same download continues with a Range request.
        let good = try TestHTTPProxy()
        defer { good.stop() }
        let healthy = try self.session(proxyPort: good.port)
        defer { healthy.invalidateAndCancel() }
        let third = try await download(healthy, url, to: destination, resumable: true)
        #expect(third.error == nil, "\(String(describing: third.error))")
        #expect(try FileDigest.sha256(of: destination) == TestServer.sha256(seed: 30, count: size))
        #expect(origin.requests.last?.header("range")?.hasPrefix("bytes=") == true)
        #expect(!exists(part(destination)))
    }

    @Test("a proxy that answers 407 to every attempt ends after one authenticated try: proxyFailure, no loop")
    func proxyAuthenticationLoop() async throws {
        let (origin, front) = try await httpsOrigin()
        defer { front.stop(); origin.stop() }
        let proxy = try FaultyHTTPProxy(.alwaysDemandsAuthentication)
        defer { proxy.stop() }
        let url = URL(string: "https://127.0.0.1:\(front.port)/bytes/1000")!
        let directory = try TemporaryDirectory()

        for credentials in [nil, ProxyConfiguration.Credentials(user: "alice", password: "s3cret")] {
            let before = proxy.requests.count
            let session = try session(proxyPort: proxy.port, credentials: credentials)
            defer { session.invalidateAndCancel() }
            let destination = directory.file("never-\(credentials == nil ? "anonymous" : "alice").bin")

            let outcome = try await download(session, url, to: destination)

            #expect(outcome.error?.code == .proxyFailure, "\(String(describing: outcome.error))")
            #expect(outcome.error?.message.contains("407") == true, "\(String(describing: outcome.error))")
            let attempts = proxy.requests.count - before
            #expect((1...2).contains(attempts), "bounded attempts, got \(attempts): \(proxy.requests)")
            #expect(!exists(destination))
        }
        #expect(origin.requests.isEmpty)
    }

    @Test("a proxy that answers 200 to CONNECT and then sends garbage fails the TLS handshake: tlsFailure")
    func garbageAfterConnect() async throws {
        let (origin, front) = try await httpsOrigin()
        defer { front.stop(); origin.stop() }
        let proxy = try FaultyHTTPProxy(.garbageAfterConnect)
        defer { proxy.stop() }
        let session = try session(proxyPort: proxy.port)
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let destination = directory.file("never.bin")

        let outcome = try await download(session, URL(string: "https://127.0.0.1:\(front.port)/bytes/1000")!,
                                         to: destination)

        #expect(proxy.requests.count == 1)
        #expect(outcome.error?.code == .tlsFailure, "\(String(describing: outcome.error))")
        #expect(!exists(destination))
        #expect(!exists(part(destination)))
        #expect(origin.requests.isEmpty)
    }
}
