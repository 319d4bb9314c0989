import Foundation
import TestSupport
import Testing

@testable import Transfer

#if canImport(Glibc)
    import Glibc
#endif

/// Issue 25 items 2, 3 and 5: the response cache served one user's response
/// to another, ignored the security policy, and trusted any folder. Each test
/// performs the attack over loopback; TestServer's `/whoami` answers
/// "for <Authorization or Cookie>", so a body names the user it was made for.
@Suite("HTTP cache: credentials, cookies, trust and the disk folder", .serialized)
struct CacheSecurityTests {
    private func session(_ cache: ResponseCache, _ change: (inout SessionConfiguration) -> Void = { _ in }) throws
        -> SessionManager
    {
        var configuration = SessionConfiguration()
        configuration.responseCache = cache
        change(&configuration)
        return try SessionManager(configuration: configuration)
    }

    private func text(_ session: SessionManager, _ url: URL) async throws -> String {
        let (data, _) = try await session.data(for: Request(url: url))
        return String(decoding: data, as: UTF8.self)
    }

    /// Requests for `/whoami` the server received.
    private func whoamis(_ server: TestServer) -> Int {
        server.requests.filter { $0.path == "/whoami" }.count
    }

    /// The bytes of every file in `folder`, concatenated.
    private func folderBytes(_ folder: URL) throws -> Data {
        var all = Data()
        for name in try FileManager.default.contentsOfDirectory(atPath: folder.path) {
            all += (try? Data(contentsOf: folder.appendingPathComponent(name))) ?? Data()
        }
        return all
    }

    // MARK: - Item 2: credentials and cookies

    @Test("a response fetched with a 401 hook's credential is served neither to an anonymous session sharing the cache nor after the hook is removed")
    func hookCredentialIsNotShared() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let cache = try ResponseCache()
        let alice = try session(cache)
        defer { alice.invalidateAndCancel() }
        let anonymous = try session(cache)
        defer { anonymous.invalidateAndCancel() }
        alice.hooks.taskDidReceiveChallenge = { _, _, _ in .useCredential(Credential(user: "alice", password: "pw")) }
        let inbox = server.url("/whoami?auth=basic&cc=max-age%3D600")

        // Given Alice's inbox, fetched with the hook's answer to a 401...
        let alices = try await text(alice, inbox)
        #expect(alices == "for Basic " + Data("alice:pw".utf8).base64EncodedString())

