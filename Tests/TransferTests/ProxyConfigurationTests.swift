import Testing
import Transfer

@Suite("Proxy configuration")
struct ProxyConfigurationTests {
    @Test("proxy URLs read as curl's -x reads them")
    func parsesURLs() throws {
        let plain = try ProxyConfiguration(url: "proxy.test")
        #expect(plain.kind == .http && plain.host == "proxy.test" && plain.port == 80)

        let tls = try ProxyConfiguration(url: "HTTPS://proxy.test:8443/")
        #expect(tls.kind == .https && tls.port == 8443)

        let socks = try ProxyConfiguration(url: "socks5h://u%40x:p%3Aw@[::1]:9050")
        #expect(socks.kind == .socks5h && socks.host == "::1" && socks.port == 9050)
        #expect(socks.credentials == .init(user: "u@x", password: "p:w"))

        #expect(try ProxyConfiguration(url: "socks5://127.0.0.1").port == 1080)
    }

    @Test("bad schemes, hosts, ports and lists are invalidRequest", arguments: [
        "ftp://proxy.test:21", "http://:8080", "http://proxy.test:0", "http://proxy.test:65536",
        "http://proxy.test:abc", "http://proxy.test/path", "http://pro xy.test:1", "http://[::1:80",
    ])
    func refusesBadURLs(_ text: String) {
        #expect(throws: TransferError.self) { try ProxyConfiguration(url: text) }
        do {
            _ = try ProxyConfiguration(url: text)
        } catch {
            #expect(error.code == .invalidRequest)
        }
    }

    @Test("an empty bypass entry or a control character in credentials is refused")
    func validatesLists() {
        var proxy = ProxyConfiguration(.http, host: "127.0.0.1", port: 3128, bypass: ["a.test", ""])
        #expect(throws: TransferError.self) { try proxy.validate() }
        proxy.bypass = ["a.test", "*"]
        #expect(throws: Never.self) { try proxy.validate() }
        proxy.credentials = .init(user: "u", password: "p\nX: y")
        #expect(throws: TransferError.self) { try proxy.validate() }
    }

    @Test("a printed configuration does not show the proxy password")
    func redactsPassword() {
        let proxy = ProxyConfiguration(.http, host: "127.0.0.1", port: 3128,
                                       credentials: .init(user: "svc", password: "hunter2"))
        #expect(!"\(proxy)".contains("hunter2"))
        #expect(!String(reflecting: proxy).contains("hunter2"))
        #expect("\(proxy)".contains("svc"))
    }

    @Test("a proxy URL that fails to parse is quoted without its password (issue 25 item 9)", arguments: [
        "http://user:S3CRET@127.0.0.1:notaport",
        "http://user:S3CRET@[::1:3128",
        "http://user:S3CRET@[::1]x",
        "http://user:S3CRET@proxy.test/path",
        "socks5://S3CRET@proxy.test:99999",
        "http://user:S3CRET@bad host:3128",
    ])
    func parseErrorsHidePassword(_ text: String) {
        #expect {
            try ProxyConfiguration(url: text)
        } throws: { error in
            let message = (error as? TransferError)?.message ?? "\(error)"
            return !message.contains("S3CRET") && !"\(error)".contains("S3CRET")
        }
    }
}
