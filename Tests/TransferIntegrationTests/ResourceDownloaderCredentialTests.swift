import Dispatch
import Foundation
import Testing
import TestSupport
import Transfer

/// Issue 25 item 1: ResourceDownloader gave one user's private response to
/// another. TestServer's `/whoami` answers "for <Authorization or Cookie>", so
/// a body names the user it was fetched for.
@Suite("Resource downloader: credentials are never shared")
struct ResourceDownloaderCredentialTests {
    private func basic(_ user: String, _ password: String) -> String {
        "for Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
    }

    private func body(_ result: Result<ResourceDownloader<Data>.Resource, TransferError>?) -> String? {
        guard case .success(let resource)? = result else { return nil }
        return String(decoding: resource.value, as: UTF8.self)
    }

    /// Results of completion handlers, by tag.
    private final class Results: Sendable {
        let items = Locked<[String: Result<ResourceDownloader<Data>.Resource, TransferError>]>([:])

        func handler(_ tag: String) -> ResourceDownloader<Data>.CompletionHandler {
            { result in self.items.withLock { $0[tag] = result } }
        }

        func result(_ tag: String) -> Result<ResourceDownloader<Data>.Resource, TransferError>? {
            items.withLock { $0[tag] }
        }

        func waitFor(_ count: Int) async throws {
            try await Wait.until("\(count) completions", timeout: defaultDeadline) {
                self.items.withLock { $0.count } >= count
            }
        }
    }

    @Test("Alice and Bob fetching one URL at once with their own credentials each get their own body; later requests are not served Alice's from the cache")
    func concurrentUsersGetTheirOwnBodies() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let downloader = ResourceDownloader(session: session, cache: AutoPurgingCache<Data>())
        let results = Results()
        let target = server.url("/whoami?auth=basic&gate=inbox&cc=max-age%3D600")
        var alice = Request(url: target)
        alice.credential = Credential(user: "alice", password: "a-secret")
        var bob = Request(url: target)
        bob.credential = Credential(user: "bob", password: "b-secret")

        // Given Alice's transfer held at the server after it authenticated...
        downloader.download(alice, completionHandler: results.handler("alice"))
        try await Wait.until("Alice held", timeout: defaultDeadline) { server.heldAtGate("inbox") == 1 }
        // ...when Bob asks for the same URL with his own credential...
        downloader.download(bob, completionHandler: results.handler("bob"))
        try await Wait.until("Bob has a transfer of his own", timeout: defaultDeadline) {
            server.heldAtGate("inbox") == 2
        }
        server.openGate("inbox")
        try await results.waitFor(2)

        // ...then each got the body the server made for them.
        #expect(body(results.result("alice")) == basic("alice", "a-secret"))
        #expect(body(results.result("bob")) == basic("bob", "b-secret"))

        // An anonymous caller is not answered with Alice's body from the cache: the server refuses it.
        let anonymous: Result<ResourceDownloader<Data>.Resource, TransferError>
        do {
            anonymous = .success(try await downloader.resource(for: Request(url: target)))
        } catch {
            anonymous = .failure(error)
        }
        #expect(body(anonymous) == nil)
        guard case .failure(let error) = anonymous else {
            Issue.record("an anonymous request got \(String(describing: body(anonymous)))")
            return
        }
        #expect(error.httpStatus == 401)
        // A third user gets her own body, not a cached one.
        var carol = Request(url: target)
        carol.credential = Credential(user: "carol", password: "c-secret")
        let carols = try await downloader.resource(for: carol)
        #expect(String(decoding: carols.value, as: UTF8.self) == basic("carol", "c-secret"))
        #expect(!carols.isFromCache)
    }

    @Test("a session's additional Authorization header keeps its responses out of a cache shared with an anonymous session")
    func sessionHeadersAreNotShared() async throws {
        let server = try TestServer()
        defer { server.stop() }
        var configuration = SessionConfiguration()
        configuration.httpAdditionalHeaders = ["Authorization": "Bearer alice-token"]
        let aliceSession = try SessionManager(configuration: configuration)
        defer { aliceSession.invalidateAndCancel() }
        let anonymousSession = try SessionManager()
        defer { anonymousSession.invalidateAndCancel() }
        let cache = AutoPurgingCache<Data>()
        let forAlice = ResourceDownloader(session: aliceSession, cache: cache)
        let forAnyone = ResourceDownloader(session: anonymousSession, cache: cache)
        let request = Request(url: server.url("/whoami?cc=max-age%3D600"))

        let alices = try await forAlice.value(for: request)
        let anyones = try await forAnyone.resource(for: request)

        #expect(String(decoding: alices, as: UTF8.self) == "for Bearer alice-token")
        #expect(String(decoding: anyones.value, as: UTF8.self) == "for anonymous")
        #expect(!anyones.isFromCache)
        #expect(server.requestCount == 2)
    }

    @Test("a response fetched with the store's cookies is not served from the cache after resetCookies()")
    func cookieResponsesAreNotCached() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let downloader = ResourceDownloader(session: session, cache: AutoPurgingCache<Data>())
        // Given a logged-in session (the server set its cookie)...
        _ = try await session.data(for: Request(url: server.url("/whoami?setcookie=sid%3Dalice")))
        let request = Request(url: server.url("/whoami?cc=max-age%3D600"))
        let inbox = try await downloader.value(for: request)
        #expect(String(decoding: inbox, as: UTF8.self) == "for sid=alice")

        // ...when it logs out...
        session.cookieStore?.resetCookies()
        let after = try await downloader.resource(for: request)

        // ...then the inbox is not served from the cache.
        #expect(String(decoding: after.value, as: UTF8.self) == "for anonymous")
        #expect(!after.isFromCache)
    }

    @Test("requests with credentials under one sharing key join one transfer and one cache entry")
    func sharingKeyOptsIn() async throws {
        let server = try TestServer()
        defer { server.stop() }
        var configuration = SessionConfiguration()
        configuration.httpAdditionalHeaders = ["Authorization": "Bearer team-token"]
        let session = try SessionManager(configuration: configuration)
        defer { session.invalidateAndCancel() }
        let cache = AutoPurgingCache<Data>()
        let downloader = ResourceDownloader(session: session, cache: cache)
        let results = Results()
        let request = Request(url: server.url("/whoami?gate=team"))

        downloader.download(request, sharingKey: "team logo", completionHandler: results.handler("1"))
        downloader.download(request, sharingKey: "team logo", completionHandler: results.handler("2"))
        try await Wait.until("one transfer held", timeout: defaultDeadline) { server.heldAtGate("team") == 1 }
        server.openGate("team")
        try await results.waitFor(2)
        let third = try await downloader.resource(for: request, sharingKey: "team logo")

        #expect(body(results.result("1")) == "for Bearer team-token")
        #expect(body(results.result("2")) == "for Bearer team-token")
        #expect(third.isFromCache)
        #expect(cache.value(withIdentifier: "team logo") != nil)
        #expect(server.requestCount == 1)
    }

    @Test("a URL's user and password never enter a resource key")
    func userinfoIsNotInTheKey() throws {
        let request = Request(url: try #require(URL(string: "http://alice:hunter2@example.com/inbox")))
        let key = ResourceKey.string(for: request, varyingHeaderFields: ResourceKey.defaultVaryingHeaderFields)
        #expect(key == "GET http://example.com/inbox")
    }
}
