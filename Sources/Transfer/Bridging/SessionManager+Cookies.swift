import CTransfer
import Foundation

/// Where cookies plug into a session's transfers.
extension SessionManager {
    /// The engine flags for `request`: send and store (`CT_FLAG_COOKIES`),
    /// send only (`CT_FLAG_COOKIES_READ_ONLY`: the policy refuses what this
    /// response would set), or neither (no store, or
    /// `httpShouldHandleCookies` false).
    func cookieFlags(for request: Request) -> UInt32 {
        guard let cookieStore, request.httpShouldHandleCookies else { return 0 }
        return UInt32(cookieStore.accepts(request) ? CT_FLAG_COOKIES : CT_FLAG_COOKIES_READ_ONLY)
    }

    /// On the engine thread: the store keeps what libcurl drops (SameSite, time).
    func noteCookies(of response: HTTPResponse, for request: Request) {
        guard let cookieStore, request.httpShouldHandleCookies, cookieStore.accepts(request) else { return }
        cookieStore.noteResponse(response.headers, url: response.url)
    }
}
