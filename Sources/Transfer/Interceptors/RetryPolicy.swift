import FoundationEssentials
import Glibc

/// A retrier with the usual rules: idempotent methods only, transient
/// failures only, exponential backoff with jitter, `Retry-After` honoured up
/// to a cap, and a bounded number of attempts (Alamofire's `RetryPolicy`).
///
/// A failed attempt is retried when all of these hold:
/// - fewer than ``maximumAttempts`` attempts were made;
/// - the method is in ``retryableMethods`` (by default the idempotent ones of
///   RFC 9110: GET, HEAD, PUT, DELETE, OPTIONS, TRACE; never POST or PATCH);
/// - it failed with a code in ``retryableErrorCodes`` (cannot connect, timed
///   out, reset, cut short, or closed with no response at all), or was answered with a status in
///   ``retryableStatusCodes`` (408, 429, 500, 502, 503, 504). TLS and trust
///   failures, cancellation and bad input are never retried.
///
/// The delay is `initialDelay × multiplier^(attempt-1)`, at most
/// ``maximumDelay``, minus a random share of at most ``jitter`` of it (so that
/// many clients do not come back at once). A `Retry-After` header (seconds or
/// an HTTP-date) replaces it: a date in the past means now, and a wait longer
/// than ``maximumRetryAfter`` means no retry: the response is the result.
public struct RetryPolicy: RequestInterceptor {
    /// Idempotent methods, retried by default.
    public static let defaultRetryableMethods: Set<HTTPMethod> = [.get, .head, .put, .delete, .options, "TRACE"]
    /// Status codes retried by default: 408, 429, 500, 502, 503, 504.
    public static let defaultRetryableStatusCodes: Set<Int> = [408, 429, 500, 502, 503, 504]
    /// Error codes retried by default (transient transport failures).
    public static let defaultRetryableErrorCodes: Set<TransferError.Code> = [
        .cannotConnect, .timedOut, .transport, .truncatedResponse, .emptyResponse,
    ]

    /// Attempts in all, the first included (1: never retry).
    public var maximumAttempts: Int
    /// The wait before the first retry.
    public var initialDelay: Duration
    /// What each wait is multiplied by for the next one.
    public var multiplier: Double
    /// The longest wait between two attempts.
    public var maximumDelay: Duration
    /// The share of the delay (0...1) taken off at random.
    public var jitter: Double
    /// The longest `Retry-After` waited for; a longer one is not retried.
    public var maximumRetryAfter: Duration
    /// Methods that may be retried.
    public var retryableMethods: Set<HTTPMethod>
    /// Response status codes that cause a retry.
    public var retryableStatusCodes: Set<Int>
    /// Error codes that cause a retry.
    public var retryableErrorCodes: Set<TransferError.Code>

    /// A policy with exponential back-off; the defaults retry idempotent
    /// requests up to three attempts in all.
    public init(maximumAttempts: Int = 3, initialDelay: Duration = .milliseconds(500), multiplier: Double = 2,
                maximumDelay: Duration = .seconds(30), jitter: Double = 0.5,
                maximumRetryAfter: Duration = .seconds(120),
                retryableMethods: Set<HTTPMethod> = RetryPolicy.defaultRetryableMethods,
                retryableStatusCodes: Set<Int> = RetryPolicy.defaultRetryableStatusCodes,
                retryableErrorCodes: Set<TransferError.Code> = RetryPolicy.defaultRetryableErrorCodes)
    {
        self.maximumAttempts = maximumAttempts
        self.initialDelay = initialDelay
        self.multiplier = multiplier
        self.maximumDelay = maximumDelay
        self.jitter = jitter
        self.maximumRetryAfter = maximumRetryAfter
        self.retryableMethods = retryableMethods
        self.retryableStatusCodes = retryableStatusCodes
        self.retryableErrorCodes = retryableErrorCodes
    }

    public func retry(_ request: Request, for session: SessionManager, dueTo error: TransferError,
                      response: HTTPResponse?, attempt: Int) async -> RetryDecision
    {
        decision(for: request, dueTo: error, response: response, attempt: attempt)
    }

    /// The decision, without the session (what ``retry(_:for:dueTo:response:attempt:)`` returns).
    public func decision(for request: Request, dueTo error: TransferError, response: HTTPResponse?, attempt: Int,
                         now: Date = Date()) -> RetryDecision
    {
        guard attempt < maximumAttempts, retryableMethods.contains(request.method), isRetryable(error) else {
            return .doNotRetry
        }
        if let value = response?.headers["Retry-After"], let asked = RetryAfter.delay(value, now: now) {
            return asked > maximumRetryAfter ? .doNotRetry : .retryAfter(asked)
        }
        return .retryAfter(backoff(attempt: attempt))
    }

    /// Whether a failure of this kind is worth another attempt.
    public func isRetryable(_ error: TransferError) -> Bool {
        if error.code == .unacceptableStatusCode {
            return error.httpStatus.map { retryableStatusCodes.contains($0) } ?? false
        }
        return retryableErrorCodes.contains(error.code)
    }

    /// The delay before attempt `attempt + 1`, jitter included.
    public func backoff(attempt: Int, random: Double = Double.random(in: 0...1)) -> Duration {
        // NaN or huge settings must not trap: a NaN multiplier counts as 1,
        // a NaN jitter or random as 0, and the wait is clamped (TimeLimit).
        let growth = multiplier.isNaN ? 1 : max(multiplier, 1)
        let base = Self.seconds(initialDelay) * pow(growth, Double(max(attempt - 1, 0)))
        let capped = min(base.isNaN ? 0 : base, Self.seconds(maximumDelay))
        let share = (jitter.isNaN ? 0 : min(max(jitter, 0), 1)) * (random.isNaN ? 0 : min(max(random, 0), 1))
        return TimeLimit.duration(seconds: capped * (1 - share))
    }

    static func seconds(_ duration: Duration) -> Double {
        let parts = duration.components
        return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
    }
}
