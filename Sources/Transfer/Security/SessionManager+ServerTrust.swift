import Dispatch
import FoundationEssentials

// The session's side of server trust: the policy it installs in the engine,
// failing closed on an invalid one, pin reports, and the server-trust
// challenge asked of hooks and the delegate mid-handshake.

extension SessionManager {
    /// The server-trust policy checked in the handshake of every new TLS
    /// connection of this session (redirect hops and HTTP/2 included).
    ///
    /// Setting an invalid policy (a malformed pin, an enforced host rule
    /// without a backup pin, validating domains while allowing invalid
    /// certificates without pins) fails closed: every new TLS connection is
    /// refused until a valid policy is set, whatever else changes meanwhile
    /// (``hooks`` included). The getter still returns the last valid policy.
    /// Use ``setSecurityPolicy(_:)`` to get the error as well.
    public var securityPolicy: SecurityPolicy {
        get { state.withLock { $0.securityPolicy } }
        set { try? setSecurityPolicy(newValue) }
    }

    /// Installs `policy` for new TLS connections; connections checked under the
    /// previous policy are not reused by new transfers.
    ///
    /// - Throws: ``TransferError/Code/invalidRequest`` when the policy is invalid.
    ///   The session then fails closed, as with the ``securityPolicy`` setter:
    ///   every new TLS connection is refused until a valid policy is set (an
    ///   ignored error must not leave the connections of a pinning app unpinned).
    public func setSecurityPolicy(_ policy: SecurityPolicy) throws(TransferError) {
        do throws(TransferError) {
            try installSecurityPolicy(policy)
        } catch {
            failClosed(error)
            throw error
        }
    }

    /// Refuses every new TLS connection until a valid policy is installed.
    func failClosed(_ error: TransferError) {
        state.withLock {
            $0.securityPolicyError = error
            $0.cacheTrustTag = nil
        }
        // The loop keeps its own reference; ours goes with this scope.
        engine.setTrustPolicy(EngineTrustPolicy.refusingEverything())
    }

