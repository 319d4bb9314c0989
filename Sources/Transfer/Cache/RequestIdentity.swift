import FoundationEssentials

/// Who a request says is asking: the credentials of every kind it may send,
/// as the response cache and ``ResourceDownloader`` see them.
///
/// A response to a request that carried any of these is that user's: it is
/// not handed to a request that did not carry the same, unless the server
/// marked it `public` (response cache) or the caller named a key for it
/// (downloader).
enum RequestIdentity {
    /// Request header fields that carry a credential or a session.
    static let credentialHeaders = ["Authorization", "Proxy-Authorization", "Cookie"]

    /// Whether `request`, sent with `headers` (the session's additional
    /// headers merged under its own), carries a credential itself: its
    /// ``Request/credential``, a user or password in its URL, or one of
    /// ``credentialHeaders``. Cookies from the session's store and 401
    /// answers are the caller's to add (see ``SessionManager/sendsIdentity(with:)``).
    static func carriesCredential(_ request: Request, headers: HTTPHeaders) -> Bool {
        request.credential != nil || hasUserinfo(request.url)
            || credentialHeaders.contains { headers[$0] != nil }
    }

    /// Whether `url` has a userinfo part (`user@`, `user:password@`, even an empty one).
    static func hasUserinfo(_ url: URL) -> Bool {
        url.user != nil || url.password != nil || authorityRange(of: url.absoluteString).map {
            url.absoluteString[$0].contains("@")
        } ?? false
    }

    /// `text` (an absolute URL) without its userinfo: everything in the
    /// authority up to and including its last `@` is dropped, so no part of
    /// a user name or password is left whatever `@`s it holds. Nil when the
    /// result is not a URL without userinfo (the caller then keeps nothing).
    static func removingUserinfo(_ text: String) -> String? {
        var result = text
        if let authority = authorityRange(of: text), let at = text[authority].lastIndex(of: "@") {
            result = String(text[..<authority.lowerBound]) + String(text[text.index(after: at)...])
        }
        guard let url = URL(string: result), url.user == nil, url.password == nil else { return nil }
        return result
    }

    /// The authority of an absolute URL's text: after `scheme://`, up to the
    /// first `/`, `?` or `#` (or the end); nil without `://`.
    private static func authorityRange(of text: String) -> Range<String.Index>? {
        guard let separator = text.firstRange(of: "://") else { return nil }
        let rest = text[separator.upperBound...]
        let end = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        return separator.upperBound..<end
    }

    /// A one-way name for what a request sent that says who it is (cookies,
    /// credentials), to keep in an entry instead of the secret itself:
    /// SHA-256 in hex, so a cache file never holds a cookie or a password.
    /// Nil when SHA-256 is not available (the caller then stores nothing).
    static func digest(_ parts: [String]) -> String? {
        var bytes = [UInt8]()
        for part in parts {
            // Length-prefixed, so that parts cannot run together.
            let utf8 = Array(part.utf8)
            bytes += withUnsafeBytes(of: UInt64(utf8.count).littleEndian) { Array($0) }
            bytes += utf8
        }
        return SHA256.hex(bytes)
    }
}

extension SessionManager {
    /// The headers `request` goes out with: the session's additional headers
    /// with the request's own over them.
    func headersAsSent(_ request: Request) -> HTTPHeaders {
        configuration.httpAdditionalHeaders.merging(request.headers)
    }

    /// The `Cookie` value the session's store sends with `request` now
    /// (domain, path, `Secure`, expiry), nil when it sends none.
    func storeCookieHeader(for request: Request) -> String? {
        guard let cookieStore, request.httpShouldHandleCookies else { return nil }
        let cookies = cookieStore.cookies(for: request.url)
        guard !cookies.isEmpty else { return nil }
        return cookies.map { "\($0.name)=\($0.value)" }.sorted().joined(separator: "; ")
    }

    /// Whether a 401 may be answered with a credential nobody can see before
    /// the request is sent: a challenge hook of the session.
    var answersAuthenticationChallenges: Bool {
        let hooks = observers.hooks
        return hooks.taskDidReceiveChallenge != nil || hooks.sessionDidReceiveChallenge != nil
            || hooks.authenticationChallengeHandler != nil
    }

    /// Whether `request` would say who is asking, in any way known before it
    /// is sent: a credential of its own (``RequestIdentity/carriesCredential(_:headers:)``),
    /// cookies from the store, an interceptor (whose adapter may add any
    /// header, typically `Authorization`), or a 401 challenge hook.
    func sendsIdentity(with request: Request) -> Bool {
        RequestIdentity.carriesCredential(request, headers: headersAsSent(request))
            || storeCookieHeader(for: request) != nil
            || configuration.hasInterceptor || request.hasInterceptor
            || answersAuthenticationChallenges
    }
}
