// The cache key builders: ResponseCache.key(for:) (the HTTP cache; the key
// is written into the entry's file) and ResourceKey.string (ResourceDownloader
// and AutoPurgingCache). The input is a URL's text; a second NUL-separated
// field is a header value for the downloader's varying fields.
//
// Properties (issue 25: a URL password reached the cache key and the disk):
// no key holds userinfo: the authority of the key's URL has no `@`, and the
// key's URL parses with neither a user nor a password; when the URL had a
// password of 8 bytes or more that appears nowhere else in the URL's text,
// the key does not contain it; a response-cache key is "GET " + an http(s)
// URL without `#`; building the key from the key's own URL gives the same key.
import FuzzSupport
import Foundation
@testable import Transfer

/// The authority of an absolute URL's text: after `://`, up to `/`, `?`, `#`.
private func authority(_ text: String) -> Substring? {
    guard let separator = text.range(of: "://") else { return nil }
    let rest = text[separator.upperBound...]
    return rest[..<(rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex)]
}

private func requireNoUserinfo(_ urlText: Substring, secret: String?, _ what: String) {
    require(!(authority(String(urlText))?.contains("@") ?? false), "\(what) keeps userinfo: \(urlText)")
    if let parsed = URL(string: String(urlText)) {
        require(parsed.user == nil && parsed.password == nil, "\(what) parses with userinfo: \(urlText)")
    }
    if let secret { require(!urlText.contains(secret), "\(what) keeps the password: \(urlText)") }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let parts = fields(bytes(data, size), 2)
    guard let url = URL(string: parts[0]), url.scheme != nil else { return 0 }
    // A password that occurs only in the userinfo: the key must not hold it.
    var secret: String?
    let text = url.absoluteString
    if let userinfo = authority(text).flatMap({ auth in auth.lastIndex(of: "@").map { auth[..<$0] } }),
        let colon = userinfo.firstIndex(of: ":")
    {
        let password = String(userinfo[userinfo.index(after: colon)...])
        if password.utf8.count >= 8 && text.components(separatedBy: password).count == 2 { secret = password }
    }
    var request = Request(url: url)

    if let key = ResponseCache.key(for: request) {
        require(key.hasPrefix("GET "), "a key without its method: \(key)")
        let keyURL = key.dropFirst(4)
        require(!keyURL.contains("#"), "a key with a fragment: \(key)")
        requireNoUserinfo(keyURL, secret: secret, "the response cache key")
        if let again = URL(string: String(keyURL)) {
            require(ResponseCache.key(for: Request(url: again)) == key, "the key is not stable: \(key)")
        }
    }

    request.headers = HTTPHeaders()
    if (try? HTTPHeaders.validate(name: "Accept", value: parts[1])) != nil {
        request.headers["Accept"] = parts[1]
    }
    let resourceKey = ResourceKey.string(for: request, varyingHeaderFields: ResourceKey.defaultVaryingHeaderFields)
    let firstLine = resourceKey.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)[0]
    require(firstLine.hasPrefix("GET "), "a resource key without its method: \(resourceKey)")
    let resourceURL = firstLine.dropFirst(4)
    if !resourceURL.hasPrefix("unkeyable ") {
        requireNoUserinfo(resourceURL, secret: secret, "the resource key")
    }
    return 0
}

@_cdecl("fuzz_cache_key_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    runFuzzer(argc, argv, fuzz)
}
