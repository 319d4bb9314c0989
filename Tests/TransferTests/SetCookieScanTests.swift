import Testing

@testable import Transfer

@Suite("The fast path's Set-Cookie scan of a raw head")
struct SetCookieScanTests {
    @Test("finds a Set-Cookie line in any case, on any line")
    func findsSetCookie() {
        #expect(FastRequest.hasSetCookie("HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\n\r\n"))
        #expect(FastRequest.hasSetCookie("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nSET-COOKIE: a=1\r\n\r\n"))
        #expect(FastRequest.hasSetCookie("HTTP/2 200\r\nset-cookie: id=9; Path=/\r\n\r\n"))
    }

    @Test("does not take another header, or a value mentioning it, for one")
    func ignoresOthers() {
        #expect(!FastRequest.hasSetCookie("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n"))
        #expect(!FastRequest.hasSetCookie("HTTP/1.1 200 OK\r\nX-Note: set-cookie: no\r\n\r\n"))
        #expect(!FastRequest.hasSetCookie("HTTP/1.1 200 OK\r\nSet-Cookie2: a=1\r\n\r\n"))
        #expect(!FastRequest.hasSetCookie(""))
        #expect(!FastRequest.hasSetCookie("Set-Cooki"))
    }
}
