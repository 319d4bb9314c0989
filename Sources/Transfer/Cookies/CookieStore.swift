import FoundationEssentials

/// A cookie jar shared by the transfers of one or more sessions: the Linux
/// spelling of `HTTPCookieStorage`, on libcurl's cookie engine.
///
/// libcurl parses every `Set-Cookie` and chooses the cookies of each
/// request, with RFC 6265's rules for domain, path, expiry, `Secure` and
/// `HttpOnly`, and the public suffix list when libcurl was built with libpsl
/// (``enforcesPublicSuffixList``; Debian's and Ubuntu's is): a `Set-Cookie`
/// with `Domain=co.uk` is then refused. Without libpsl such a cookie is kept
/// and sent to every site under the suffix. `SameSite` and when each cookie
/// was stored, which libcurl does not keep, are kept beside it.
///
/// Threads: every method is safe from any thread. The cookies live in a
/// libcurl share handle whose lock callbacks guard them, so the engine
/// threads of the sessions that use the store and callers of these methods
/// never see a half-made change; a method that rewrites the jar
/// (``deleteCookie(_:)``, ``removeCookies(since:)``) holds it meanwhile.
public final class CookieStore: @unchecked Sendable, Hashable, CustomStringConvertible {
    // @unchecked Sendable: `jar` is set once and is thread-safe (see
    // CookieJar); the rest is in `state`, a Protected.

    /// Which cookies a response may store (`HTTPCookie.AcceptPolicy`).
    public enum AcceptPolicy: Sendable, Hashable {
        /// Store every cookie a response sets.
        case always
        /// Store nothing; stored cookies are still sent.
        case never
        /// Store a response's cookies only when its host is the host of the
        /// request's ``Request/mainDocumentURL`` (or the request's own URL when
        /// it has none), or a subdomain of it.
        case onlyFromMainDocumentDomain
    }

    /// The placeholder of ``SessionConfiguration/cookieStore``'s default: each
    /// session made with it gets a fresh, empty store of its own. It is not a
    /// store itself: it holds nothing and ignores what it is given.
    public static let perSession = CookieStore(placeholder: ())

    /// libcurl's jar (Bridging/CookieJar.swift); nil for the placeholder, or when it could not be made.
    let jar: CookieJar?
    let isPlaceholder: Bool
    private let state = Protected(State())

    private struct State {
        var policy = AcceptPolicy.always
        /// SameSite and storing time, by cookie; absent for cookies set by a
        /// response the store did not see (a redirect libcurl followed).
        var meta: [CookieKey: Meta] = [:]
    }

    private struct Meta {
        var sameSite: Cookie.SameSite?
        var stored: Date
    }

    /// An empty store.
    public init() {
        // Only out of memory (or a libcurl without cookies) fails here; the
        // store then holds nothing and sessions using it fail to start.
        jar = CookieJar()
        isPlaceholder = false
    }

    private init(placeholder: Void) {
        jar = nil
        isPlaceholder = true
    }

    public static func == (lhs: CookieStore, rhs: CookieStore) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    public var description: String {
        isPlaceholder ? "CookieStore.perSession" : "CookieStore(\(cookies.count) cookies)"
    }

    /// Which cookies responses may store. Default `.always`.
    public var cookieAcceptPolicy: AcceptPolicy {
        get { state.withLock { $0.policy } }
        set { state.withLock { $0.policy = newValue } }
    }

    // MARK: - Reading

    /// Every cookie that has not expired.
    public var cookies: [Cookie] {
        let now = Date()
        let listed = rawCookies().filter { !$0.isExpired(at: now) }
        return state.withLock { state in
            listed.map { cookie in
                var cookie = cookie
                cookie.sameSite = state.meta[cookie.key]?.sameSite
                return cookie
            }
        }
    }

    /// The cookies a request to `url` sends (domain, path, `Secure`, expiry).
    public func cookies(for url: URL) -> [Cookie] {
        let now = Date()
        return cookies.filter { $0.matches(url, at: now) }
    }

    /// The jar as libcurl lists it, expired cookies included.
    private func rawCookies() -> [Cookie] {
        guard let lines = jar?.netscapeLines() else { return [] }
        return lines.compactMap { Cookie(netscapeLine: $0) }
    }

    // MARK: - Writing

    /// Stores `cookie`, replacing one with the same name, domain and path;
    /// ignored under the `.never` policy. An expiry in the past deletes it.
    ///
    /// - Throws: ``TransferError/Code/invalidRequest`` for a cookie that
    ///   cannot be sent (see ``Cookie``: empty name, `;` or control characters…).
    public func setCookie(_ cookie: Cookie) throws(TransferError) {
        if let problem = cookie.validationError { throw TransferError(.invalidRequest, problem) }
        guard cookieAcceptPolicy != .never else { return }
        try store([cookie])
    }

