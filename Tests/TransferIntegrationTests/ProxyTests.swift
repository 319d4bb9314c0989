import Foundation
import TestSupport
import Testing
import Transfer

/// `SessionConfiguration.proxy` against proxies of our own (TestSupport: TestHTTPProxy,
/// TestSOCKS5Server, TLSFront with socat for an HTTPS proxy), origins on loopback (TestServer
/// for plain HTTP, nginx for HTTPS). Every wait is on a completion; the proxies record
/// what they saw.
@Suite("Proxies", .serialized)
struct ProxyTests {
    private func leafPin(_ nginx: NginxFixture) throws -> String {
        let pem = try Data(contentsOf: URL(fileURLWithPath: nginx.serverCertificateFile))
        guard let leaf = try SecurityPolicy.certificates(fromPEM: pem).first else {
            throw TransferError(.internalError, "no certificate in \(nginx.serverCertificateFile)")
        }
        return leaf.publicKeySHA256
    }

    private func pinned(_ hash: String) -> SecurityPolicy {
        var policy = SecurityPolicy.policy(pinningMode: .publicKey)
        policy.pinnedPublicKeyHashes = [hash]
        return policy
    }

    private static let wrongPin = "sha256//" + Data(repeating: 1, count: 32).base64EncodedString()

    /// The error of a request expected to fail.
    private func failure(_ session: SessionManager, _ url: URL) async -> TransferError? {
        do {
            _ = try await session.data(for: Request(url: url))
            return nil
        } catch {
            return error as? TransferError
        }
    }

    // MARK: HTTP proxy

    @Test("a plain http request goes through the proxy in absolute form; credentials reach the proxy only")
    func plainHTTPThroughProxy() async throws {
        let origin = try await TestServer.start()
        defer { origin.stop() }
        let proxy = try TestHTTPProxy(credentials: ("alice", "s3cret"))
        defer { proxy.stop() }
        let session = try makeSession {
            $0.proxy = .through(ProxyConfiguration(.http, host: "127.0.0.1", port: Int(proxy.port),
                                                   credentials: .init(user: "alice", password: "s3cret")))
        }
        defer { session.invalidateAndCancel() }

        let (data, response) = try await session.data(for: Request(url: origin.url("/echo")))

        #expect(response.statusCode == 200)
        #expect(proxy.requests.map(\.requestLine) == ["GET http://127.0.0.1:\(origin.port)/echo HTTP/1.1"])
        #expect(proxy.requests.first?.hadProxyAuthorization == true)
        let echoed = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let headers = try #require(echoed["headers"] as? [String: Any])
        #expect(headers["proxy-authorization"] == nil)
        #expect(origin.requests.count == 1)
        #expect(origin.requests.first?.header("proxy-authorization") == nil)
    }

    @Test("an https origin through CONNECT is judged by its own pin: the right pin passes, a wrong one is refused")
    func pinningThroughTunnel() async throws {
        let nginx = try NginxFixture.shared()
        let file = try nginx.ensureFile(size: 64 * 1024, seed: 31)
        let proxy = try TestHTTPProxy()
        defer { proxy.stop() }
        let session = try makeSession {
            $0.caFile = nginx.caFile
            $0.proxy = .through(ProxyConfiguration(.http, host: "127.0.0.1", port: Int(proxy.port)))
        }
        defer { session.invalidateAndCancel() }
        try session.setSecurityPolicy(pinned(leafPin(nginx)))

        let (data, response) = try await session.data(for: Request(url: nginx.url(.https, file.path)))

        // The origin's head, not the tunnel's "200 Connection established".
        #expect(response.statusCode == 200)
        #expect(response.headers["Content-Length"] == "\(64 * 1024)")
        #expect(response.headers["ETag"] != nil)
        #expect(FileDigest.sha256(data) == file.sha256)
        #expect(proxy.requests.map(\.method) == ["CONNECT"])
        #expect(proxy.requests.first?.target == "localhost:\(nginx.httpsPort)")

        try session.setSecurityPolicy(pinned(Self.wrongPin))
        let error = await failure(session, nginx.url(.https, "/"))
        #expect(error?.code == .serverTrustRejected)
        #expect(proxy.requests.count == 2)
    }

