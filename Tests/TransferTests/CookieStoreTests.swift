import Foundation
import TestSupport
import Testing

@testable import Transfer

/// The store without sockets: values, the Netscape format, bad input.
@Suite("CookieStore without a network")
struct CookieStoreTests {
    @Test("setCookie stores into libcurl's jar and reads back every field")
    func setAndRead() throws {
        let store = CookieStore()
        let expires = Date(timeIntervalSince1970: 4_102_444_800)   // 2100
        try store.setCookie(Cookie(name: "n", value: "v w", domain: "Example.test", includesSubdomains: true,
                                   path: "/p", expires: expires, isSecure: true, isHTTPOnly: true, sameSite: .strict))

        let cookie = try #require(store.cookies.first)
        #expect(cookie.name == "n" && cookie.value == "v w" && cookie.domain.lowercased() == "example.test")
        #expect(cookie.includesSubdomains && cookie.path == "/p" && cookie.expires == expires)
        #expect(cookie.isSecure && cookie.isHTTPOnly && cookie.sameSite == .strict)
        #expect(store.cookies(for: URL(string: "https://www.example.test/p/q")!).count == 1)
        #expect(store.cookies(for: URL(string: "http://www.example.test/p/q")!).isEmpty)
        #expect(store.cookies(for: URL(string: "https://www.example.test/pq")!).isEmpty)
    }

    @Test("a cookie that would break the header or the file is refused with invalidRequest",
          arguments: [
              Cookie(name: "", value: "v", domain: "h.test"),
              Cookie(name: "a;b", value: "v", domain: "h.test"),
              Cookie(name: "a=b", value: "v", domain: "h.test"),
              Cookie(name: "a", value: "v\r\nX-Evil: 1", domain: "h.test"),
              Cookie(name: "a", value: "v;w", domain: "h.test"),
              Cookie(name: "a", value: "tab\there", domain: "h.test"),
              Cookie(name: "a", value: "v", domain: ""),
              Cookie(name: "a", value: "v", domain: "#h.test"),   // fuzz_cookies: a comment line when written
              Cookie(name: "a", value: "v", domain: "h.test", path: "nopath"),
          ])
    func invalidCookies(cookie: Cookie) {
        let store = CookieStore()
        #expect(throws: TransferError.self) { try store.setCookie(cookie) }
        #expect(store.cookies.isEmpty)
    }

    @Test("Netscape file: curl's lines, #HttpOnly_, comments; malformed lines skipped as curl skips them")
    func importFile() throws {
        let folder = try TemporaryDirectory()
        let file = folder.file("cookies.txt")
        let text = """
            # Netscape HTTP Cookie File
            .example.test\tTRUE\t/\tFALSE\t4102444800\twide\t1
            #HttpOnly_h.test\tFALSE\t/a\tTRUE\t0\tsecret\tx
            h.test\tFALSE\t/\tFALSE\t0\tempty\t
            this is not a cookie line
            h.test\tFALSE\t/\tFALSE\tnot-a-number\tbad\t1
            h.test\tFALSE\t/\tFALSE\t1\texpired\t1
            \t\t\t\t\t\t
            """
        try Data(text.utf8).write(to: file)

        let store = try CookieStore(contentsOf: file)

        let byName = Dictionary(uniqueKeysWithValues: store.cookies.map { ($0.name, $0) })
        #expect(Set(byName.keys) == ["wide", "secret", "empty"])
        #expect(byName["wide"]?.includesSubdomains == true)
        #expect(byName["secret"]?.isHTTPOnly == true && byName["secret"]?.isSecure == true)
        #expect(byName["secret"]?.isSessionOnly == true)
        #expect(byName["empty"]?.value == "")

        let copy = folder.file("copy.txt")
        try store.write(to: copy)
        #expect(Set(try CookieStore(contentsOf: copy).cookies) == Set(store.cookies))
    }

    @Test("a domain starting with a combining mark keeps its line's leading dot and #HttpOnly_ apart (fuzz finding)")
    func combiningMarkDomain() throws {
        // U+035A after "." or "_" makes one Character of the two: prefixes are bytes, not Characters.
        for line in ["\u{35A}h.test\tTRUE\t/t/\tFALSE\t4102444800\twide\t1",
                     "#HttpOnly_\u{35A}h.test\tFALSE\t/\tFALSE\t0\tn\tv"] {
            let cookie = try #require(Cookie(netscapeLine: Substring(line)))
            #expect(cookie.domain == "\u{35A}h.test")
            #expect(Cookie(netscapeLine: Substring(cookie.netscapeLine)) == cookie)
        }
    }

    @Test("unreadable, binary or oversized cookie files give typed errors")
    func badFiles() throws {
        let folder = try TemporaryDirectory()
        #expect(throws: TransferError.self) { try CookieStore(contentsOf: folder.file("missing")) }
        do {
            _ = try CookieStore(contentsOf: folder.file("missing"))
        } catch {
            #expect(error.code == .fileError)
        }
        let binary = folder.file("binary")
        try Data([0x68, 0x00, 0xff, 0xfe, 0x09, 0x0a]).write(to: binary)
        do {
            _ = try CookieStore(contentsOf: binary)
            Issue.record("a binary file was accepted")
        } catch {
            #expect(error.code == .invalidRequest)
        }
        let huge = folder.file("huge")
        try Data(repeating: 0x41, count: CookieStore.maximumCookieFileSize + 1).write(to: huge)
        do {
            _ = try CookieStore(contentsOf: huge)
            Issue.record("an oversized file was accepted")
        } catch {
            #expect(error.code == .invalidRequest)
        }
        #expect(throws: TransferError.self) { try CookieStore().write(to: folder.file("no/such/dir/jar")) }
    }

    @Test("SameSite, name, Domain and Path are read from Set-Cookie as libcurl keys the cookie")
    func setCookieAttributes() throws {
        let url = URL(string: "http://Host.test/a/b/c?q=1")!
        let a = try #require(SetCookieAttributes(setCookie: " n = v ; SameSite=none; Domain=.Sub.Host.test", url: url))
        #expect(a.key == CookieKey(name: "n", domain: "sub.host.test", path: "/a/b"))
        #expect(a.sameSite == Cookie.SameSite.none)
        let b = try #require(SetCookieAttributes(setCookie: "n=v; Path=/x/; SameSite=bogus", url: url))
        #expect(b.key.path == "/x" && b.sameSite == nil && b.key.domain == "host.test")
        #expect(SetCookieAttributes(setCookie: "novalue", url: url) == nil)
        #expect(SetCookieAttributes(setCookie: "=v", url: url) == nil)
    }

    @Test("the per-session placeholder is not a store; a session gets its own")
    func placeholder() throws {
        #expect(SessionConfiguration().cookieStore === CookieStore.perSession)
        #expect(throws: Never.self) {
            try CookieStore.perSession.setCookie(Cookie(name: "a", value: "1", domain: "h.test"))
        }
        #expect(CookieStore.perSession.cookies.isEmpty)
    }
}
