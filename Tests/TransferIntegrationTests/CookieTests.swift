import Foundation
import TestSupport
import Testing

@testable import Transfer

/// Cookies over real loopback sockets: TestServer's /response-headers sets them
/// (`?Set-Cookie=...`), /echo shows the `Cookie` header the server received.
@Suite("Cookies: libcurl's engine behind the session's store")
struct CookieTests {
    /// The `Cookie` header /echo saw, or nil.
    private func sentCookie(_ session: SessionManager, _ url: URL, handle: Bool = true,
                            main: URL? = nil) async throws -> String?
    {
        var request = Request(url: url)
        request.httpShouldHandleCookies = handle
        request.mainDocumentURL = main
        let (data, _) = try await session.data(for: request)
        let object = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        return (object?["headers"] as? [String: Any])?["cookie"] as? String
    }

    private func set(_ session: SessionManager, _ server: TestServer, _ cookies: String..., path: String = "",
                     host: String? = nil, handle: Bool = true, main: URL? = nil) async throws
    {
        var components = URLComponents(url: server.url("/response-headers" + path), resolvingAgainstBaseURL: false)!
        if let host { components.host = host }
        components.queryItems = cookies.map { URLQueryItem(name: "Set-Cookie", value: $0) }
        var request = Request(url: components.url!)
        request.httpShouldHandleCookies = handle
        request.mainDocumentURL = main
        _ = try await session.data(for: request)
    }