    @Test("missing or wrong proxy credentials end in one 407 and a proxyFailure, for CONNECT and forwarding")
    func proxyAuthenticationFails() async throws {
        let nginx = try NginxFixture.shared()
        let origin = try await TestServer.start()
        defer { origin.stop() }
        let proxy = try TestHTTPProxy(credentials: ("alice", "s3cret"))
        defer { proxy.stop() }
        let cases: [(ProxyConfiguration.Credentials?, Bool)] = [
            (nil, false), (.init(user: "alice", password: "wrong"), true),
        ]
        for (credentials, sent) in cases {
            for url in [nginx.url(.https, "/"), origin.url("/echo")] {
                let before = proxy.requests.count
                let session = try makeSession {
                    $0.caFile = nginx.caFile
                    $0.proxy = .through(ProxyConfiguration(.http, host: "127.0.0.1", port: Int(proxy.port),
                                                           credentials: credentials))
                }
                defer { session.invalidateAndCancel() }

                let error = await failure(session, url)

                #expect(error?.code == .proxyFailure, "\(url) \(String(describing: error))")
                #expect(error?.message.contains("407") == true, "\(String(describing: error))")
                let seen = proxy.requests.dropFirst(before)
                #expect(seen.count == 1, "one 407, no second attempt: \(seen)")
                #expect(seen.first?.refusedWith == 407)
                #expect(seen.first?.hadProxyAuthorization == sent)
            }
        }
        #expect(origin.requests.isEmpty)
    }

    @Test("a proxy that refuses CONNECT fails the task with proxyFailure")
    func refusingProxy() async throws {
        let nginx = try NginxFixture.shared()
        let proxy = try TestHTTPProxy(refuseConnect: true)
        defer { proxy.stop() }
        let session = try makeSession {
            $0.caFile = nginx.caFile
            $0.proxy = .through(ProxyConfiguration(.http, host: "127.0.0.1", port: Int(proxy.port)))
        }
        defer { session.invalidateAndCancel() }

        let error = await failure(session, nginx.url(.https, "/"))

        #expect(error?.code == .proxyFailure)
        #expect(error?.message.contains("403") == true, "\(String(describing: error))")
        #expect(proxy.requests.map(\.refusedWith) == [403])
    }

    @Test("hosts of the bypass list go straight to the origin; the proxy sees nothing")
    func bypassList() async throws {
        let origin = try await TestServer.start()
        defer { origin.stop() }
        let proxy = try TestHTTPProxy()
        defer { proxy.stop() }
        for bypass in [["127.0.0.1"], ["*"]] {
            let session = try makeSession {
                $0.proxy = .through(ProxyConfiguration(.http, host: "127.0.0.1", port: Int(proxy.port), bypass: bypass))
            }
            defer { session.invalidateAndCancel() }

            let (_, response) = try await session.data(for: Request(url: origin.url("/status/200")))

            #expect(response.statusCode == 200)
        }
        #expect(proxy.requests.isEmpty)
        #expect(origin.requests.count == 2)
    }

    @Test("no proxy goes straight to the origin over one kept connection; a proxied session beside it still uses its proxy")
    func noProxy() async throws {
        let origin = try await TestServer.start()
        defer { origin.stop() }
        let proxy = try TestHTTPProxy()
        defer { proxy.stop() }
        let direct = try makeSession { $0.proxy = .none }
        defer { direct.invalidateAndCancel() }
        let proxied = try makeSession {
            $0.proxy = .through(ProxyConfiguration(.http, host: "127.0.0.1", port: Int(proxy.port)))
        }
        defer { proxied.invalidateAndCancel() }

        for _ in 0..<3 {
            let (_, response) = try await direct.data(for: Request(url: origin.url("/status/200")))
            #expect(response.statusCode == 200)
        }
        let (_, response) = try await proxied.data(for: Request(url: origin.url("/status/204")))

        #expect(response.statusCode == 204)
        #expect(proxy.requests.count == 1)
        let straight = origin.requests.filter { $0.path == "/status/200" }
        #expect(straight.count == 3)
        #expect(Set(straight.map(\.clientPort)).count == 1, "the direct requests shared one connection")
    }

    @Test("an invalid proxy is an invalidRequest before anything is sent")
    func invalidProxy() async throws {
        let origin = try await TestServer.start()
        defer { origin.stop() }
        let bad = [
            ProxyConfiguration(.http, host: "", port: 8080),
            ProxyConfiguration(.http, host: "proxy host", port: 8080),
            ProxyConfiguration(.http, host: "127.0.0.1", port: 0),
            ProxyConfiguration(.http, host: "127.0.0.1", port: 70000),
            ProxyConfiguration(.socks5, host: "127.0.0.1", port: 1080, bypass: ["ok.test", " "]),
            ProxyConfiguration(.http, host: "127.0.0.1", port: 8080,
                               credentials: .init(user: "a\r\nX-Injected: 1", password: "b")),
        ]
        for proxy in bad {
            let session = try makeSession { $0.proxy = .through(proxy) }
            defer { session.invalidateAndCancel() }

            let error = await failure(session, origin.url("/status/200"))

            #expect(error?.code == .invalidRequest, "\(proxy)")
        }
        #expect(origin.requests.isEmpty)
    }