        // ...an anonymous session sharing the cache is refused by the server, not served her inbox...
        #expect(try await text(anonymous, inbox) == "who are you?\n")
        // ...and so is Alice's session once the hook is gone.
        alice.hooks.taskDidReceiveChallenge = nil
        #expect(try await text(alice, inbox) == "who are you?\n")
        #expect(whoamis(server) == 4)   // 401 + 200 for Alice, then two 401s
    }

    @Test("after resetCookies() (a logout) a response fetched with the session's cookie is not served from the cache")
    func logoutEndsCachedInbox() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try session(try ResponseCache())
        defer { session.invalidateAndCancel() }
        let inbox = server.url("/whoami?cc=max-age%3D600")

        // Given a logged-in session whose inbox is cached...
        _ = try await text(session, server.url("/whoami?setcookie=sid%3Dalice"))
        #expect(try await text(session, inbox) == "for sid=alice")
        #expect(try await text(session, inbox) == "for sid=alice")
        #expect(whoamis(server) == 2)

        // ...when it logs out...
        session.cookieStore?.resetCookies()

        // ...then the inbox is fetched again, without the cookie.
        #expect(try await text(session, inbox) == "for anonymous")
        #expect(whoamis(server) == 3)
    }

    @Test("a URL's user and password enter neither the cache key nor a disk entry; the response is not served without them")
    func userinfoStaysOutOfTheCache() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let folder = try TemporaryDirectory()
        let cache = try ResponseCache(diskCapacity: 1 << 20, directory: folder.file("cache"))
        let session = try session(cache)
        defer { session.invalidateAndCancel() }
        let plain = server.url("/whoami?cc=max-age%3D600")
        var components = try #require(URLComponents(url: plain, resolvingAgainstBaseURL: false))
        components.user = "alice"
        components.password = "hunter2secret"
        let withPassword = try #require(components.url)

        let alices = try await text(session, withPassword)
        #expect(alices.hasPrefix("for Basic "))

        // Neither the key nor a file holds the password (nor the user name's pair).
        #expect(ResponseCache.key(for: Request(url: withPassword)) == "GET " + plain.absoluteString)
        let files = try folderBytes(folder.file("cache"))
        #expect(files.range(of: Data("hunter2secret".utf8)) == nil)
        #expect(files.range(of: Data("alice:".utf8)) == nil)
        // And the same URL without the credential is not served Alice's response.
        #expect(try await text(session, plain) == "for anonymous")
    }

    @Test("Set-Cookie is never written to disk with an entry, even a public one")
    func setCookieIsNotPersisted() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let folder = try TemporaryDirectory()
        let cache = try ResponseCache(diskCapacity: 1 << 20, directory: folder.file("cache"))
        let session = try session(cache)
        defer { session.invalidateAndCancel() }
        let target = server.url("/whoami?cc=public%2C%20max-age%3D600&setcookie=sid%3Ds3cr3t-session")

        _ = try await text(session, target)

        #expect(!(try FileManager.default.contentsOfDirectory(atPath: folder.file("cache").path)).isEmpty)
        let files = try folderBytes(folder.file("cache"))
        // (The URL holds the value percent-encoded, as `sid%3D...`: the header's form is `sid=...`.)
        #expect(files.range(of: Data("sid=s3cr3t-session".utf8)) == nil)
        #expect(files.range(of: Data("Set-Cookie".utf8)) == nil)
    }

    // MARK: - Item 3: trust

    @Test("a response from an impostor fetched with allowInvalidCertificates is served neither to a strict session sharing the cache nor after setSecurityPolicy",
          .enabled(if: FileManager.default.isExecutableFile(atPath: TLSFront.socatPath), "socat is not installed"))
    func weakPolicyEntriesAreNotServed() async throws {
        let pki = try CertificateFactory.shared()
        let server = try await TestServer.start()
        defer { server.stop() }
        // The impostor: a self-signed certificate for 127.0.0.1.
        let impostor = try TLSFront(backendPort: UInt16(server.url("/").port!),
                                    certificateChain: pki.selfSigned.certificateFile.path,
                                    key: pki.selfSigned.keyFile.path)
        defer { impostor.stop() }
        let cache = try ResponseCache()
        let weak = try session(cache) { $0.caFile = pki.root.certificateFile.path }
        defer { weak.invalidateAndCancel() }
        let strict = try session(cache) { $0.caFile = pki.root.certificateFile.path }
        defer { strict.invalidateAndCancel() }
        var lax = SecurityPolicy.defaultPolicy
        lax.allowInvalidCertificates = true
        lax.validatesDomainName = false
        try weak.setSecurityPolicy(lax)
        let target = try #require(URL(string: "https://127.0.0.1:\(impostor.port)/cache/impostor?cc=max-age%3D600"))

        // Given the impostor's answer, accepted by the weakened session...
        #expect(try await text(weak, target) == "cached impostor")

        // ...a strict session sharing the cache is not served it: it meets the impostor and refuses it...
        await #expect(throws: TransferError.self) { _ = try await strict.data(for: Request(url: target)) }
        // ...and neither is the weakened session once its policy is strict again.
        try weak.setSecurityPolicy(.defaultPolicy)
        await #expect(throws: TransferError.self) { _ = try await weak.data(for: Request(url: target)) }
        #expect(server.requests.filter { $0.path == "/cache/impostor" }.count == 1)
    }

    @Test("what a server-trust hook accepted from an impostor the policy refused is not served to a strict session sharing the cache",
          .enabled(if: FileManager.default.isExecutableFile(atPath: TLSFront.socatPath), "socat is not installed"))
    func hookAcceptedEntriesAreNotServed() async throws {
        let pki = try CertificateFactory.shared()
        let server = try await TestServer.start()
        defer { server.stop() }
        let impostor = try TLSFront(backendPort: UInt16(server.url("/").port!),
                                    certificateChain: pki.selfSigned.certificateFile.path,
                                    key: pki.selfSigned.keyFile.path)
        defer { impostor.stop() }
        let cache = try ResponseCache()
        let trusting = try session(cache) { $0.caFile = pki.root.certificateFile.path }
        defer { trusting.invalidateAndCancel() }
        let strict = try session(cache) { $0.caFile = pki.root.certificateFile.path }
        defer { strict.invalidateAndCancel() }
        trusting.hooks.sessionDidReceiveChallenge = { _, challenge in
            guard let trust = challenge.serverTrust else { return .performDefaultHandling }
            return .useCredential(.serverTrust(trust))
        }
        let target = try #require(URL(string: "https://127.0.0.1:\(impostor.port)/cache/accepted?cc=max-age%3D600"))

        #expect(try await text(trusting, target) == "cached accepted")

        await #expect(throws: TransferError.self) { _ = try await strict.data(for: Request(url: target)) }
        #expect(server.requests.filter { $0.path == "/cache/accepted" }.count == 1)
    }

    @Test("an https entry fetched under one policy is not served after setSecurityPolicy changes it",
          .enabled(if: FileManager.default.isExecutableFile(atPath: TLSFront.socatPath), "socat is not installed"))
    func policyChangeIgnoresOlderEntries() async throws {
        let pki = try CertificateFactory.shared()
        let server = try await TestServer.start()
        defer { server.stop() }
        let front = try TLSFront(backendPort: UInt16(server.url("/").port!),
                                 certificateChain: try pki.serverChainFile(for: pki.leaf).path,
                                 key: pki.leaf.keyFile.path)
        defer { front.stop() }
        let session = try session(try ResponseCache()) { $0.caFile = pki.root.certificateFile.path }
        defer { session.invalidateAndCancel() }
        let target = try #require(URL(string: "https://127.0.0.1:\(front.port)/cache/pinned?cc=max-age%3D600"))
        #expect(try await text(session, target) == "cached pinned")
        #expect(try await text(session, target) == "cached pinned")

        // A pin that matches no key of this server: nothing it serves may be trusted now.
        var pinned = SecurityPolicy.policy(pinningMode: .publicKey)
        pinned.pinnedPublicKeyHashes = ["sha256//" + Data(repeating: 5, count: 32).base64EncodedString()]
        try session.setSecurityPolicy(pinned)

        await #expect(throws: TransferError.self) { _ = try await session.data(for: Request(url: target)) }
        #expect(server.requests.filter { $0.path == "/cache/pinned" }.count == 1)
    }

    // MARK: - Item 5: the disk folder

    /// Writes an entry for `url` into `folder` as an attacker would: a 200
    /// with `body`, fresh for ten minutes. Returns the file's path.
    @discardableResult
    private func plant(_ url: URL, body: String, in folder: URL) throws -> String {
        let key = try #require(ResponseCache.key(for: Request(url: url)))
        let response = HTTPResponse(url: url, statusCode: 200, headers: ["Cache-Control": "max-age=600"])
        let bytes = CacheEntryCodec.encode(key: key, CachedResponse(response: response, data: Data(body.utf8)))
        let path = folder.appendingPathComponent(ResponseCache.fileName(forKey: key)).path
        try bytes.write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test("an existing cache folder others can write to, or a symlink, is refused with fileError: a response planted there is never served",
          arguments: ["world-writable", "symlink"])
    func untrustedFolderIsRefused(kind: String) async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let root = try TemporaryDirectory()
        defer { root.remove() }
        let real = root.file("real")
        #expect(mkdir(real.path, 0o700) == 0)
        let folder: URL
        if kind == "symlink" {
            folder = root.file("link")
            #expect(symlink(real.path, folder.path) == 0)
        } else {
            folder = real
            #expect(chmod(real.path, 0o777) == 0)
        }
        let target = server.url("/cache/planted?cc=max-age%3D600")
        try plant(target, body: "planted by someone else", in: real)

        let cache: ResponseCache
        do {
            cache = try ResponseCache(diskCapacity: 1 << 20, directory: folder)
        } catch {
            #expect(error.code == .fileError, "\(error)")
            #expect(error.fileURL == folder)
            return
        }
        // The old behaviour: the folder is used, and the planted entry answers the victim.
        let session = try session(cache)
        defer { session.invalidateAndCancel() }
        let body = try await text(session, target)
        Issue.record("the \(kind) folder was accepted; the request got \"\(body)\"")
    }

    @Test("an entry file or a temporary file owned by another user is neither served nor removed",
          .enabled(if: geteuid() == 0, "needs root to give a file to another user"))
    func foreignFilesAreLeftAlone() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let root = try TemporaryDirectory()
        defer { root.remove() }
        let folder = root.file("cache")
        #expect(mkdir(folder.path, 0o700) == 0)
        let target = server.url("/cache/foreign?cc=max-age%3D600")
        let entry = try plant(target, body: "planted by uid 65534", in: folder)
        let temporary = folder.appendingPathComponent(".tmp-foreign").path
        try Data("not ours".utf8).write(to: URL(fileURLWithPath: temporary))
        #expect(chown(entry, 65534, 65534) == 0 && chown(temporary, 65534, 65534) == 0)

        let cache = try ResponseCache(diskCapacity: 1 << 20, directory: folder)
        let session = try session(cache)
        defer { session.invalidateAndCancel() }

        #expect(try await text(session, target) == "cached foreign")
        #expect(server.requests.filter { $0.path == "/cache/foreign" }.count == 1)
        #expect(FileManager.default.fileExists(atPath: temporary))
    }
}
