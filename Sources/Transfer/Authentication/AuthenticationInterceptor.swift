import FoundationEssentials

/// A credential an ``Authenticator`` applies and refreshes.
public protocol AuthenticationCredential: Sendable {
    /// True when the credential is known to be stale (an access token past
    /// its expiry): it is refreshed before the next request uses it.
    var requiresRefresh: Bool { get }
}

/// Applies and refreshes one kind of credential for an ``AuthenticationInterceptor``.
public protocol Authenticator: Sendable {
    /// The credential this authenticator applies and refreshes.
    associatedtype Credential: AuthenticationCredential

    /// Puts `credential` on `request` (an `Authorization` header, usually).
    func apply(_ credential: Credential, to request: inout Request)

    /// Gets a fresh credential. Called once for all requests waiting on it.
    func refresh(_ credential: Credential, for session: SessionManager) async throws -> Credential

    /// Whether the failed attempt failed because of the credential (default: a 401).
    func didRequest(_ request: Request, with response: HTTPResponse, failDueToAuthenticationError error: TransferError)
        -> Bool

    /// Whether `request` was sent with `credential` (and not an older one).
    func isRequest(_ request: Request, authenticatedWith credential: Credential) -> Bool
}

extension Authenticator {
    public func didRequest(_ request: Request, with response: HTTPResponse,
                           failDueToAuthenticationError error: TransferError) -> Bool
    {
        response.statusCode == 401
    }
}

/// Why an ``AuthenticationInterceptor`` could not authenticate a request; the
/// task's ``TransferError`` (``TransferError/Code/requestAdaptationFailed`` or
/// ``TransferError/Code/requestRetryFailed``) carries it as its underlying error.
public enum AuthenticationError: Error, Sendable, CustomStringConvertible {
    /// No credential was set.
    case missingCredential
    /// The refresh failed; every request that waited on it fails with this.
    case refreshFailed(any Error & Sendable)

    public var description: String {
        switch self {
        case .missingCredential: return "no credential to authenticate with"
        case .refreshFailed(let error): return "refreshing the credential failed: \(error)"
        }
    }
}

/// Authenticates requests with a credential, and on a 401 refreshes it once
/// for every request that waits on it, then retries them (Alamofire's
/// `AuthenticationInterceptor`).
///
/// - Before each attempt, ``adapt(_:for:)`` applies the current credential,
///   waiting for a refresh in progress (or starting one when the credential
///   ``AuthenticationCredential/requiresRefresh``).
/// - After a 401 (``Authenticator/didRequest(_:with:failDueToAuthenticationError:)``),
///   a request sent with the current credential starts a refresh, or joins the
///   one in progress; a request sent with an older credential is retried at
///   once. Only one refresh runs at a time, however many requests failed.
/// - A failed refresh fails every request waiting on it with
///   ``AuthenticationError/refreshFailed(_:)``, and every later 401 with the
///   same credential fails the same way without another refresh (a refresh
///   that failed usually means the user must sign in again): set
///   ``credential`` to start over.
public final class AuthenticationInterceptor<A: Authenticator>: RequestInterceptor, @unchecked Sendable {
    // @unchecked Sendable: `state` is a Protected lock; the rest is immutable.

    /// The authenticator that applies and refreshes the credential.
    public let authenticator: A
    /// Attempts of one request, the first included, after which a 401 is the result.
    public let maximumAttempts: Int

    private struct State {
        var credential: A.Credential?
        var refresh: Task<A.Credential, any Error>?
        var refreshCount = 0
        /// A refresh of the current credential failed: later 401s with it
        /// fail the same way, without a refresh each (until a new credential is set).
        var refreshFailure: (any Error)?
    }

    private let state: Protected<State>

    private enum RetryStep {
        case retryNow
        case join(Task<A.Credential, any Error>)
        case fail(AuthenticationError)
    }

    private enum AdaptStep {
        case use(A.Credential)
        case wait(Task<A.Credential, any Error>)
    }

    /// An interceptor with `authenticator` and an optional first credential;
    /// a request is retried after a refresh at most `maximumAttempts` times.
    public init(authenticator: A, credential: A.Credential? = nil, maximumAttempts: Int = 3)
    {
        self.authenticator = authenticator
        self.maximumAttempts = maximumAttempts
        state = Protected(State(credential: credential))
    }

    /// The credential requests are sent with.
    public var credential: A.Credential? {
        get { state.withLock { $0.credential } }
        set {
            state.withLock { state in
                state.credential = newValue
                state.refreshFailure = nil
            }
        }
    }

    /// How many refreshes ran since this interceptor was made.
    public var refreshCount: Int { state.withLock { $0.refreshCount } }

