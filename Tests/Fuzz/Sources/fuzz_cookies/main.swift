// Cookies from a file and from servers: a Netscape cookie file
// (CookieStore.cookieFileLines + Cookie(netscapeLine:)), the Set-Cookie
// attributes the store keeps beside libcurl's record (SetCookieAttributes),
// and libcurl's own parser fed the same lines through a real jar.
// Input: a cookie file; its first line is also read as a Set-Cookie value.
// Properties: a parsed line is a valid cookie whose written line parses to
// the same cookie; a Set-Cookie key has a non-empty name, a lower-case
// domain without a leading dot and a path starting with '/'; whatever the
// jar accepted lists back as cookies that are valid.
import FuzzSupport
import Foundation
@testable import Transfer

private let store = CookieStore()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = bytes(data, size)
    if let first = String(data: input, encoding: .utf8)?.split(separator: "\n").first,
        let a = SetCookieAttributes(setCookie: String(first), url: URL(string: "http://h.test/a/b")!)
    {
        require(!a.key.name.isEmpty, "empty cookie name")
        require(a.key.domain == a.key.domain.lowercased() && !a.key.domain.hasPrefix("."), "domain \(a.key.domain)")
        require(a.key.path.hasPrefix("/"), "path \(a.key.path)")
    }
    guard let lines = try? CookieStore.cookieFileLines(input, name: "fuzz") else { return 0 }
    for line in lines {
        require(!line.contains("\n") && !line.contains("\r"), "a line break inside a line")
        guard let cookie = Cookie(netscapeLine: Substring(line)) else { continue }
        require(cookie.validationError == nil, "parsed an invalid cookie: \(cookie)")
        let again = Cookie(netscapeLine: Substring(cookie.netscapeLine))
        require(again == cookie, "cookie does not round-trip: \(cookie) -> \(String(describing: again))")
    }
    store.resetCookies()
    if let jar = store.jar {
        try? jar.add(lines.filter { $0.utf8.count <= 8190 }, replacingAll: false)
    }
    for cookie in store.cookies {
        require(Cookie(netscapeLine: Substring(cookie.netscapeLine)) != nil, "the jar listed \(cookie)")
    }
    return 0
}

@_cdecl("fuzz_cookies_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    runFuzzer(argc, argv, fuzz)
}
