import Foundation
import Testing
@testable import Transfer

/// The one redirect rule (issue 11 item 9), table-driven, no sockets. The
/// socket tests are in TransferIntegrationTests/SecurityRedirectTests.
@Suite("Redirect policy")
struct RedirectPolicyTests {
    @Test("same origin means same scheme, host and port (default ports filled in)", arguments: [
        ("https://example.com/a", "https://example.com/b", true),
        ("https://example.com/a", "https://EXAMPLE.com:443/b", true),
        ("http://example.com/a", "http://example.com:80/b", true),
        ("https://example.com./a", "https://example.com/b", true),
        ("https://example.com/a", "http://example.com/b", false),       // https -> http
        ("http://example.com/a", "https://example.com/b", false),       // http -> https
        ("https://example.com:8443/a", "http://example.com:8443/b", false),   // scheme alone changes
        ("https://example.com/a", "https://example.com:8443/b", false),
        ("https://example.com/a", "https://api.example.com/b", false),
        ("http://127.0.0.1:8080/a", "http://localhost:8080/b", false),
        ("https://example.com/a", "ftp://example.com/b", false),
    ])
    func sameOrigin(from: String, to: String, same: Bool) throws {
        let a = try #require(URL(string: from))
        let b = try #require(URL(string: to))

        #expect(RedirectPolicy.isSameOrigin(a, b) == same)
    }

    @Test("credentials, cookies and proxy credentials stay behind across origins and follow within one")
    func strippedHeaders() throws {
        var request = Request(url: try #require(URL(string: "https://example.com:8443/a")))
        request.headers = ["authorization": "Bearer x", "Cookie": "a=b", "Proxy-Authorization": "Basic y",
                           "Accept": "text/plain"]

        let crossed = RedirectPolicy.request(request, redirectedTo: try #require(URL(string: "http://example.com:8443/b")))
        let stayed = RedirectPolicy.request(request, redirectedTo: try #require(URL(string: "https://example.com:8443/c")))

        #expect(crossed.headers.map(\.name) == ["Accept"])
        #expect(crossed.url.absoluteString == "http://example.com:8443/b")
        #expect(stayed.headers == request.headers)
        #expect(stayed.url.path == "/c")
    }
}
