import FoundationEssentials
import Testing

@testable import Transfer

/// `Request.isSendableURL(_:)` reads the scheme and host from the bytes of
/// `URL.absoluteString`. It must give the verdict of the check it replaced,
/// made on the parsed URL: `URL.scheme` is http or https (any case),
/// `URL.host` is not empty, and no byte is a space or a control byte.
@Suite("Request URL check")
struct RequestURLCheckTests {
    /// The check the byte version replaced, on Foundation's parse.
    private static func foundationVerdict(_ url: URL) -> Bool {
        let absolute = url.absoluteString
        let hasControl = absolute.utf8.contains { $0 < 0x21 || $0 == 0x7F }
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else { return false }
        return url.host?.isEmpty == false && !hasControl
    }

    private static func byteVerdict(_ url: URL) -> Bool {
        var absolute = url.absoluteString
        return absolute.withUTF8(Request.isSendableURL)
    }

    @Test("every combination of scheme, user, host, port, path and query gets Foundation's verdict")
    func sameVerdictAsFoundation() {
        let schemes = ["http", "https", "HTTP", "hTTpS", "ftp", "httpx", "htt", "file", "ws", ""]
        let separators = ["://", ":/", ":", ":///"]
        let users = ["", "user@", "user:pass@", "@", "a@b@", "%40@"]
        let hosts = ["example.com", "", "127.0.0.1", "[::1]", "[]", "[fe80::1%25en0]", "h", "%41", "xn--bcher-kva.de",
                     "EXAMPLE.COM"]
        let ports = ["", ":", ":8080", ":0"]
        let tails = ["", "/", "/a/b", "?q=1", "#frag", "/p?q#f", "/@x", "/:x", "?@:/"]
        var checked = 0
        for scheme in schemes {
            for separator in separators {
                for user in users {
                    for host in hosts {
                        for port in ports {
                            for tail in tails {
                                let text = scheme + separator + user + host + port + tail
                                guard let url = URL(string: text) else { continue }
                                checked += 1
                                #expect(Self.byteVerdict(url) == Self.foundationVerdict(url), "\(text.debugDescription)")
                            }
                        }
                    }
                }
            }
        }
        #expect(checked > 10_000)
    }

    @Test("a URL relative to a base is checked as its absolute form")
    func relativeURLs() throws {
        let base = try #require(URL(string: "https://example.com/dir/"))
        for relative in ["file", "/root", "?q", "//other.example/x", "//", "http:x", "ftp://example.com/"] {
            guard let url = URL(string: relative, relativeTo: base) else { continue }
            #expect(Self.byteVerdict(url) == Self.foundationVerdict(url), "\(relative.debugDescription)")
        }
    }

    @Test("a request with an unusable URL is refused with invalidRequest")
    func refusals() throws {
        for text in ["http:///path", "ftp://example.com/", "https://user@:443/", "http:example.com", "https://[]/"] {
            let url = try #require(URL(string: text), "\(text)")
            let request = Request(url: url)
            #expect(throws: TransferError.self, "\(text)") { try request.validate() }
            do {
                try request.validate()
            } catch {
                #expect(error.code == .invalidRequest)
            }
        }
        try Request(url: #require(URL(string: "HTTPS://User@Example.COM:8443/a?b#c"))).validate()
        try Request(url: #require(URL(string: "http://[::1]:80/"))).validate()
    }
}
