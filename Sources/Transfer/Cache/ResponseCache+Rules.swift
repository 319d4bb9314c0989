import FoundationEssentials

/// What a task does with the cache for one request (RFC 9111 for a private
/// cache, with URLSession's meaning of ``Request/CachePolicy``).
enum CachePlan {
    /// The cache has no say: neither looked up nor stored (not a GET, a
    /// conditional or range request of the caller's, `Cache-Control: no-store`).
    case bypass
    /// Send the request; store a storable response.
    case load
    /// Complete with this entry; nothing is sent.
    case serve(CachedResponse)
    /// Send `request` (the conditional form) to revalidate `entry`: a 304
    /// refreshes it and completes with its body.
    case revalidate(CachedResponse, Request)
    /// The policy forbids loading and no usable entry exists.
    case fail(TransferError)
}

extension ResponseCache {
    /// Request headers that make a request the caller's own conditional or partial one.
    private static let callerConditionals = ["If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since",
                                             "If-Range", "Range"]
    /// Statuses stored (RFC 9110 §15.1's heuristically cacheable ones that a data task completes with).
    static let storableStatuses: Set<Int> = [200, 203, 300, 301, 404, 410]

    /// The plan for `request`, whose headers as sent (the session's included)
    /// are `headers`, for a session whose scope for it is `scope` (see
    /// ``CacheScope``): only an entry of the same scope is used; a nil scope
    /// (an https URL under a weakened trust) uses none.
    func plan(for request: Request, headers: HTTPHeaders, scope: CacheScope?, now: Date = Date()) -> CachePlan {
        guard let key = Self.key(for: request), request.body == nil,
            !Self.callerConditionals.contains(where: { headers[$0] != nil })
        else { return .bypass }
        let requestControl = CacheControl(headers)
        if requestControl.noStore { return .bypass }
        if request.cachePolicy == .reloadIgnoringLocalCacheData { return .load }
        // Another user's entry (other cookies), or one fetched under another
        // trust (an older policy, another session's), is not there for this request.
        let found = scope.flatMap { scope in
            entry(forKey: key, headers: headers).flatMap { $0.scope == scope ? $0 : nil }
        }
        guard let entry = found else {
            if request.cachePolicy == .returnCacheDataDontLoad {
                return .fail(TransferError(.resourceUnavailable,
                                           "no cached response for \(request.url.absoluteString), and the cache policy forbids loading",
                                           url: request.url))
            }
            return .load
        }
        let fresh = CacheFreshness.isFresh(entry.response.headers, responseTime: entry.responseTime, now: now)
        // must-revalidate (and no-cache) forbid serving a stale entry whatever the policy.
        let control = CacheControl(entry.response.headers)
        let mayServeStale = !control.mustRevalidate && !control.noCache
        switch request.cachePolicy {
        case .returnCacheDataElseLoad:
            if fresh || mayServeStale { return .serve(entry) }
        case .returnCacheDataDontLoad:
            if fresh || mayServeStale { return .serve(entry) }
            return .fail(TransferError(.resourceUnavailable,
                                       "the cached response for \(request.url.absoluteString) must be revalidated, and the cache policy forbids loading",
                                       url: request.url))
        case .useProtocolCachePolicy, .reloadIgnoringLocalCacheData:
            let requestWantsCheck = requestControl.noCache || requestControl.maxAge == 0
            if fresh && !requestWantsCheck { return .serve(entry) }
        }
        let etag = entry.response.headers["ETag"]
        let lastModified = entry.response.headers["Last-Modified"]
        guard etag != nil || lastModified != nil else { return .load }
        var conditional = request
        if let etag { conditional.headers["If-None-Match"] = etag }
        if let lastModified { conditional.headers["If-Modified-Since"] = lastModified }
        return .revalidate(entry, conditional)
    }

    /// Whether `response` to `request` (sent with `headers`) may be stored;
    /// `sentCredential`: a hop of the task sent a credential the request does
    /// not show (a 401 hook's answer).
    static func isStorable(_ response: HTTPResponse, request: Request, headers: HTTPHeaders,
                           sentCredential: Bool = false) -> Bool
    {
        guard request.method == .get, storableStatuses.contains(response.statusCode) else { return false }
        let control = CacheControl(response.headers)
        if control.noStore || CacheControl(headers).noStore { return false }
        // An authenticated response is for its user only, unless the server
        // says otherwise: whatever carried the credential (header, request
        // credential, URL userinfo, a 401 hook's answer).
        let authenticated = sentCredential || RequestIdentity.carriesCredential(request, headers: headers)
            || RequestIdentity.hasUserinfo(response.url)
        if authenticated && !control.isPublic { return false }
        if CachedResponse.varyNames(response.headers).contains("*") { return false }
        return true
    }

    /// `entry` refreshed by a 304: the 304's fields replace the stored ones
    /// of the same name (RFC 9111 §3.2; the body's framing fields excepted),
    /// and its age restarts now.
    static func refreshed(_ entry: CachedResponse, with notModified: HTTPResponse, now: Date = Date()) -> CachedResponse {
        let framing: Set<String> = ["content-length", "content-encoding", "transfer-encoding", "content-range"]
        var headers = entry.response.headers
        var replaced = Set<String>()
        for field in notModified.headers where !framing.contains(field.name.lowercased()) {
            let name = field.name.lowercased()
            if replaced.insert(name).inserted { headers.remove(name: field.name) }
            headers.add(name: field.name, value: field.value)
        }
        var refreshed = entry
        refreshed.response = HTTPResponse(url: entry.response.url, statusCode: entry.response.statusCode,
                                          headers: headers, httpVersion: notModified.httpVersion)
        refreshed.responseTime = now
        return refreshed
    }

    /// Whether a response to `method` makes the stored entry of its URL
    /// stale (RFC 9111 §4.4: a non-error response to an unsafe method).
    static func invalidates(_ method: HTTPMethod, status: Int) -> Bool {
        ![.get, .head, .options, HTTPMethod("TRACE")].contains(method) && (200..<400).contains(status)
    }
}
