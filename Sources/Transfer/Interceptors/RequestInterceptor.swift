import FoundationEssentials

/// Changes a request before each attempt is sent: the first one and every
/// retry (Alamofire's `RequestAdapter`).
public protocol RequestAdapter: Sendable {
    /// Returns the request to send for the next attempt.
    ///
    /// Runs before every attempt, on a task of the cooperative pool (never on
    /// the engine thread or the delegate queue), with the task's original
    /// request as the input each time.
    ///
    /// - Throws: Any error: the task then fails with
    ///   ``TransferError/Code/requestAdaptationFailed`` carrying it as
    ///   ``TransferError/underlyingError``; nothing is sent.
    func adapt(_ request: Request, for session: SessionManager) async throws -> Request
}

/// What a ``RequestRetrier`` decides after a failed attempt.
public enum RetryDecision: Sendable {
    /// The failed attempt is the task's result.
    case doNotRetry
    /// Send another attempt now.
    case retry
    /// Send another attempt after this delay.
    case retryAfter(Duration)
    /// Fail the task with ``TransferError/Code/requestRetryFailed`` carrying this error.
    case doNotRetryWithError(any Error & Sendable)
}

/// Decides whether a failed attempt is sent again (Alamofire's `RequestRetrier`).
public protocol RequestRetrier: Sendable {
    /// Asked after an attempt that failed in transport (cannot connect, timed
    /// out, reset...) or was answered with a status of 400 or more. Never
    /// asked after a cancel, nor for a task whose body is a stream (it cannot
    /// be sent twice).
    ///
    /// Runs on a task of the cooperative pool. While it decides, and during
    /// the delay it asks for, no transfer is in the engine; cancelling the
    /// task ends it at once as cancelled.
    ///
    /// - Parameters:
    ///   - request: The request of the failed attempt (as adapted).
    ///   - session: The session that ran the attempt.
    ///   - error: Why it failed; for a status, ``TransferError/Code/unacceptableStatusCode``
    ///     with ``TransferError/httpStatus`` and ``TransferError/response`` set.
    ///   - response: The response of the failed attempt, if one came.
    ///   - attempt: How many attempts were made so far (1 after the first one failed).
    func retry(_ request: Request, for session: SessionManager, dueTo error: TransferError, response: HTTPResponse?,
               attempt: Int) async -> RetryDecision
}

/// Both an adapter and a retrier; the defaults change nothing and never retry.
public protocol RequestInterceptor: RequestAdapter, RequestRetrier {}

extension RequestInterceptor {
    public func adapt(_ request: Request, for session: SessionManager) async throws -> Request { request }

    public func retry(_ request: Request, for session: SessionManager, dueTo error: TransferError,
                      response: HTTPResponse?, attempt: Int) async -> RetryDecision
    {
        .doNotRetry
    }
}

/// Adapters and retriers run in order: each adapter gets the previous one's
/// request; the first retrier that says something else than `.doNotRetry`
/// decides. A session's and a request's interceptors are composed this way,
/// the session's first.
public struct Interceptor: RequestInterceptor {
    /// Adapters, run in order before each attempt.
    public var adapters: [any RequestAdapter]
    /// Retriers, asked in order after a failed attempt; the first answer other than `.doNotRetry` wins.
    public var retriers: [any RequestRetrier]

    /// An interceptor that combines adapters and retriers.
    public init(adapters: [any RequestAdapter] = [], retriers: [any RequestRetrier] = []) {
        self.adapters = adapters
        self.retriers = retriers
    }

    /// Each interceptor as both an adapter and a retrier, in this order.
    public init(interceptors: [any RequestInterceptor]) {
        self.init(adapters: interceptors, retriers: interceptors)
    }

    /// An adapter and a retrier made of closures.
    public init(adapter: @escaping @Sendable (Request, SessionManager) async throws -> Request = { request, _ in request },
                retrier: @escaping @Sendable (Request, SessionManager, TransferError, HTTPResponse?, Int) async
                    -> RetryDecision = { _, _, _, _, _ in .doNotRetry })
    {
        self.init(adapters: [ClosureAdapter(body: adapter)], retriers: [ClosureRetrier(body: retrier)])
    }

    public func adapt(_ request: Request, for session: SessionManager) async throws -> Request {
        var current = request
        for adapter in adapters {
            current = try await adapter.adapt(current, for: session)
        }
        return current
    }

    public func retry(_ request: Request, for session: SessionManager, dueTo error: TransferError,
                      response: HTTPResponse?, attempt: Int) async -> RetryDecision
    {
        for retrier in retriers {
            let decision = await retrier.retry(request, for: session, dueTo: error, response: response,
                                               attempt: attempt)
            if case .doNotRetry = decision { continue }
            return decision
        }
        return .doNotRetry
    }

    /// The session's interceptor, then the request's; nil when neither is set.
    static func composing(_ session: (any RequestInterceptor)?, _ request: (any RequestInterceptor)?)
        -> (any RequestInterceptor)?
    {
        switch (session, request) {
        case (nil, nil): return nil
        case (let one?, nil), (nil, let one?): return one
        case (let first?, let second?): return Interceptor(interceptors: [first, second])
        }
    }
}

private struct ClosureAdapter: RequestAdapter {
    let body: @Sendable (Request, SessionManager) async throws -> Request
    func adapt(_ request: Request, for session: SessionManager) async throws -> Request {
        try await body(request, session)
    }
}

private struct ClosureRetrier: RequestRetrier {
    let body: @Sendable (Request, SessionManager, TransferError, HTTPResponse?, Int) async -> RetryDecision
    func retry(_ request: Request, for session: SessionManager, dueTo error: TransferError, response: HTTPResponse?,
               attempt: Int) async -> RetryDecision
    {
        await body(request, session, error, response, attempt)
    }
}

/// An interceptor held by a `Hashable` value (``SessionConfiguration``,
/// ``Request``): equal only to itself (each assignment is a new identity).
struct InterceptorReference: Sendable, Hashable {
    private let id = UUID()
    let value: any RequestInterceptor

    init(_ value: any RequestInterceptor) { self.value = value }

    static func == (lhs: Self, rhs: Self) -> Bool { lhs.id == rhs.id }
    func hash(into hasher: inout Hasher) { hasher.combine(id) }
}