    @Test("a Set-Cookie is sent back on the next request, and kept in the store")
    func setCookieIsSentBack() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }

        try await set(session, server, "id=42; Path=/; HttpOnly; SameSite=Lax", "plain=yes")

        #expect(try await sentCookie(session, server.url("/echo"))?.split(separator: ";").map {
            $0.trimmingCharacters(in: .whitespaces)
        }.sorted() == ["id=42", "plain=yes"])
        let id = try #require(session.cookieStore?.cookies.first { $0.name == "id" })
        #expect(id.value == "42" && id.domain == "127.0.0.1" && id.path == "/")
        #expect(id.isHTTPOnly && id.sameSite == .lax && id.isSessionOnly)
    }

    @Test("on the fast path a Set-Cookie line in any letter case reaches the store, with what libcurl drops")
    func setCookieNameInAnyCase() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        #expect(session.takesFastPath(Request(url: server.url("/response-headers"))))

        // The engine counts the lines by name as they arrive; the store parses only heads that have one
        var components = URLComponents(url: server.url("/response-headers"), resolvingAgainstBaseURL: false)!
        components.queryItems = [URLQueryItem(name: "X-Note", value: "set-cookie: no=1"),
                                 URLQueryItem(name: "SET-COOKIE", value: "up=1; Path=/; SameSite=Strict")]
        _ = try await session.data(for: Request(url: components.url!))

        let cookies = session.cookieStore?.cookies ?? []
        let up = try #require(cookies.first { $0.name == "up" })
        #expect(up.value == "1" && up.sameSite == .strict)
        #expect(!cookies.contains { $0.name == "no" })
    }

    @Test("reset() and invalidateSession(resetSession: true) empty the store: nothing is sent afterwards")
    func resetEmptiesTheStore() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        try await set(session, server, "id=42; Path=/")
        #expect(try await sentCookie(session, server.url("/echo")) == "id=42")

        session.reset()

        #expect(session.cookieStore?.cookies.isEmpty == true)
        #expect(try await sentCookie(session, server.url("/echo")) == nil)

        let store = CookieStore()
        let other = try SessionManager(configuration: { var c = SessionConfiguration.default; c.cookieStore = store; return c }())
        try await set(other, server, "again=1; Path=/")
        #expect(store.cookies.count == 1)
        other.invalidateSession(cancelPendingTasks: true, resetSession: true)
        #expect(store.cookies.isEmpty)
    }

    @Test("path scoping: a cookie for /echo/a goes to /echo/a/b, not to /echo/b")
    func pathScoping() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }

        try await set(session, server, "scoped=1; Path=/echo/a")

        #expect(try await sentCookie(session, server.url("/echo/a/b")) == "scoped=1")
        #expect(try await sentCookie(session, server.url("/echo/b")) == nil)
        #expect(try await sentCookie(session, server.url("/echo/ab")) == nil)
    }

    @Test("domain scoping: Domain= reaches subdomains, a host-only cookie does not")
    func domainScoping() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let port = server.url("/").port!
        var configuration = SessionConfiguration()
        configuration.resolve = ["example.test:\(port):127.0.0.1", "www.example.test:\(port):127.0.0.1",
                                 "other.test:\(port):127.0.0.1"]
        let session = try SessionManager(configuration: configuration)
        defer { session.invalidateAndCancel() }

        try await set(session, server, "wide=1; Domain=example.test", "hostonly=1", host: "example.test")

        let sub = URL(string: "http://www.example.test:\(port)/echo")!
        let same = URL(string: "http://example.test:\(port)/echo")!
        let other = URL(string: "http://other.test:\(port)/echo")!
        #expect(try await sentCookie(session, sub) == "wide=1")
        #expect(try await sentCookie(session, same)?.contains("hostonly=1") == true)
        #expect(try await sentCookie(session, other) == nil)
        #expect(session.cookieStore?.cookies(for: sub).map(\.name) == ["wide"])
    }

    @Test("Secure cookies are not sent over http, nor accepted from it")
    func secureNotOverHTTP() async throws {
        // A host name: libcurl counts 127.0.0.1 and localhost as secure contexts.
        let server = try await TestServer.start()
        defer { server.stop() }
        let port = server.url("/").port!
        var configuration = SessionConfiguration()
        configuration.resolve = ["plain.test:\(port):127.0.0.1"]
        let session = try SessionManager(configuration: configuration)
        defer { session.invalidateAndCancel() }
        let store = try #require(session.cookieStore)
        try store.setCookie(Cookie(name: "s", value: "1", domain: "plain.test", isSecure: true))
        try store.setCookie(Cookie(name: "p", value: "2", domain: "plain.test"))

        try await set(session, server, "fromhttp=1; Secure", host: "plain.test")

        #expect(try await sentCookie(session, URL(string: "http://plain.test:\(port)/echo")!) == "p=2")
        #expect(!store.cookies.contains { $0.name == "fromhttp" })
        #expect(store.cookies(for: URL(string: "https://plain.test/")!).map(\.name).sorted() == ["p", "s"])
    }

    @Test("over https (socat TLS in front of TestServer) a Secure cookie is stored and sent, never over http",
          .enabled(if: FileManager.default.isExecutableFile(atPath: TLSFront.socatPath), "socat is not installed"))
    func secureOverHTTPS() async throws {
        let factory = try CertificateFactory.shared()
        let server = try await TestServer.start()
        defer { server.stop() }
        let front = try TLSFront(backendPort: UInt16(server.url("/").port!),
                                 certificateChain: try factory.serverChainFile(for: factory.leaf).path,
                                 key: factory.leaf.keyFile.path)
        defer { front.stop() }
        let httpPort = server.url("/").port!
        var configuration = SessionConfiguration()
        configuration.caFile = factory.root.certificateFile.path
        configuration.resolve = ["www.pin.test:\(front.port):127.0.0.1", "www.pin.test:\(httpPort):127.0.0.1"]
        let session = try SessionManager(configuration: configuration)
        defer { session.invalidateAndCancel() }
        var components = URLComponents(string: "https://www.pin.test:\(front.port)/response-headers")!
        components.queryItems = [URLQueryItem(name: "Set-Cookie", value: "sec=1; Secure; SameSite=None; Path=/")]

        _ = try await session.data(for: Request(url: components.url!))

        let https = URL(string: "https://www.pin.test:\(front.port)/echo")!
        let http = URL(string: "http://www.pin.test:\(httpPort)/echo")!
        #expect(try await sentCookie(session, https) == "sec=1")
        #expect(try await sentCookie(session, http) == nil)
        let cookie = try #require(session.cookieStore?.cookies.first)
        #expect(cookie.isSecure && cookie.sameSite == Cookie.SameSite.none)
    }

    @Test("a store shared by sessions never lets one resume another's TLS session past its pins (nginx)",
          .enabled(if: NginxFixture.isInstalled, "nginx is not installed"))
    func sharedStoreKeepsTLSSessionsApart() async throws {
        // The jar's share also caches TLS sessions, and a resumed session skips the
        // certificate (and the pin check). Both sessions below reach trust generation 2,
        // so only the per-loop generation base keeps their CAINFO markers apart.
        let nginx = try NginxFixture.shared()
        let file = try nginx.ensureFile(size: 1024, seed: 61)
        var configuration = SessionConfiguration()
        configuration.cookieStore = CookieStore()
        configuration.caFile = nginx.caFile
        configuration.httpVersion = .http1_1
        let trusting = try SessionManager(configuration: configuration)
        defer { trusting.invalidateAndCancel() }
        try trusting.setSecurityPolicy(.defaultPolicy)
        let (_, ok) = try await trusting.data(for: Request(url: nginx.url(.https, file.path)))
        #expect(ok.statusCode == 200)

        let pinning = try SessionManager(configuration: configuration)
        defer { pinning.invalidateAndCancel() }
        var policy = SecurityPolicy.policy(pinningMode: .publicKey)
        policy.pinnedPublicKeyHashes = ["sha256//" + Data(repeating: 1, count: 32).base64EncodedString()]
        try pinning.setSecurityPolicy(policy)

        do {
            _ = try await pinning.data(for: Request(url: nginx.url(.https, file.path)))
            Issue.record("a wrong pin was accepted: a TLS session of the other session was resumed")
        } catch {
            #expect(error.code == .serverTrustRejected)
        }
    }

    @Test("an expired cookie is dropped and Max-Age=0 deletes a stored one")
    func expiryAndMaxAgeZero() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        try await set(session, server, "keep=1; Max-Age=3600", "gone=1", "old=1")
        #expect(session.cookieStore?.cookies.count == 3)

        try await set(session, server, "gone=1; Max-Age=0", "old=1; Expires=Thu, 01 Jan 1970 00:00:01 GMT")

        #expect(try await sentCookie(session, server.url("/echo")) == "keep=1")
        #expect(session.cookieStore?.cookies.map(\.name) == ["keep"])
        let keep = try #require(session.cookieStore?.cookies.first)
        #expect(keep.expires.map { $0 > Date() } == true)
    }

    @Test("httpShouldHandleCookies false: the request neither sends nor stores cookies")
    func perRequestOptOut() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        try await set(session, server, "a=1")

        try await set(session, server, "b=2", handle: false)

        #expect(try await sentCookie(session, server.url("/echo"), handle: false) == nil)
        #expect(try await sentCookie(session, server.url("/echo")) == "a=1")
        #expect(session.cookieStore?.cookies.map(\.name) == ["a"])
    }

    @Test("policy never: nothing is stored; cookies set by hand are still sent")
    func policyNever() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let store = try #require(session.cookieStore)
        try store.setCookie(Cookie(name: "byhand", value: "1", domain: "127.0.0.1"))
        store.cookieAcceptPolicy = .never

        try await set(session, server, "fromserver=1")
        try store.setCookie(Cookie(name: "ignored", value: "1", domain: "127.0.0.1"))

        #expect(store.cookies.map(\.name) == ["byhand"])
        #expect(try await sentCookie(session, server.url("/echo")) == "byhand=1")
        // The easy handle that held the read-only copy is reused: nothing of it is left.
        #expect(try await sentCookie(session, server.url("/echo"), handle: false) == nil)
    }

    @Test("policy onlyFromMainDocumentDomain: stored only when the host is the main document's")
    func policyMainDocumentDomain() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let store = try #require(session.cookieStore)
        store.cookieAcceptPolicy = .onlyFromMainDocumentDomain

        try await set(session, server, "third=1", main: URL(string: "http://elsewhere.test/page")!)
        try await set(session, server, "own=1")
        try await set(session, server, "first=1", main: server.url("/page"))

        #expect(store.cookies.map(\.name).sorted() == ["first", "own"])
        #expect(try await sentCookie(session, server.url("/echo"), main: URL(string: "http://elsewhere.test/")!)?
            .contains("own=1") == true)
    }

    @Test("sessions sharing a store see each other's cookies; nil sends none")
    func sharedAndNoStore() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let store = CookieStore()
        var configuration = SessionConfiguration()
        configuration.cookieStore = store
        let one = try SessionManager(configuration: configuration)
        defer { one.invalidateAndCancel() }
        let two = try SessionManager(configuration: configuration)
        defer { two.invalidateAndCancel() }
        configuration.cookieStore = nil
        let none = try SessionManager(configuration: configuration)
        defer { none.invalidateAndCancel() }

        try await set(one, server, "shared=1")
        try await set(none, server, "never=1")

        #expect(try await sentCookie(two, server.url("/echo")) == "shared=1")
        #expect(try await sentCookie(none, server.url("/echo")) == nil)
        #expect(store.cookies.map(\.name) == ["shared"])
        let fresh1 = try SessionManager(), fresh2 = try SessionManager()
        defer { fresh1.invalidateAndCancel(); fresh2.invalidateAndCancel() }
        #expect(fresh1.cookieStore != nil && fresh1.cookieStore !== fresh2.cookieStore)
    }

    @Test("Netscape round trip: export, import into a fresh session, the cookies are sent")
    func netscapeRoundTrip() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let folder = try TemporaryDirectory()
        let file = folder.file("jar.txt")
        do {
            let session = try SessionManager()
            defer { session.invalidateAndCancel() }
            try await set(session, server, "persist=1; Max-Age=600; HttpOnly", "session=2")
            try session.cookieStore?.write(to: file)
        }

        var configuration = SessionConfiguration()
        configuration.cookieStore = try CookieStore(contentsOf: file)
        let fresh = try SessionManager(configuration: configuration)
        defer { fresh.invalidateAndCancel() }

        let text = try String(contentsOf: file, encoding: .utf8)
        #expect(text.contains("#HttpOnly_127.0.0.1\tFALSE\t/\tFALSE\t"))
        #expect(try await sentCookie(fresh, server.url("/echo"))?.split(separator: ";").map {
            $0.trimmingCharacters(in: .whitespaces)
        }.sorted() == ["persist=1", "session=2"])
        #expect(fresh.cookieStore?.cookies.first { $0.name == "persist" }?.isHTTPOnly == true)
    }

    @Test("write(to:) makes a new jar 0600 and keeps an existing jar's mode under a 022 umask (issue 25 item 6)")
    func jarPermissions() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        try await set(session, server, "sid=s3cret; Max-Age=600; HttpOnly")
        let store = try #require(session.cookieStore)
        let folder = try TemporaryDirectory()
        // Foundation's atomic write made the file 0666 minus this umask: 0644.
        let previous = umask(0o022)
        defer { umask(previous) }

        let fresh = folder.file("new.txt")
        try store.write(to: fresh)
        let kept = folder.file("kept.txt")
        try store.write(to: kept)
        #expect(chmod(kept.path, 0o600) == 0)
        try store.write(to: kept)
        let shared = folder.file("shared.txt")
        try store.write(to: shared)
        #expect(chmod(shared.path, 0o640) == 0)
        try store.write(to: shared)

        #expect(fileMode(fresh) == 0o600)
        #expect(fileMode(kept) == 0o600)
        #expect(fileMode(shared) == 0o640)
        #expect(try String(contentsOf: kept, encoding: .utf8).contains("\tsid\ts3cret"))
        // Nothing left beside them (the temporary file was renamed).
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.url.path).sorted()
        #expect(names == ["kept.txt", "new.txt", "shared.txt"])
    }

    @Test("a cookie for a public suffix (Domain=co.uk) is refused, real socket (issue 25 item 9)",
          .enabled(if: CookieStore.enforcesPublicSuffixList,
                   "this libcurl has no libpsl: it accepts Domain=co.uk (see README, Cookies)"))
    func publicSuffixRefused() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let port = server.url("/").port!
        var configuration = SessionConfiguration()
        configuration.resolve = ["www.example.co.uk:\(port):127.0.0.1", "other.co.uk:\(port):127.0.0.1"]
        let session = try SessionManager(configuration: configuration)
        defer { session.invalidateAndCancel() }

        try await set(session, server, "wide=1; Domain=co.uk", "own=1; Domain=example.co.uk",
                      host: "www.example.co.uk")

        let other = URL(string: "http://other.co.uk:\(port)/echo")!
        #expect(try await sentCookie(session, other) == nil)
        #expect(session.cookieStore?.cookies.map(\.name) == ["own"])
    }

    @Test("malformed Set-Cookie lines from the server: no crash, the valid ones kept")
    func malformedSetCookie() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }

        try await set(session, server, "=novalue", ";;;", "noequals", "x=1; Domain=.", "y=2; Domain=not-my-host.test",
                      "z=3; Expires=garbage; Max-Age=abc; Path", "\u{7f}bad=1",
                      String(repeating: "k", count: 6000) + "=v",
                      "ok=1")

        let names = session.cookieStore?.cookies.map(\.name) ?? []
        // libcurl's verdicts: the cookie for another domain and the empty name are refused.
        #expect(names.contains("ok"))
        #expect(!names.contains("y") && !names.contains(""))
        #expect(try await sentCookie(session, server.url("/echo"))?.contains("ok=1") == true)
    }

    @Test("the store is safe from other threads while two sessions' transfers use it")
    func concurrentUse() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let store = CookieStore()
        var configuration = SessionConfiguration()
        configuration.cookieStore = store
        let one = try SessionManager(configuration: configuration)
        defer { one.invalidateAndCancel() }
        let two = try SessionManager(configuration: configuration)
        defer { two.invalidateAndCancel() }

        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<8 {
                group.addTask { try await self.set(i % 2 == 0 ? one : two, server, "t\(i)=\(i)") }
                group.addTask {
                    try store.setCookie(Cookie(name: "api\(i)", value: "\(i)", domain: "127.0.0.1"))
                    _ = store.cookies(for: server.url("/echo"))
                    store.deleteCookie(Cookie(name: "api\(i)", value: "", domain: "127.0.0.1"))
                }
            }
            try await group.waitForAll()
        }

        let names = Set(store.cookies.map(\.name))
        #expect(names == Set((0..<8).map { "t\($0)" }))
        #expect(try await sentCookie(two, server.url("/echo"))?.split(separator: ";").count == 8)
    }

    @Test("deleteCookie, removeCookies(since:) and resetCookies change what is sent")
    func deletion() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let store = try #require(session.cookieStore)
        try await set(session, server, "a=1", "b=2")
        let marker = Date()
        try await set(session, server, "c=3")

        store.deleteCookie(Cookie(name: "a", value: "", domain: "127.0.0.1"))
        #expect(try await sentCookie(session, server.url("/echo")).map { $0.contains("a=1") } == false)
        store.removeCookies(since: marker)
        #expect(try await sentCookie(session, server.url("/echo")) == "b=2")
        store.resetCookies()
        #expect(try await sentCookie(session, server.url("/echo")) == nil)
        #expect(store.cookies.isEmpty)
    }
}

/// The permission bits of the file at `url`, or -1.
private func fileMode(_ url: URL) -> Int {
    var info = stat()
    return stat(url.path, &info) == 0 ? Int(info.st_mode & 0o7777) : -1
}
