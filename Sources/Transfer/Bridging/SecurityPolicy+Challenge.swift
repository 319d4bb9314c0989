import CTransfer
import FoundationEssentials

/// Box retained by the C policy for its challenge handler (released by `release_ctx`).
private final class ChallengeSink: Sendable {
    let handler: EngineChallengeHandler
    init(handler: @escaping EngineChallengeHandler) { self.handler = handler }
}

extension SecurityPolicy {
    /// Builds the engine's policy with a challenge handler (the session- and task-level
    /// authentication-challenge hooks of AFURLSessionManager, combined by the caller).
    /// - Throws: as `makeEnginePolicy()`.
    func makeEnginePolicy(challengeHandler: EngineChallengeHandler?) throws(TransferError)
        -> EngineTrustPolicy
    {
        let policy = try makeEnginePolicy(withReports: true)
        guard let challengeHandler else { return policy }
        let sink = Unmanaged.passRetained(ChallengeSink(handler: challengeHandler))
        let rc = ct_trust_policy_set_challenge_handler(
            policy.pointer,
            { ctx, challenge in
                guard let ctx else { return challenge.pointee.proposed_reason }
                let sink = Unmanaged<ChallengeSink>.fromOpaque(ctx).takeUnretainedValue()
                let c = challenge.pointee
                var certificates: [Certificate] = []
                for index in 0..<c.chain_count {
                    let data = Data(bytes: c.chain_ders[index], count: c.chain_lengths[index])
                    if let certificate = try? Certificate(derData: data) { certificates.append(certificate) }
                }
                let host = String(cString: c.host)
                let verdict: TrustEvaluation =
                    c.proposed_reason == 0
                    ? .valid
                    : TrustFailureReason(rawValue: c.proposed_reason).map {
                        TrustEvaluation(reason: $0, verifyError: c.verify_error, message: String(cString: c.message),
                                        host: host)
                    } ?? .rejectedByChallengeHandler
                var trust = ServerTrust(certificates: certificates, host: host)
                trust.port = c.port > 0 ? Int(c.port) : nil
                switch sink.handler(trust, verdict) {
                case .useCredential: return Int32(CT_TLS_OK.rawValue)
                case .performDefaultHandling: return c.proposed_reason
                case .cancel, .reject: return Int32(CT_TLS_REJECTED_BY_DELEGATE.rawValue)
                case nil: return Int32(CT_TLS_CHALLENGE_TIMED_OUT.rawValue)
                }
            },
            sink.toOpaque(),
            { ctx in
                // Balances passRetained above; runs once when the C policy is freed.
                if let ctx { Unmanaged<ChallengeSink>.fromOpaque(ctx).release() }
            })
        guard rc == CT_OK else {
            sink.release()
            throw TransferError(.internalError, "the trust policy refused a challenge handler")
        }
        return policy
    }
}
