import Foundation
import TestSupport
import Testing

@testable import Transfer

/// `Request.curlDescription` is checked the only way that matters: the printed line is run
/// by a real shell and /usr/bin/curl against TestServer's /echo, and the server must see the
/// same method, headers and body as when Transfer sends the request itself.
@Suite("curlDescription replays the request with real curl", .serialized,
       .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/curl"), "curl is not installed"))
struct CurlDescriptionTests {
    private func echo(_ data: Data) throws -> JSONValue {
        try JSONDecoder().decode(JSONValue.self, from: data)
    }

    @Test("method, headers and body seen by the server are the same from curl and from Transfer",
          arguments: ["GET", "POST", "PUT", "DELETE"])
    func replay(method: String) async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        let body = method == "GET" ? nil : Data("it's {\"json\": \"body\"}\nline 2 $HOME `id`".utf8)
        var request = Request(
            url: server.url("/echo?x=1&y=two%20words"), method: HTTPMethod(method), body: body.map { .data($0) })
        request.headers["Content-Type"] = "application/json"
        request.headers["X-Quote"] = "it's \"quoted\" $PATH"

        let (ours, _) = try await session.data(for: request)
        let line = request.curlDescription(redactingCredentials: false)
        let replay = try Command.run("/bin/sh", ["-c", line + " -sS"])
        #expect(replay.status == 0, "\(line): \(replay.stderrText)")

        let a = try echo(ours)
        let b = try echo(replay.stdout)
        #expect(a["method"] == b["method"])
        #expect(a["target"] == b["target"])
        #expect(a["body_length"] == b["body_length"])
        #expect(a["body_sha256"] == b["body_sha256"])
        #expect(b["headers"]?["x-quote"] == .string("it's \"quoted\" $PATH"))
        #expect(b["headers"]?["content-type"] == .string("application/json"))
    }
}