    func installSecurityPolicy(_ policy: SecurityPolicy) throws(TransferError) {
        // Stored as given: a reinstall (after a hook change) wraps the report
        // handler once, not once more per reinstall.
        let given = policy
        var policy = policy
        if var pins = policy.pinPolicy, let reportURL = pins.reportURL {
            guard let scheme = reportURL.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
                throw TransferError(.invalidRequest, "the pin report URL must be http(s): \(reportURL)")
            }
            // Reports also go out as JSON POSTs, rate-limited per host and pattern.
            let userHandler = pins.reportHandler
            let limiter = ReportLimiter(interval: pins.reportInterval)
            pins.reportHandler = { [weak self] report in
                userHandler?(report)
                guard let self, limiter.admit(report) else { return }
                var request = Request(url: reportURL, method: .post, headers: ["Content-Type": "application/json"])
                request.body = .data(report.jsonData())
                self.dataTask(with: request).resume()
            }
            policy.pinPolicy = pins
        }
        try policy.validate()
        let wantsChallenge = state.withLock { $0.asksAboutServerTrust }
        var handler: EngineChallengeHandler?
        if wantsChallenge {
            handler = { @Sendable [weak self] trust, verdict in
                guard let self else { return .performDefaultHandling }
                return self.serverTrustChallenge(trust, verdict: verdict)
            }
        }
        let engineSide = try policy.makeEnginePolicy(challengeHandler: handler)
        let trustTag = policy.cacheTrustTag(caFile: configuration.caFile)
        state.withLock {
            $0.securityPolicy = given
            $0.securityPolicyError = nil
            $0.cacheTrustTag = trustTag
        }
        engine.setTrustPolicy(engineSide)   // the loop retains its own reference
    }

    /// Engine thread, mid-handshake: asks whoever answers server trust
    /// (``ChallengeAnswerer``), on the delegate queue (user code never runs
    /// on the engine thread). The handshake, and
    /// with it the engine thread, waits at most
    /// ``SessionConfiguration/serverTrustChallengeTimeout``; nil when no
    /// answer came by then (the server is refused; a late answer is dropped).
    private func serverTrustChallenge(_ trust: ServerTrust, verdict: TrustEvaluation) -> ServerTrustDisposition? {
        let (hooks, delegate) = observers
        let challenge = AuthenticationChallenge(kind: .serverTrust, host: trust.host ?? "", port: trust.port ?? 443,
                                                previousFailureCount: 0, failureResponse: nil, serverTrust: trust,
                                                policyVerdict: verdict)
        let answer = ChallengeAnswerBox()
        let ask: @Sendable () -> Void
        switch ChallengeAnswerer.forServerTrust(hooks: hooks, delegate: delegate) {
        case .sessionHook(let hook):
            ask = { answer.set(.disposition(hook(self, challenge))) }
        case .handler(let handler):
            ask = { answer.set(handler(self, nil, challenge, { answer.set(.disposition($0)) })) }
        case .delegate(let delegate):
            ask = { answer.set(.disposition(delegate.session(self, didReceive: challenge))) }
        case .taskHook, .nobody:
            return .performDefaultHandling
        }
        // Not delegateQueue.sync: a hook that never returns, or a delegate
        // queue busy with work that waits for the engine, would stall every
        // transfer of the session for ever.
        delegateQueue.async(execute: ask)
        let bound = max(TimeLimit.clampedSeconds(configuration.serverTrustChallengeTimeout, fallback: 5), 0.001)
        guard let result = answer.wait(timeout: bound) else { return nil }
        let key = Self.originKey(host: challenge.host, port: challenge.port)
        let disposition: ChallengeDisposition
        switch result {
        case .fail(let error):
            // Refused; the tasks this handshake was for complete with `error`.
            state.withLock { $0.trustFailures[key] = error }
            return .cancel
        case .disposition(let answered):
            disposition = answered
        case .deferred:
            disposition = .performDefaultHandling   // never stored: the box waits for a real answer
        }
        state.withLock { _ = $0.trustFailures.removeValue(forKey: key) }
        switch disposition {
        case .useCredential(let credential):
            // Only a credential made from this chain accepts the server. A
            // user/password (a hook written for 401s) leaves the decision to
            // the policy: it can never accept a certificate.
            guard let accepted = credential.serverTrust, accepted.certificates == trust.certificates else {
                return .performDefaultHandling
            }
            // A server the policy refused is accepted by the hook: until the
            // next policy change, nothing fetched is trusted enough to cache.
            if !verdict.isValid { state.withLock { $0.cacheTrustTag = nil } }
            return .useCredential
        case .performDefaultHandling: return .performDefaultHandling
        case .cancelAuthenticationChallenge: return .cancel
        case .rejectProtectionSpace: return .reject
        }
    }

    private static func originKey(host: String, port: Int) -> String {
        host.lowercased() + ":" + String(port)
    }

    /// The error `task` completes with: a challenge handler's in place of the
    /// trust refusal it caused (which becomes its underlying error), else
    /// `error` as it is. On the delegate queue, once.
    func finalError(_ error: TransferError?, of task: TransferTask) -> TransferError? {
        substitutingChallengeFailure(error, of: task)
    }

    private func substitutingChallengeFailure(_ error: TransferError?, of task: TransferTask) -> TransferError? {
        guard let error, error.code == .serverTrustRejected,
            error.trustFailureReason == .rejectedByDelegate
        else { return error }
        let urls = [error.url, task.currentRequest?.url, task.originalRequest.url].compactMap { $0 }
        let found = state.withLock { state -> TransferError? in
            for url in urls {
                let port = url.port ?? (url.scheme?.lowercased() == "http" ? 80 : 443)
                if let failure = state.trustFailures[Self.originKey(host: url.host ?? "", port: port)] {
                    return failure
                }
            }
            return nil
        }
        guard var replacement = found else { return error }
        if replacement.url == nil { replacement.url = error.url }
        if replacement.underlyingError == nil { replacement.underlyingError = error }
        return replacement
    }
}

/// At most one pin report per host and pattern per interval.
private final class ReportLimiter: Sendable {
    private let interval: TimeInterval
    private let last = Protected<[String: Date]>([:])

    init(interval: TimeInterval) { self.interval = interval }

    func admit(_ report: PinFailureReport) -> Bool {
        let key = report.host + "|" + report.pattern
        return last.withLock { last in
            if let previous = last[key], report.date.timeIntervalSince(previous) < interval { return false }
            last[key] = report.date
            return true
        }
    }
}

/// One answer of a server-trust challenge hook, handed from the delegate
/// queue to the engine thread that waits for it with a bound. The first
/// real answer counts; `.deferred` is not one.
/// @unchecked Sendable: `value` is guarded by `condition`.
private final class ChallengeAnswerBox: @unchecked Sendable {
    private let condition = ConditionLock()
    private var value: ChallengeAnswer?

    func set(_ answer: ChallengeAnswer) {
        if case .deferred = answer { return }
        condition.withLock {
            guard value == nil else { return }
            value = answer
            condition.broadcast()
        }
    }

    /// The answer, or nil when none came within `timeout` seconds.
    func wait(timeout: TimeInterval) -> ChallengeAnswer? {
        let deadline = ConditionLock.deadline(after: timeout)
        return condition.withLock {
            while value == nil {
                if !condition.wait(until: deadline) { break }
            }
            return value
        }
    }
}
