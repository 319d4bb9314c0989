import Foundation
import TestSupport
import Testing
import Transfer

/// Issue 11 item 9: credentials, cookies and proxy credentials never follow a
/// redirect to another origin (scheme, host or port), on both redirect paths:
/// followed by the engine (curl) and followed in Swift (a redirect hook is set).
/// Two in-process servers on two random loopback ports; the second records
/// the headers of the hop it receives.
@Suite("Security: what follows a redirect", .serialized)
struct SecurityRedirectTests {
    static let secretHeaders: HTTPHeaders = [
        "Authorization": "Bearer top-secret",
        "Cookie": "sid=s3cret",
        "Proxy-Authorization": "Basic cHJveHk6c2VjcmV0",
    ]

    enum Path: CaseIterable, CustomStringConvertible {
        case engine, swift
        var description: String { self == .engine ? "engine-followed" : "Swift-followed" }
    }

    /// A session following redirects on `path`; the Swift path is taken as soon
    /// as a redirect hook is set.
    private func session(_ path: Path, configure: (inout SessionConfiguration) -> Void = { _ in }) throws
        -> SessionManager
    {
        let session = try makeSession(configure)
        if path == .swift {
            session.hooks.taskWillPerformHTTPRedirection = { _, _, _, request in request }
        }
        return session
    }

    /// The last request `server` recorded for `path`.
    private func lastRequest(_ server: TestServer, _ path: String) throws -> RecordedRequest {
        try #require(server.requests.last { $0.path == path }, "no request for \(path) reached the server")
    }

    @Test("Authorization, Cookie and Proxy-Authorization do not follow to another port",
          arguments: Path.allCases)
    func crossPort(_ path: Path) async throws {
        let origin = try await TestServer.start()
        defer { origin.stop() }
        let other = try await TestServer.start()
        defer { other.stop() }
        let session = try session(path)
        defer { session.invalidateAndCancel() }
        var request = Request(url: origin.url("/redirect-to?url=\(other.url("/echo").absoluteString)"))
        request.headers = Self.secretHeaders

        let (_, response) = try await session.data(for: request)

        #expect(response.statusCode == 200)
        let hop = try lastRequest(other, "/echo")
        #expect(hop.header("Authorization") == nil)
        #expect(hop.header("Cookie") == nil)
        #expect(hop.header("Proxy-Authorization") == nil)
    }

    @Test("Authorization and Cookie do not follow to another host on the same port", arguments: Path.allCases)
    func crossHost(_ path: Path) async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try session(path)
        defer { session.invalidateAndCancel() }
        // 127.0.0.1 -> localhost: same server, same port, another host name.
        var request = Request(url: server.url("/redirect-to?url=http://localhost:\(server.port)/echo"))
        request.headers = Self.secretHeaders

        let (_, response) = try await session.data(for: request)

        #expect(response.statusCode == 200)
        let hop = try lastRequest(server, "/echo")
        #expect(hop.header("Host")?.hasPrefix("localhost") == true)
        #expect(hop.header("Authorization") == nil)
        #expect(hop.header("Cookie") == nil)
        #expect(hop.header("Proxy-Authorization") == nil)
    }

    @Test("Authorization and Cookie follow a redirect to the same origin; Proxy-Authorization never reaches a server",
          arguments: Path.allCases)
    func sameOrigin(_ path: Path) async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try session(path)
        defer { session.invalidateAndCancel() }
        var request = Request(url: server.url("/redirect-to?url=/echo"))
        request.headers = Self.secretHeaders

        let (_, response) = try await session.data(for: request)

        #expect(response.statusCode == 200)
        let hop = try lastRequest(server, "/echo")
        #expect(hop.header("Authorization") == "Bearer top-secret")
        #expect(hop.header("Cookie") == "sid=s3cret")
        // Proxy credentials are for proxies (CURLOPT_PROXYHEADER): no origin
        // server gets them, on the first hop or any other.
        #expect(hop.header("Proxy-Authorization") == nil)
        #expect(try lastRequest(server, "/redirect-to").header("Proxy-Authorization") == nil)
    }

    @Test("the session's own Authorization and Cookie headers stay with the first origin", arguments: Path.allCases)
    func sessionHeaders(_ path: Path) async throws {
        let origin = try await TestServer.start()
        defer { origin.stop() }
        let other = try await TestServer.start()
        defer { other.stop() }
        let session = try session(path) { $0.httpAdditionalHeaders = Self.secretHeaders }
        defer { session.invalidateAndCancel() }

        _ = try await session.data(for: Request(url: origin.url("/redirect-to?url=\(other.url("/echo").absoluteString)")))
        _ = try await session.data(for: Request(url: origin.url("/redirect-to?url=/echo")))

        let crossed = try lastRequest(other, "/echo")
        #expect(crossed.header("Authorization") == nil)
        #expect(crossed.header("Cookie") == nil)
        let stayed = try lastRequest(origin, "/echo")
        #expect(stayed.header("Authorization") == "Bearer top-secret")
        #expect(stayed.header("Cookie") == "sid=s3cret")
    }

    @Test("a password answered to a 401 is not sent to the origin a redirect leads to", arguments: Path.allCases)
    func challengeCredential(_ path: Path) async throws {
        let origin = try await TestServer.start()
        defer { origin.stop() }
        let other = try await TestServer.start()
        defer { other.stop() }
        let session = try session(path)
        defer { session.invalidateAndCancel() }
        session.hooks.taskDidReceiveChallenge = { _, _, challenge in
            guard case .httpBasic = challenge.kind else { return .performDefaultHandling }
            return .useCredential(Credential(user: "ann", password: "s3cret"))
        }
        let basic = "Basic " + Data("ann:s3cret".utf8).base64EncodedString()

        let crossURL = origin.url("/basic-auth/ann/s3cret?then=\(other.url("/echo").absoluteString)")
        let (_, crossed) = try await session.data(for: Request(url: crossURL))
        let (_, stayed) = try await session.data(for: Request(url: origin.url("/basic-auth/ann/s3cret?then=/echo")))

        #expect(crossed.statusCode == 200)
        #expect(stayed.statusCode == 200)
        #expect(try lastRequest(other, "/echo").header("Authorization") == nil)
        #expect(try lastRequest(origin, "/echo").header("Authorization") == basic)
    }
}