    public func adapt(_ request: Request, for session: SessionManager) async throws -> Request {
        let credential = try await currentCredential(for: session)
        var adapted = request
        authenticator.apply(credential, to: &adapted)
        return adapted
    }

    public func retry(_ request: Request, for session: SessionManager, dueTo error: TransferError,
                      response: HTTPResponse?, attempt: Int) async -> RetryDecision
    {
        guard let response,
            authenticator.didRequest(request, with: response, failDueToAuthenticationError: error),
            attempt < maximumAttempts
        else { return .doNotRetry }
        let step = state.withLock { state -> RetryStep in
            guard let credential = state.credential else { return .fail(.missingCredential) }
            if let refresh = state.refresh { return .join(refresh) }
            // Sent with an older credential: the refresh already happened.
            guard authenticator.isRequest(request, authenticatedWith: credential) else { return .retryNow }
            if let failure = state.refreshFailure { return .fail(Self.refreshFailure(failure)) }
            return .join(startRefresh(from: credential, for: session, in: &state))
        }
        switch step {
        case .retryNow:
            return .retry
        case .fail(let reason):
            return .doNotRetryWithError(reason)
        case .join(let refresh):
            do {
                _ = try await refresh.value
                return .retry
            } catch {
                return .doNotRetryWithError(Self.refreshFailure(error))
            }
        }
    }

    /// The credential to apply now: after the refresh in progress, or after a
    /// new one when the credential says it is stale.
    private func currentCredential(for session: SessionManager) async throws -> A.Credential {
        let step = try state.withLock { state throws(AuthenticationError) -> AdaptStep in
            if let refresh = state.refresh { return .wait(refresh) }
            guard let credential = state.credential else { throw .missingCredential }
            guard credential.requiresRefresh else { return .use(credential) }
            return .wait(startRefresh(from: credential, for: session, in: &state))
        }
        switch step {
        case .use(let credential):
            return credential
        case .wait(let refresh):
            do {
                return try await refresh.value
            } catch {
                throw Self.refreshFailure(error)
            }
        }
    }

    /// Under the lock: the one refresh, shared by every waiter. It runs in a
    /// task of its own, so a waiter that is cancelled does not cancel it for
    /// the others.
    private func startRefresh(from credential: A.Credential, for session: SessionManager, in state: inout State)
        -> Task<A.Credential, any Error>
    {
        state.refreshCount += 1
        let authenticator = self.authenticator
        let task = Task<A.Credential, any Error> { [weak self] in
            do {
                let fresh = try await authenticator.refresh(credential, for: session)
                self?.state.withLock { state in
                    state.credential = fresh
                    state.refresh = nil
                }
                return fresh
            } catch {
                self?.state.withLock { state in
                    state.refresh = nil
                    state.refreshFailure = error
                }
                throw error
            }
        }
        state.refresh = task
        return task
    }

    private static func refreshFailure(_ error: any Error) -> AuthenticationError {
        if let known = error as? AuthenticationError { return known }
        return .refreshFailed(error)
    }
}

/// A bearer token (RFC 6750), with an optional expiry.
public struct BearerToken: AuthenticationCredential, Hashable {
    /// The token sent as `Authorization: Bearer`.
    public var accessToken: String
    /// The token that gets a new access token, when the server gave one.
    public var refreshToken: String?
    /// When the access token expires; nil when unknown.
    public var expiration: Date?

    /// A bearer token.
    public init(accessToken: String, refreshToken: String? = nil, expiration: Date? = nil) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.expiration = expiration
    }

    /// Refresh a little before the expiry, not after a 401.
    public var requiresRefresh: Bool {
        guard let expiration else { return false }
        return expiration.timeIntervalSinceNow < 30
    }
}

/// Sends `Authorization: Bearer <token>` and refreshes with a closure.
public struct BearerAuthenticator: Authenticator {
    /// Gets a new token from the old one; what it throws fails the request.
    public let refreshToken: @Sendable (BearerToken, SessionManager) async throws -> BearerToken

    /// An authenticator that refreshes with `refresh`.
    public init(refresh: @escaping @Sendable (BearerToken, SessionManager) async throws -> BearerToken) {
        self.refreshToken = refresh
    }

    public func apply(_ credential: BearerToken, to request: inout Request) {
        request.headers["Authorization"] = "Bearer \(credential.accessToken)"
    }

    public func refresh(_ credential: BearerToken, for session: SessionManager) async throws -> BearerToken {
        try await refreshToken(credential, session)
    }

    public func isRequest(_ request: Request, authenticatedWith credential: BearerToken) -> Bool {
        request.headers["Authorization"] == "Bearer \(credential.accessToken)"
    }
}
