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

    @Test("a space, a control byte or DEL anywhere is refused; bytes from 0x80 up are not")
    func everyBytePosition() {
        // Longer than two words, so that a bad byte is tried in every lane of
        // the eight-byte check and in the tail after it.
        let good = Array("http://example.com/a/b/c/d/e/f?q=1#frag".utf8)
        #expect(good.withUnsafeBufferPointer(Request.isSendableURL))
        for position in 0..<good.count {
            for bad: UInt8 in [0x00, 0x09, 0x0A, 0x1F, 0x20, 0x7F] {
                var bytes = good
                bytes[position] = bad
                #expect(!bytes.withUnsafeBufferPointer(Request.isSendableURL), "byte \(bad) at \(position)")
            }
        }
        // UTF-8 in the path: allowed at every position after the authority.
        for position in 19..<good.count {
            for high: UInt8 in [0x80, 0xA0, 0xC3, 0xFF] {
                var bytes = good
                bytes[position] = high
                #expect(bytes.withUnsafeBufferPointer(Request.isSendableURL), "byte \(high) at \(position)")
            }
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
