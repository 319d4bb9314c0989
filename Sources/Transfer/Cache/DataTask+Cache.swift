import Dispatch
import FoundationEssentials
import Glibc

// How a data task uses the session's ResponseCache. Only reached when a
// cache is configured (DataTask.submit / complete(with:) check first).

extension DataTask {
    /// The hop's request, as the cache plan says: served from the cache
    /// (nothing reaches the engine), failed (`.returnCacheDataDontLoad` with
    /// nothing usable), sent in its conditional form, or sent as it is.
    func submitConsultingCache(_ cache: ResponseCache, request: Request, send: (Request) -> Void) {
        let headers = session.headersAsSent(request)
        let scope = session.cacheScope(for: request.url, request: request, headers: headers)
        switch cache.plan(for: request, headers: headers, scope: scope) {
        case .bypass, .load:
            core.withLock { $0.cacheRevalidating = nil }
            send(request)
        case .revalidate(let entry, let conditional):
            core.withLock { $0.cacheRevalidating = entry }
            send(conditional)
        case .fail(let error):
            submitFailed(error)
        case .serve(let entry):
            serveFromCache(entry)
        }
    }

    /// Completes with `entry` on the delegate queue, as a network response
    /// would (a data-chunk hook gets the body as one chunk first).
    private func serveFromCache(_ entry: CachedResponse) {
        switch core.withLock({ $0.life.servedLocally() }) {
        case .none:
            return
        case .cancelled:
            finishLocally(TransferError(.cancelled, "cancelled", url: originalRequest.url))
        case .serve:
            core.withLock { $0.response = entry.response }
            var metrics = TaskMetrics()
            metrics.resourceFetchType = .localCache
            metrics.httpVersion = entry.response.httpVersion
            metrics.bodyBytesReceived = Int64(entry.data.count)
            let outcome = Outcome(cachedWith: metrics, body: entry.data)
            session.delegateQueue.async { [self] in
                if streaming {
                    let (hooks, delegate) = session.observers
                    hooks.dataTaskDidReceiveData?(session, self, entry.data)
                    if delegate?.wantsDataChunks == true { delegate?.session(session, dataTask: self, didReceive: entry.data) }
                }
                resultData = entry.data
                complete(error: nil, outcome: outcome)
            }
        }
    }

    /// On the delegate queue, after a successful transfer: a 304 to a
    /// revalidation becomes the refreshed entry (status and body from the
    /// cache); a storable response goes through the will-cache hook into the
    /// cache; an unsafe method's success makes its URL's entry go. Returns
    /// the body the task completes with.
    func settleWithCache(_ cache: ResponseCache, body: Data?, outcome: inout Outcome) -> Data? {
        let revalidating = core.withLock { core -> CachedResponse? in
            defer { core.cacheRevalidating = nil }
            return core.cacheRevalidating
        }
        guard let response else { return body }
        let request = currentRequest ?? originalRequest
        let responseKey = ResponseCache.key(for: Request(url: response.url))
        if let entry = revalidating, response.statusCode == 304,
            let key = responseKey, key == ResponseCache.key(for: Request(url: entry.response.url))
        {
            let refreshed = ResponseCache.refreshed(entry, with: response)
            var kept = refreshed
            if let clean = Self.storable(refreshed.response) { kept.response = clean }
            cache.store(kept, forKey: key)
            core.withLock { $0.response = refreshed.response }
            outcome.metrics.resourceFetchType = .revalidated
            return refreshed.data
        }
        if ResponseCache.invalidates(request.method, status: response.statusCode) {
            cache.removeCachedResponse(for: request)
            return body
        }
        let headers = session.headersAsSent(request)
        // Any credential this task sent that the request does not show: a
        // 401 hook's answer (kept for the origin), the one in flight, the
        // original request's own or its URL's (a redirect hop drops them).
        let sentCredential = core.withLock { $0.credential != nil || $0.credentialInFlight != nil }
            || originalRequest.credential != nil || RequestIdentity.hasUserinfo(originalRequest.url)
        // A body that was not accumulated (discarded) is not a response to keep.
        // The scope is taken now, for the response's URL: the cookies the
        // next request there sends, the trust it is checked under.
        guard !discardsBody, let key = responseKey, request.method == .get,
            ResponseCache.isStorable(response, request: request, headers: headers, sentCredential: sentCredential),
            let scope = session.cacheScope(for: response.url, request: request, headers: headers),
            let kept = Self.storable(response)
        else { return body }
        let received = body ?? Data()
        var stored: Data? = received
        if let hook = session.hooks.dataTaskWillCacheResponse {
            stored = hook(session, self, response, received)
        }
        if let stored {
            let varyValues = CachedResponse.varyValues(of: headers, for: response)
            var entry = CachedResponse(response: kept, data: stored, varyValues: varyValues)
            entry.scope = scope
            cache.store(entry, forKey: key)
        }
        return body
    }

    /// `response` as an entry keeps it: no `Set-Cookie` (a cookie is the
    /// store's to keep, never the cache's to replay or write to disk), and
    /// no user name or password in its URL. Nil when the URL cannot be cleaned.
    static func storable(_ response: HTTPResponse) -> HTTPResponse? {
        var headers = response.headers
        headers.remove(name: "Set-Cookie")
        headers.remove(name: "Set-Cookie2")
        var url = response.url
        if RequestIdentity.hasUserinfo(url) {
            guard let clean = RequestIdentity.removingUserinfo(url.absoluteString).flatMap(URL.init(string:)) else {
                return nil
            }
            url = clean
        }
        return HTTPResponse(url: url, statusCode: response.statusCode, headers: headers,
                            httpVersion: response.httpVersion)
    }
}
