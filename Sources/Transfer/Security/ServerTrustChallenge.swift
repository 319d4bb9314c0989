import FoundationEssentials

/// The answer to a server-trust challenge (AFNetworking's `NSURLSessionAuthChallengeDisposition`
/// for `NSURLAuthenticationMethodServerTrust`).
public enum ServerTrustDisposition: Sendable, Hashable {
    /// Trust the server whatever the policy said (AF: use a credential made from the trust;
    /// the session maps only `.useCredential(.serverTrust(trust))` of a hook to this).
    case useCredential
    /// Let the ``SecurityPolicy`` decide.
    case performDefaultHandling
    /// Refuse the server: the task fails with `serverTrustRejected`.
    case cancel
    /// Refuse this protection space; for server trust the same as ``cancel``.
    case reject
}

/// Decides a server-trust challenge: the presented chain (with its host) and the policy's verdict.
///
/// Runs on the engine's thread in the middle of the TLS handshake, which waits for it: answer
/// from state you already have, quickly, and never wait for work that needs the engine.
public typealias ServerTrustChallengeHandler =
    @Sendable (_ trust: ServerTrust, _ policyVerdict: TrustEvaluation) -> ServerTrustDisposition

/// The engine side of a challenge handler: the disposition, or nil when the
/// handler gave no answer in time (the server is then refused, fail closed).
typealias EngineChallengeHandler =
    @Sendable (_ trust: ServerTrust, _ policyVerdict: TrustEvaluation) -> ServerTrustDisposition?