    // MARK: SOCKS5

    @Test("socks5 sends the address the client resolved; socks5h sends the name; user/password is negotiated")
    func socks() async throws {
        let origin = try await TestServer.start()
        defer { origin.stop() }
        let name = "proxy-origin.test"
        let socks = try TestSOCKS5Server(credentials: ("bob", "pw"), hosts: [name: "127.0.0.1"])
        defer { socks.stop() }
        let url = URL(string: "http://\(name):\(origin.port)/status/200")!

        for kind in [ProxyConfiguration.Kind.socks5, .socks5h] {
            let session = try makeSession {
                $0.resolve = ["\(name):\(origin.port):127.0.0.1"]
                $0.proxy = .through(ProxyConfiguration(kind, host: "127.0.0.1", port: Int(socks.port),
                                                       credentials: .init(user: "bob", password: "pw")))
            }
            defer { session.invalidateAndCancel() }

            let (_, response) = try await session.data(for: Request(url: url))

            #expect(response.statusCode == 200, "\(kind)")
        }
        #expect(socks.requests.map(\.destination) == [.ipv4("127.0.0.1"), .name(name)])
        #expect(socks.requests.allSatisfy { $0.port == origin.port && $0.reply == 0 })

        let session = try makeSession {
            $0.proxy = .through(ProxyConfiguration(.socks5h, host: "127.0.0.1", port: Int(socks.port),
                                                   credentials: .init(user: "bob", password: "nope")))
        }
        defer { session.invalidateAndCancel() }
        let error = await failure(session, url)
        #expect(error?.code == .proxyFailure)
        #expect(socks.refusedLogins == 1)
        #expect(origin.requests.count == 2)
    }

    // MARK: HTTPS proxy

    @Test("an https proxy is verified with its own CA, and origin pinning still applies through it")
    func httpsProxy() async throws {
        let nginx = try NginxFixture.shared()
        let factory = try CertificateFactory.shared()
        let origin = try await TestServer.start()
        defer { origin.stop() }
        let proxy = try TestHTTPProxy()
        defer { proxy.stop() }
        let front = try TLSFront(backendPort: proxy.port,
                                 certificateChain: try factory.serverChainFile(for: factory.leaf).path,
                                 key: factory.leaf.keyFile.path)
        defer { front.stop() }
        func session(proxyCA: String) throws -> SessionManager {
            try makeSession {
                $0.caFile = nginx.caFile
                $0.proxy = .through(ProxyConfiguration(.https, host: "127.0.0.1", port: Int(front.port),
                                                       caFile: proxyCA))
            }
        }
        let file = try nginx.ensureFile(size: 4096, seed: 32)

        // The right CA: an https origin with its (not the proxy's) pin, and a plain one.
        let good = try session(proxyCA: factory.root.certificateFile.path)
        defer { good.invalidateAndCancel() }
        try good.setSecurityPolicy(pinned(leafPin(nginx)))
        let (data, response) = try await good.data(for: Request(url: nginx.url(.https, file.path)))
        #expect(response.statusCode == 200)
        #expect(FileDigest.sha256(data) == file.sha256)
        let (_, plain) = try await good.data(for: Request(url: origin.url("/status/200")))
        #expect(plain.statusCode == 200)
        #expect(proxy.requests.map(\.method) == ["CONNECT", "GET"])

        // Origin pinning still applies through the https proxy.
        try good.setSecurityPolicy(pinned(Self.wrongPin))
        let refused = await failure(good, nginx.url(.https, "/"))
        #expect(refused?.code == .serverTrustRejected)

        // The wrong CA for the proxy: its handshake fails, nothing reaches the proxy.
        let before = proxy.requests.count
        let bad = try session(proxyCA: factory.otherRoot.certificateFile.path)
        defer { bad.invalidateAndCancel() }
        for url in [nginx.url(.https, "/"), origin.url("/status/200")] {
            let error = await failure(bad, url)
            #expect(error?.code == .tlsFailure, "\(url) \(String(describing: error))")
        }
        #expect(proxy.requests.count == before)
    }
}
