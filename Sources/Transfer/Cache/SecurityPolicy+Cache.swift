import FoundationEssentials

extension SecurityPolicy {
    /// The response cache's name for the trust this policy gives https
    /// servers (with `caFile`, the session's anchors): a digest of every
    /// setting that decides which server is accepted. An https entry is
    /// served only to a session whose tag is the one it was fetched under,
    /// so a policy change, or a session with other pins or anchors sharing
    /// the cache, never gets what an earlier policy accepted.
    ///
    /// Nil for a weakened policy (invalid certificates allowed, or the
    /// domain not validated): what it fetched may come from an impostor, and
    /// is never stored.
    func cacheTrustTag(caFile: String?) -> String? {
        guard !allowInvalidCertificates, validatesDomainName else { return nil }
        var parts = ["trust v1", "\(pinningMode)", caFile ?? "system anchors"]
        parts += pinnedCertificates.map { $0.derData.base64EncodedString() }.sorted()
        parts.append("keys")
        parts += pinnedPublicKeyHashes.sorted()
        for rule in pinPolicy?.rules ?? [] {
            parts.append("rule")
            parts += rule.patterns + ["subdomains \(rule.includeSubdomains)", "except"] + rule.exclusions
            parts += ["keys"] + rule.publicKeyHashes + ["certificates"]
            parts += rule.certificates.map { $0.derData.base64EncodedString() }
            parts += ["until \(rule.expiration?.timeIntervalSince1970 ?? -1)", "\(rule.enforcement)"]
        }
        return RequestIdentity.digest(parts)
    }
}

/// Who a cache entry is for, besides its URL and `Vary`: the cookies a
/// request sends and, for https, the trust it was fetched under. An entry is
/// served only to a request with the same scope (DataTask+Cache.swift).
struct CacheScope: Hashable, Sendable {
    /// A digest of the cookies sent (the store's and a `Cookie` header); nil: none.
    var audience: String?
    /// The session's ``SecurityPolicy/cacheTrustTag(caFile:)`` when the URL
    /// is https; nil for http.
    var trust: String?
}

extension SessionManager {
    /// The scope of a lookup or a store for `url` with `request`'s cookies
    /// (sent with `headers`); nil when no entry may be used or kept: an https
    /// URL under a weakened trust, or a digest that cannot be made.
    func cacheScope(for url: URL, request: Request, headers: HTTPHeaders) -> CacheScope? {
        var scope = CacheScope()
        if url.scheme?.lowercased() == "https" {
            guard let trust = cacheTrustTag else { return nil }
            scope.trust = trust
        }
        var cookieRequest = request
        cookieRequest.url = url
        let stored = storeCookieHeader(for: cookieRequest)
        let explicit = headers["Cookie"]
        if stored != nil || explicit != nil {
            guard let audience = RequestIdentity.digest(["cookies", stored ?? "", explicit ?? ""]) else { return nil }
            scope.audience = audience
        }
        return scope
    }
}
