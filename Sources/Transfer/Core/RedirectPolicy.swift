import FoundationEssentials

/// The one rule for what a request carries across a redirect.
///
/// Two requests have the same origin when their scheme, host and port are
/// equal (RFC 6454; a missing port is the scheme's default). Across origins,
/// credentials and cookies stay behind: the `Authorization`, `Cookie` and
/// `Proxy-Authorization` headers (the request's and the session's
/// `httpAdditionalHeaders`) and a user/password answered to a 401 challenge.
/// From https to http is always a change of origin, so none of them is ever
/// sent in clear text after a secure hop.
///
/// Redirects followed in Swift (when a redirect hook or a delegate is set)
/// apply this type directly. Redirects followed by the engine get the same
/// result from curl (it drops a custom `Authorization`/`Cookie` header and the
/// user/password on a change of scheme, host or port) and from the engine's
/// header setup, which sends `Proxy-Authorization` to proxies only.
enum RedirectPolicy {
    /// Header names that belong to the origin they were set for.
    static let originBoundHeaders = ["Authorization", "Cookie", "Proxy-Authorization"]

    /// Scheme, host and port, normalised (lowercase, default ports filled in).
    struct Origin: Hashable {
        var scheme: String
        var host: String
        var port: Int
    }

    /// The origin of an http(s) URL; nil for anything else.
    static func origin(of url: URL) -> Origin? {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            var host = url.host?.lowercased(), !host.isEmpty
        else { return nil }
        if host.hasSuffix(".") { host.removeLast() }   // "example.com." names example.com
        return Origin(scheme: scheme, host: host, port: url.port ?? (scheme == "https" ? 443 : 80))
    }

    /// Whether `from` and `to` share scheme, host and port. URLs without an
    /// http(s) origin never share one.
    static func isSameOrigin(_ from: URL, _ to: URL) -> Bool {
        guard let a = origin(of: from), let b = origin(of: to) else { return false }
        return a == b
    }

    /// `headers` without the origin-bound ones.
    static func removingOriginBoundHeaders(_ headers: HTTPHeaders) -> HTTPHeaders {
        var headers = headers
        for name in originBoundHeaders { headers.remove(name: name) }
        return headers
    }

    /// The request to send to `target` after a redirect from `current`:
    /// the same request, minus credentials and cookies when the origin changes.
    static func request(_ current: Request, redirectedTo target: URL) -> Request {
        var next = current
        next.url = target
        if !isSameOrigin(current.url, target) {
            next.headers = removingOriginBoundHeaders(next.headers)
        }
        return next
    }
}
