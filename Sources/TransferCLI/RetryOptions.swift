import Dispatch
import FoundationEssentials
import Glibc
import Transfer

/// `--retry N`, `--retry-max-time S`, `--retry-delay S`, with curl's meaning:
/// a transient failure (a timeout, a connection that cannot be made or is
/// reset, or a 408, 429, 500, 502, 503 or 504 answer) is tried again up to N
/// times, whatever the method (as curl does). The wait is `Retry-After` when
/// the server sends one, else the fixed `--retry-delay`, else 1 s doubling
/// each time up to 10 minutes. `--retry-max-time` bounds the whole: no retry
/// starts once that many seconds passed since the first attempt, and a wait
/// is never longer than what is left. A body streamed from standard input
/// cannot be sent twice and is not retried.
enum RetryOptions {
    /// The per-transfer interceptor maker, or nil without `--retry`.
    static func maker(_ options: Options) throws(Failure) -> (@Sendable () -> CurlRetry)? {
        guard let retries = options.retry else {
            if options.retryMaxTime != nil || options.retryDelay != nil {
                throw Failure(.usage, "--retry-max-time and --retry-delay need --retry")
            }
            return nil
        }
        guard retries >= 0 else { throw Failure(.usage, "--retry: must be 0 or more") }
        if let time = options.retryMaxTime, !(time >= 0 && time.isFinite) {
            throw Failure(.usage, "--retry-max-time: must be 0 or more seconds")
        }
        if let delay = options.retryDelay, !(delay >= 0 && delay.isFinite) {
            throw Failure(.usage, "--retry-delay: must be 0 or more seconds")
        }
        guard retries > 0 else { return nil }
        let maxTime = options.retryMaxTime.flatMap { $0 > 0 ? RetryOptions.duration(seconds: $0) : nil }
        let delay = options.retryDelay.flatMap { $0 > 0 ? RetryOptions.duration(seconds: $0) : nil }
        return { CurlRetry(retries: retries, maxTime: maxTime, fixedDelay: delay) }
    }

    /// Checked seconds (finite, positive) as a `Duration`, at most about 31
    /// years: `Int64(seconds * 1000)` traps past 2^63 ms (`--retry-delay 1e300`).
    static func duration(seconds: Double) -> Duration {
        .milliseconds(Int64((min(seconds, 1e9) * 1000).rounded(.up)))
    }
}

/// One transfer's retry state (one per job: the time window starts at its first attempt).
final class CurlRetry: RequestInterceptor, Sendable {
    private let policy: RetryPolicy
    private let maxTime: Duration?
    private let started = Protected<ContinuousClock.Instant?>(nil)

    /// curl's backoff: 1 s, doubling, at most 10 minutes.
    static let maximumWait = Duration.seconds(600)

    init(retries: Int, maxTime: Duration?, fixedDelay: Duration?) {
        policy = RetryPolicy(
            maximumAttempts: retries + 1, initialDelay: fixedDelay ?? .seconds(1),
            multiplier: fixedDelay == nil ? 2 : 1, maximumDelay: Self.maximumWait, jitter: 0,
            maximumRetryAfter: maxTime.map { min($0, Self.maximumWait) } ?? Self.maximumWait)
        self.maxTime = maxTime
    }

    func adapt(_ request: Request, for session: SessionManager) async throws -> Request {
        started.withLock { if $0 == nil { $0 = .now } }
        return request
    }

    func retry(_ request: Request, for session: SessionManager, dueTo error: TransferError, response: HTTPResponse?,
               attempt: Int) async -> RetryDecision
    {
        // Any method, as curl: the policy judges it as a GET (its other rules apply).
        var request = request
        request.method = .get
        let decision = policy.decision(for: request, dueTo: error, response: response, attempt: attempt)
        guard let maxTime, case .retryAfter(let wait) = decision else { return decision }
        let elapsed = started.withLock { $0.map { ContinuousClock.now - $0 } } ?? .zero
        guard elapsed < maxTime else { return .doNotRetry }
        return .retryAfter(min(wait, maxTime - elapsed))
    }
}
