import FoundationEssentials

/// Where cookies plug into a session's transfers.
extension SessionManager {
    /// The engine flags for `request`: send and store (`.cookies`),
    /// send only (`.cookiesReadOnly`: the policy refuses what this
    /// response would set), or neither (no store, or
    /// `httpShouldHandleCookies` false).
    func cookieFlags(for request: Request) -> TransferFlags {
        guard let cookieStore, request.httpShouldHandleCookies else { return [] }
        return cookieStore.accepts(request) ? .cookies : .cookiesReadOnly
    }

    /// On the engine thread: the store keeps what libcurl drops (SameSite, time).
    func noteCookies(of response: HTTPResponse, for request: Request) {
        guard let cookieStore, request.httpShouldHandleCookies, cookieStore.accepts(request) else { return }
        cookieStore.noteResponse(response.headers, url: response.url)
    }
}