    /// Stores cookies received from `url` for a page at `mainDocumentURL`,
    /// as `HTTPCookieStorage` does: nothing under `.never`; under
    /// `.onlyFromMainDocumentDomain`, only when `url`'s host is
    /// `mainDocumentURL`'s (or under it). A cookie without a domain gets `url`'s host.
    ///
    /// - Throws: ``TransferError/Code/invalidRequest`` for an invalid cookie; none is stored then.
    public func setCookies(_ cookies: [Cookie], for url: URL?, mainDocumentURL: URL?) throws(TransferError) {
        let filled = cookies.map { cookie -> Cookie in
            var cookie = cookie
            if cookie.domain.isEmpty, let host = url?.host { cookie.domain = host }
            return cookie
        }
        if let problem = filled.lazy.compactMap(\.validationError).first {
            throw TransferError(.invalidRequest, problem)
        }
        switch cookieAcceptPolicy {
        case .never: return
        case .always: break
        case .onlyFromMainDocumentDomain:
            guard let url, Self.isHost(url, under: mainDocumentURL ?? url) else { return }
        }
        try store(filled)
    }

    /// Deletes the cookie with `cookie`'s name, domain and path.
    public func deleteCookie(_ cookie: Cookie) {
        let key = cookie.key
        rewrite { $0.key != key }
    }

    /// Deletes the cookies stored at or after `date`. A cookie set by a
    /// response the store did not see (a redirect libcurl followed by
    /// itself) has no known time and counts as stored now.
    public func removeCookies(since date: Date) {
        let recent: Set<CookieKey> = state.withLock { state in
            Set(state.meta.filter { $0.value.stored >= date }.keys)
        }
        let known: Set<CookieKey> = state.withLock { Set($0.meta.keys) }
        let now = Date()
        rewrite { known.contains($0.key) ? !recent.contains($0.key) : now < date }
    }

    /// Empties the store (`resetWithCompletionHandler`'s part for cookies).
    public func resetCookies() {
        guard let jar else { return }
        jar.removeAll()
        state.withLock { $0.meta.removeAll() }
    }

    /// Adds `cookies` (validated) to the jar and records them.
    private func store(_ cookies: [Cookie]) throws(TransferError) {
        guard let jar, !cookies.isEmpty else { return }
        do throws(TransferError) {
            try jar.add(cookies.map(\.netscapeLine), replacingAll: false)
        } catch {
            throw TransferError(.invalidRequest, "cannot store cookies: \(error.message)")
        }
        let now = Date()
        state.withLock { state in
            for cookie in cookies { state.meta[cookie.key] = Meta(sameSite: cookie.sameSite, stored: now) }
        }
    }

    /// Keeps the cookies `keep` accepts, atomically for the transfers.
    private func rewrite(keeping keep: (Cookie) -> Bool) {
        guard let jar else { return }
        jar.withLock {
            let all = rawCookies()
            let kept = all.filter(keep)
            guard kept.count != all.count else { return }
            try? jar.add(kept.map(\.netscapeLine), replacingAll: true)
            let remaining = Set(kept.map(\.key))
            state.withLock { state in state.meta = state.meta.filter { remaining.contains($0.key) } }
        }
    }

    // MARK: - Sessions

    /// Whether a response to `request` may store cookies under the policy.
    func accepts(_ request: Request) -> Bool {
        switch cookieAcceptPolicy {
        case .always: return true
        case .never: return false
        case .onlyFromMainDocumentDomain:
            return Self.isHost(request.url, under: request.mainDocumentURL ?? request.url)
        }
    }

    /// On the engine thread, for a response head of a transfer that stored
    /// its cookies: keeps each `Set-Cookie`'s SameSite and the time.
    func noteResponse(_ headers: HTTPHeaders, url: URL) {
        let lines = headers.values(for: "Set-Cookie")
        guard !lines.isEmpty else { return }
        let now = Date()
        let attributes = lines.compactMap { SetCookieAttributes(setCookie: $0, url: url) }
        state.withLock { state in
            for a in attributes { state.meta[a.key] = Meta(sameSite: a.sameSite, stored: now) }
        }
    }

    static func isHost(_ url: URL, under main: URL) -> Bool {
        guard let host = url.host?.lowercased(), let mainHost = main.host?.lowercased() else { return false }
        return host == mainHost || host.hasSuffix("." + mainHost)
    }
}
