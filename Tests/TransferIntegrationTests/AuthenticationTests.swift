import Foundation
import TestSupport
import Testing
import Transfer

/// HTTP authentication over loopback: Digest (RFC 7616) and Basic answered by
/// libcurl, the challenge hook's view of a 401, and the bearer helper.
@Suite("HTTP authentication: Digest, Basic, bearer", .serialized)
struct AuthenticationTests {
    /// Requests the server saw for `path` (any query).
    private func requests(_ server: TestServer, _ path: String) -> [RecordedRequest] {
        server.requests.filter { $0.path == path }
    }

    @Test("a request credential answers Digest MD5 with qop=auth, SHA-256, and MD5 without qop", arguments: [
        "algorithm=MD5", "algorithm=SHA-256", "qop=none", "algorithm=SHA-256&qop=none",
    ])
    func digestRightPassword(query: String) async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        var request = Request(url: server.url("/digest-auth/ann/s3cret?\(query)"))
        request.credential = Credential(user: "ann", password: "s3cret")
        request.credentialSchemes = [.digest]

        let (data, response) = try await session.data(for: request)

        #expect(response.statusCode == 200)
        #expect(String(decoding: data, as: UTF8.self).contains("\"authenticated\":true"))
        let seen = requests(server, "/digest-auth/ann/s3cret")
        #expect(seen.count == 2)
        #expect(seen.first?.header("Authorization") == nil)
        #expect(seen.last?.header("Authorization")?.hasPrefix("Digest ") == true)
    }

    @Test("a wrong Digest password is answered once: the 401 is the result after exactly two requests")
    func digestWrongPassword() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        var request = Request(url: server.url("/digest-auth/ann/s3cret?algorithm=SHA-256"))
        request.credential = Credential(user: "ann", password: "wrong")

        let (_, response) = try await session.data(for: request)

        #expect(response.statusCode == 401)
        #expect(requests(server, "/digest-auth/ann/s3cret").count == 2)
    }

    @Test("a stale=true nonce is renewed without asking anyone, and the right answer passes")
    func digestStaleNonce() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        var request = Request(url: server.url("/digest-auth/ann/s3cret?stale=1"))
        request.credential = Credential(user: "ann", password: "s3cret")

        let (_, response) = try await session.data(for: request)

        #expect(response.statusCode == 200)
        // Challenge, the answer to the stale nonce, the answer to the fresh one.
        let seen = requests(server, "/digest-auth/ann/s3cret")
        #expect(seen.count == 3)
        #expect(seen.compactMap { $0.header("Authorization") }.count == 2)
    }

    @Test("the challenge hook sees scheme digest and the realm, and its credential is answered by libcurl")
    func digestThroughHook() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        let seen = EventLog()
        session.hooks.taskDidReceiveChallenge = { _, _, challenge in
            seen.add("\(challenge.scheme.map(String.init(describing:)) ?? "-") \(challenge.realm ?? "-") "
                + "\(challenge.previousFailureCount)")
            return .useCredential(Credential(user: "ann", password: "s3cret"))
        }

        let (_, response) = try await session.data(for: Request(url: server.url("/digest-auth/ann/s3cret")))

        #expect(response.statusCode == 200)
        #expect(seen.all == ["digest TestServer digest 0"])
        // The hook's 401, then libcurl's own challenge round and its answer.
        #expect(requests(server, "/digest-auth/ann/s3cret").compactMap { $0.header("Authorization") }.count == 1)
    }

    @Test("a hook that keeps answering the same wrong password gets one retry, then the 401, never a loop")
    func sameWrongPasswordIsNotRetried() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        let asked = EventLog()
        session.hooks.taskDidReceiveChallenge = { _, _, challenge in
            asked.add("\(challenge.previousFailureCount)")
            return .useCredential(Credential(user: "ann", password: "wrong"))
        }

        let (_, digest) = try await session.data(for: Request(url: server.url("/digest-auth/ann/s3cret")))
        let (_, basic) = try await session.data(for: Request(url: server.url("/basic-auth/ann/s3cret")))

        #expect(digest.statusCode == 401)
        #expect(basic.statusCode == 401)
        #expect(asked.all == ["0", "1", "0", "1"])
        let digestAnswers = requests(server, "/digest-auth/ann/s3cret").compactMap { $0.header("Authorization") }
        #expect(digestAnswers.count == 1)
        #expect(requests(server, "/basic-auth/ann/s3cret").count == 2)
    }

    @Test("Basic through a request credential and through the up-front header both pass")
    func basicStillWorks() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        var challenged = Request(url: server.url("/basic-auth/ann/s3cret"))
        challenged.credential = Credential(user: "ann", password: "s3cret")
        var upFront = Request(url: server.url("/basic-auth/bob/pa55"))
        upFront.headers.replaceOrAdd(.authorization(username: "bob", password: "pa55"))

        let (_, first) = try await session.data(for: challenged)
        let (_, second) = try await session.data(for: upFront)

        #expect(first.statusCode == 200)
        #expect(second.statusCode == 200)
        #expect(requests(server, "/basic-auth/bob/pa55").count == 1)
    }

    @Test("the bearer helper's header reaches the server, and a Bearer 401 reaches the hook as bearer")
    func bearer() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        let seen = EventLog()
        session.hooks.taskDidReceiveChallenge = { _, _, challenge in
            seen.add("\(challenge.scheme.map(String.init(describing:)) ?? "-") \(challenge.realm ?? "-")")
            return .useCredential(Credential(user: "ann", password: "ignored"))
        }
        var request = Request(url: server.url("/echo"))
        request.headers.replaceOrAdd(.authorization(bearerToken: "t0k3n.abc"))
        var components = URLComponents(url: server.url("/status/401"), resolvingAgainstBaseURL: false)!
        components.queryItems = [URLQueryItem(name: "challenge", value: #"Bearer realm="api", error="invalid_token""#)]

        let (_, response) = try await session.data(for: request)
        let recorded = requests(server, "/echo").last
        let (_, refused) = try await session.data(for: Request(url: components.url!))

        #expect(response.statusCode == 200)
        #expect(recorded?.header("Authorization") == "Bearer t0k3n.abc")
        #expect(refused.statusCode == 401)
        #expect(seen.all == ["bearer api"])
    }
}
