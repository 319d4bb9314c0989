import CTransfer
import Foundation
import TestSupport
import Testing
import Transfer

/// The defaults a request goes out with and the messages of its limits, seen
/// on the wire by the in-process server.
@Suite("Defaults and messages")
struct DefaultsTests {
    private var expectedAgent: String { "Transfer/\(TransferVersion.library)" }

    /// The User-Agent the server recorded for the request to `path`.
    private func agent(_ server: TestServer, _ path: String) throws -> String? {
        let record = try #require(server.requests.last { $0.target == path }, "no request to \(path)")
        return record.header("User-Agent")
    }

    @Test("SessionManager sends Transfer/<version> on the fast path, as a task, and as a download")
    func sessionManagerSendsTheDefault() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }

        _ = try await session.data(for: Request(url: server.url("/bytes/8?seed=1")))
        #expect(try agent(server, "/bytes/8?seed=1") == expectedAgent)
        _ = try await session.upload(for: Request(url: server.url("/echo?n=2")), from: Data("x".utf8))
        #expect(try agent(server, "/echo?n=2") == expectedAgent)
        let folder = try TemporaryDirectory()
        _ = try await session.download(for: Request(url: server.url("/bytes/8?seed=3")), to: folder.file("f"))
        #expect(try agent(server, "/bytes/8?seed=3") == expectedAgent)
    }

    @Test("HTTPSessionManager sends the same Transfer/<version>")
    func httpSessionManagerSendsTheDefault() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let manager = try HTTPSessionManager(baseURL: server.baseURL)
        defer { manager.invalidateAndCancel() }
        _ = try await manager.get("/json?n=4")
        #expect(try agent(server, "/json?n=4") == expectedAgent)
    }

    @Test("a User-Agent of the session or of the request wins; an empty one sends none")
    func userSetAgentWins() async throws {
        let server = try TestServer()
        defer { server.stop() }
        var configuration = SessionConfiguration.default
        configuration.httpAdditionalHeaders = ["user-agent": "session-agent/1"]
        let session = try SessionManager(configuration: configuration)
        defer { session.invalidateAndCancel() }
        let plain = try SessionManager()
        defer { plain.invalidateAndCancel() }

        _ = try await session.data(for: Request(url: server.url("/bytes/8?seed=5")))
        #expect(try agent(server, "/bytes/8?seed=5") == "session-agent/1")
        _ = try await plain.data(for: Request(url: server.url("/bytes/8?seed=6"), headers: ["User-Agent": "mine/2"]))
        #expect(try agent(server, "/bytes/8?seed=6") == "mine/2")
        _ = try await plain.data(for: Request(url: server.url("/bytes/8?seed=7"), headers: ["User-Agent": ""]))
        #expect(try agent(server, "/bytes/8?seed=7") == nil)
        let record = try #require(server.requests.last { $0.target == "/bytes/8?seed=6" })
        #expect(record.headers.filter { $0.name.lowercased() == "user-agent" }.count == 1)
    }

    @Test("the session's and the request's headers are merged once, as sent: the request's names replace the session's, a repeated name is kept")
    func headersMergeAsSent() async throws {
        let server = try TestServer()
        defer { server.stop() }
        var configuration = SessionConfiguration.default
        configuration.httpAdditionalHeaders = ["X-Tag": "session", "Accept": "text/session"]
        let session = try SessionManager(configuration: configuration)
        defer { session.invalidateAndCancel() }
        let plain = try SessionManager()
        defer { plain.invalidateAndCancel() }
        func values(_ path: String, _ name: String) throws -> [String] {
            let record = try #require(server.requests.last { $0.target == path }, "no request to \(path)")
            return record.headers.filter { $0.name.lowercased() == name.lowercased() }.map(\.value)
        }

        // Both sides: the request's two x-tag fields replace the session's one.
        _ = try await session.data(for: Request(url: server.url("/bytes/8?seed=11"),
                                                headers: ["x-tag": "one", "X-Tag": "two"]))
        #expect(try values("/bytes/8?seed=11", "X-Tag") == ["one", "two"])
        #expect(try values("/bytes/8?seed=11", "Accept") == ["text/session"])
        // The session's alone, and the request's alone.
        _ = try await session.data(for: Request(url: server.url("/bytes/8?seed=12")))
        #expect(try values("/bytes/8?seed=12", "X-Tag") == ["session"])
        _ = try await plain.data(for: Request(url: server.url("/bytes/8?seed=13"), headers: ["X-Tag": "alone"]))
        #expect(try values("/bytes/8?seed=13", "X-Tag") == ["alone"])

        // A session header that would inject a line is refused before sending.
        var injecting = SessionConfiguration.default
        injecting.httpAdditionalHeaders = ["X-Bad": "a\r\nX-Injected: 1"]
        let bad = try SessionManager(configuration: injecting)
        defer { bad.invalidateAndCancel() }
        let before = server.requests.count
        await #expect(throws: TransferError.self) {
            _ = try await bad.data(for: Request(url: server.url("/bytes/8?seed=14"), headers: ["X-Tag": "r"]))
        }
        #expect(server.requests.count == before)
    }

    @Test("Accept-Encoding goes once with libcurl's codings; the request's own field replaces it")
    func acceptEncodingAsSent() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        var off = SessionConfiguration.default
        off.acceptsCompressedResponses = false
        let plain = try SessionManager(configuration: off)
        defer { plain.invalidateAndCancel() }
        func values(_ path: String) throws -> [String] {
            let record = try #require(server.requests.last { $0.target == path }, "no request to \(path)")
            return record.headers.filter { $0.name.lowercased() == "accept-encoding" }.map(\.value)
        }
        // What libcurl lists for CURLOPT_ACCEPT_ENCODING "", from the
        // decoders it was built with.
        let features = String(cString: ct_curl_features()).split(separator: " ")
        var codings: [String] = []
        if features.contains("libz") { codings += ["deflate", "gzip"] }
        if features.contains("brotli") { codings.append("br") }
        if features.contains("zstd") { codings.append("zstd") }
        let expected = codings.isEmpty ? "identity" : codings.joined(separator: ", ")

        // Asked for and decoded: on the fast path, as a task, and on each
        // request of a redirect chain.
        let (body, _) = try await session.data(for: Request(url: server.url("/gzip-zeros/5000")))
        #expect(body == Data(count: 5000))
        #expect(try values("/gzip-zeros/5000") == [expected])
        let (uploaded, _) = try await session.upload(for: Request(url: server.url("/gzip-zeros/6000")),
                                                     from: Data("x".utf8))
        #expect(uploaded == Data(count: 6000))
        #expect(try values("/gzip-zeros/6000") == [expected])
        _ = try await session.data(for: Request(url: server.url("/redirect/2")))
        for path in ["/redirect/2", "/redirect/1", "/redirect/0"] { #expect(try values(path) == [expected]) }

        // The request's own field, from the request or the session, is the one sent.
        _ = try await session.data(for: Request(url: server.url("/bytes/8?seed=21"),
                                                headers: ["accept-encoding": "identity"]))
        #expect(try values("/bytes/8?seed=21") == ["identity"])
        var named = SessionConfiguration.default
        named.httpAdditionalHeaders = ["Accept-Encoding": "gzip"]
        let gzipOnly = try SessionManager(configuration: named)
        defer { gzipOnly.invalidateAndCancel() }
        let (decoded, _) = try await gzipOnly.data(for: Request(url: server.url("/gzip-zeros/7000")))
        #expect(decoded == Data(count: 7000))
        #expect(try values("/gzip-zeros/7000") == ["gzip"])

        // Decoding off: nothing asked for.
        _ = try await plain.data(for: Request(url: server.url("/bytes/8?seed=22")))
        #expect(try values("/bytes/8?seed=22") == [])
    }

    @Test("responseTooLarge names the setting to raise")
    func responseTooLargeNamesTheSetting() async throws {
        let server = try TestServer()
        defer { server.stop() }
        var configuration = SessionConfiguration.default
        configuration.maximumResponseBodySize = 1024
        let session = try SessionManager(configuration: configuration)
        defer { session.invalidateAndCancel() }
        do {
            _ = try await session.data(for: Request(url: server.url("/bytes/4096")))
            Issue.record("a 4 KiB body passed a 1 KiB limit")
        } catch {
            #expect(error.code == .responseTooLarge)
            #expect(error.message.contains("maximumResponseBodySize"), "\(error.message)")
        }
    }
}
