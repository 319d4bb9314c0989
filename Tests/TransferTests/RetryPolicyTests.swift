import Foundation
import Testing

@testable import Transfer

private let url = URL(string: "http://127.0.0.1:1/x")!

private func status(_ code: Int, retryAfter: String? = nil) -> (TransferError, HTTPResponse) {
    var headers: HTTPHeaders = [:]
    if let retryAfter { headers["Retry-After"] = retryAfter }
    let response = HTTPResponse(url: url, statusCode: code, headers: headers, httpVersion: "1.1")
    var error = TransferError(.unacceptableStatusCode, "HTTP \(code)", url: url)
    error.httpStatus = code
    return (error, response)
}

private func delay(_ decision: RetryDecision) -> Duration? {
    switch decision {
    case .retry: return .zero
    case .retryAfter(let duration): return duration
    case .doNotRetry, .doNotRetryWithError: return nil
    }
}

@Suite("Retry policy and Retry-After")
struct RetryPolicyTests {
    let now = Date(timeIntervalSince1970: 1_700_000_000)   // Tue, 14 Nov 2023 22:13:20 GMT

    @Test("Retry-After in delta seconds, HTTP-date (three forms), past, garbage")
    func parsesRetryAfter() {
        #expect(RetryAfter.delay("0", now: now) == .zero)
        #expect(RetryAfter.delay(" 120 ", now: now) == .seconds(120))
        #expect(RetryAfter.delay("Tue, 14 Nov 2023 22:14:20 GMT", now: now) == .seconds(60))
        #expect(RetryAfter.delay("Tuesday, 14-Nov-23 22:14:20 GMT", now: now) == .seconds(60))
        #expect(RetryAfter.delay("Tue Nov 14 22:14:20 2023", now: now) == .seconds(60))
        #expect(RetryAfter.delay("Sun, 06 Nov 1994 08:49:37 GMT", now: now) == .zero)
        #expect(RetryAfter.delay("-5", now: now) == nil)
        #expect(RetryAfter.delay("soon", now: now) == nil)
        #expect(RetryAfter.delay("", now: now) == nil)
        #expect(RetryAfter.delay("1.5", now: now) == nil)
        // Too large for an integer: absurdly far ahead, not an error.
        #expect(RetryAfter.delay("99999999999999999999999", now: now)! > .seconds(1_000_000_000))
    }

    @Test("idempotent methods are retried by default; POST and PATCH are not")
    func methods() {
        let policy = RetryPolicy(jitter: 0)
        let (error, response) = status(503)
        for method: HTTPMethod in [.get, .head, .put, .delete, .options, "TRACE"] {
            let request = Request(url: url, method: method)
            #expect(delay(policy.decision(for: request, dueTo: error, response: response, attempt: 1)) != nil)
        }
        for method: HTTPMethod in [.post, .patch] {
            let request = Request(url: url, method: method)
            #expect(delay(policy.decision(for: request, dueTo: error, response: response, attempt: 1)) == nil)
        }
    }

    @Test("the named statuses and transient codes are retried; TLS, trust, cancel and bad input never")
    func codes() {
        let policy = RetryPolicy(jitter: 0)
        let request = Request(url: url)
        for code in [408, 429, 500, 502, 503, 504] {
            let (error, response) = status(code)
            #expect(delay(policy.decision(for: request, dueTo: error, response: response, attempt: 1)) != nil)
        }
        for code in [400, 401, 403, 404, 501, 505] {
            let (error, response) = status(code)
            #expect(delay(policy.decision(for: request, dueTo: error, response: response, attempt: 1)) == nil)
        }
        for code: TransferError.Code in [.cannotConnect, .timedOut, .transport, .truncatedResponse, .emptyResponse] {
            let error = TransferError(code, "transient")
            #expect(delay(policy.decision(for: request, dueTo: error, response: nil, attempt: 1)) != nil)
        }
        for code: TransferError.Code in [.tlsFailure, .serverTrustRejected, .cancelled, .invalidRequest,
                                         .badResponse, .fileError, .responseTooLarge, .proxyFailure]
        {
            let error = TransferError(code, "permanent")
            #expect(delay(policy.decision(for: request, dueTo: error, response: nil, attempt: 1)) == nil)
        }
    }

