import FoundationEssentials

/// Who answers an authentication challenge: the one place the order is
/// decided. Four parties may answer; the first one set wins, and it alone
/// is asked.
///
/// | challenge | first | second | third | fourth | nobody set |
/// |---|---|---|---|---|---|
/// | a task's 401 (or 407) | ``SessionHooks/authenticationChallengeHandler`` | ``SessionHooks/taskDidReceiveChallenge`` | ``SessionHooks/sessionDidReceiveChallenge`` | the ``SessionDelegate`` | default handling: the request's or the session's credential |
/// | a connection's server trust | ``SessionHooks/sessionDidReceiveChallenge`` | ``SessionHooks/authenticationChallengeHandler`` (its task is nil) | — | the ``SessionDelegate``, when it ``SessionDelegate/wantsServerTrustChallenges`` | the ``SecurityPolicy``'s verdict |
///
/// AFNetworking's order: its `authenticationChallengeHandler` takes the
/// 401s before the task and session blocks, and server trust only when no
/// session-level block is set. What each answer does is
/// ``ChallengeDisposition``'s to say; a server-trust answer can only accept
/// the very chain OpenSSL verified (docs/SECURITY.md).
enum ChallengeAnswerer {
    case handler(@Sendable (SessionManager, TransferTask?, AuthenticationChallenge, @escaping ChallengeCompletion)
        -> ChallengeAnswer)
    case taskHook(@Sendable (SessionManager, TransferTask, AuthenticationChallenge) -> ChallengeDisposition)
    case sessionHook(@Sendable (SessionManager, AuthenticationChallenge) -> ChallengeDisposition)
    case delegate(any SessionDelegate)
    case nobody

    /// Who answers a task's 401.
    static func forAuthentication(hooks: SessionHooks, delegate: (any SessionDelegate)?) -> ChallengeAnswerer {
        if let handler = hooks.authenticationChallengeHandler { return .handler(handler) }
        if let hook = hooks.taskDidReceiveChallenge { return .taskHook(hook) }
        if let hook = hooks.sessionDidReceiveChallenge { return .sessionHook(hook) }
        if let delegate { return .delegate(delegate) }
        return .nobody
    }

    /// Who answers a new connection's server trust.
    static func forServerTrust(hooks: SessionHooks, delegate: (any SessionDelegate)?) -> ChallengeAnswerer {
        if let hook = hooks.sessionDidReceiveChallenge { return .sessionHook(hook) }
        if let handler = hooks.authenticationChallengeHandler { return .handler(handler) }
        if let delegate, delegate.wantsServerTrustChallenges { return .delegate(delegate) }
        return .nobody
    }
}