    @Test("attempts stop at the maximum")
    func maximumAttempts() {
        let policy = RetryPolicy(maximumAttempts: 3, jitter: 0)
        let (error, response) = status(503)
        let request = Request(url: url)
        #expect(delay(policy.decision(for: request, dueTo: error, response: response, attempt: 2)) != nil)
        #expect(delay(policy.decision(for: request, dueTo: error, response: response, attempt: 3)) == nil)
        #expect(delay(RetryPolicy(maximumAttempts: 1).decision(for: request, dueTo: error, response: response,
                                                              attempt: 1)) == nil)
    }

    @Test("backoff grows by the multiplier up to the maximum, and jitter only shortens it")
    func backoff() {
        let policy = RetryPolicy(initialDelay: .milliseconds(500), multiplier: 2, maximumDelay: .seconds(3),
                                 jitter: 0.5)
        #expect(policy.backoff(attempt: 1, random: 0) == .milliseconds(500))
        #expect(policy.backoff(attempt: 2, random: 0) == .seconds(1))
        #expect(policy.backoff(attempt: 3, random: 0) == .seconds(2))
        #expect(policy.backoff(attempt: 4, random: 0) == .seconds(3))
        #expect(policy.backoff(attempt: 40, random: 0) == .seconds(3))
        #expect(policy.backoff(attempt: 2, random: 1) == .milliseconds(500))
        for _ in 0..<100 {
            let jittered = policy.backoff(attempt: 2)
            #expect(jittered >= .milliseconds(500) && jittered <= .seconds(1))
        }
    }

    @Test("Retry-After replaces the backoff; past means now; beyond the cap means no retry")
    func retryAfterDecisions() {
        let policy = RetryPolicy(initialDelay: .seconds(10), jitter: 0, maximumRetryAfter: .seconds(60))
        let request = Request(url: url)
        func decide(_ value: String) -> Duration? {
            let (error, response) = status(503, retryAfter: value)
            return delay(policy.decision(for: request, dueTo: error, response: response, attempt: 1, now: now))
        }
        #expect(decide("0") == .zero)
        #expect(decide("30") == .seconds(30))
        #expect(decide("Sun, 06 Nov 1994 08:49:37 GMT") == .zero)
        #expect(decide("61") == nil)
        #expect(decide("Fri, 31 Dec 9999 23:59:59 GMT") == nil)
        #expect(decide("garbage") == .seconds(10))   // ignored: the backoff applies
    }

    @Test("an Interceptor lets the first retrier that decides win, and adapts in order")
    func composition() async throws {
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let never = Interceptor(retrier: { _, _, _, _, _ in .doNotRetry })
        let soon = Interceptor(retrier: { _, _, _, _, _ in .retryAfter(.seconds(1)) })
        let now = Interceptor(retrier: { _, _, _, _, _ in .retry })
        let composed = Interceptor(interceptors: [never, soon, now])
        let (error, response) = status(503)

        let decision = await composed.retry(Request(url: url), for: session, dueTo: error, response: response,
                                            attempt: 1)

        #expect(delay(decision) == .seconds(1))
        let first = Interceptor(adapter: { request, _ in
            var r = request
            r.headers["X"] = "1"
            return r
        })
        let second = Interceptor(adapter: { request, _ in
            var r = request
            r.headers["X"] = (r.headers["X"] ?? "") + "2"
            return r
        })
        let composedAdapters = try #require(Interceptor.composing(first, second))
        let adapted = try await composedAdapters.adapt(Request(url: url), for: session)
        #expect(adapted.headers["X"] == "12")
    }
}
