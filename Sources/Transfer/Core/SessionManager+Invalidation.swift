import Dispatch
import FoundationEssentials

// Invalidation and reset (AFURLSessionManager's invalidateSessionCancelingTasks:resetSession:).

extension SessionManager {
    // MARK: - Invalidation

    /// Invalidates the session: no new task can be created afterwards.
    ///
    /// - Parameters:
    ///   - cancelPendingTasks: Cancel running tasks (true) or let them finish (false).
    ///   - resetSession: Also ``reset()`` the session, as AFNetworking does
    ///     (after the cancels, when `cancelPendingTasks`).
    public func invalidateSession(cancelPendingTasks: Bool, resetSession: Bool = false) {
        let pending: [TransferTask]? = state.withLock { state in
            guard !state.invalidated else { return nil }
            state.invalidated = true
            return Array(state.tasks.values)
        }
        // Requests on the fast path are not tasks: none starts from now on,
        // and those running are cancelled with the tasks. The session
        // becomes invalid once they have left too.
        let fast = engine.pass.registry.close(whenDrained: { [weak self] in self?.notifyIfIdle() })
        guard let pending else { return }
        if cancelPendingTasks {
            for task in pending { task.cancel() }
            for work in fast { work.cancel() }
        }
        if resetSession { reset() }
        notifyIfIdle()
    }

    /// Forgets what the session kept between transfers (URLSession's
    /// `reset`): idle pooled connections are closed, and no later transfer
    /// reuses a connection or resumes a TLS session made before the reset
    /// (connections busy now are closed once idle); then the reset actions
    /// of the session's stores run (`resetCookiesAndCache()`). Running
    /// transfers continue. Safe from any thread.
    public func reset() {
        let (policy, refusal) = state.withLock { ($0.securityPolicy, $0.securityPolicyError) }
        // The engine's trust-policy command starts a new connection
        // generation: later transfers get a new trust marker (no reuse, no
        // TLS resumption across it) and idle sockets of older ones are shut.
        // The same policy is installed again; a failed-closed session stays so.
        if let refusal {
            failClosed(refusal)
        } else {
            do throws(TransferError) {
                try installSecurityPolicy(policy)
            } catch {
                failClosed(error)
            }
        }
        resetCookiesAndCache()
    }

    /// Registers what ``reset()`` must clear in a store of the session (its
    /// cookies, its response cache). Runs on the thread that resets.
    func addResetAction(_ action: @escaping @Sendable () -> Void) {
        state.withLock { $0.resetActions.append(action) }
    }

    /// Runs the registered reset actions, in the order they were added.
    func resetCookiesAndCache() {
        for action in state.withLock({ $0.resetActions }) { action() }
    }

    /// Cancels every task and invalidates the session.
    public func invalidateAndCancel() { invalidateSession(cancelPendingTasks: true) }

    /// Invalidates once running tasks have finished.
    public func finishTasksAndInvalidate() { invalidateSession(cancelPendingTasks: false) }

    func notifyIfIdle() {
        let idle = state.withLock {
            $0.invalidated && $0.tasks.isEmpty && !$0.invalidationNotified && engine.pass.registry.isDrained
        }
        if idle { notifyInvalidation() }
    }

    /// Once, on the delegate queue, after the last task (and the last
    /// fast-path request) of an invalidated session.
    func notifyInvalidation() {
        delegateQueue.async { [self] in
            let claim = state.withLock { state -> (SessionHooks, (any SessionDelegate)?)? in
                guard !state.invalidationNotified else { return nil }
                state.invalidationNotified = true
                defer { state.delegate = nil }
                return (state.hooks, state.delegate)
            }
            guard let (hooks, delegate) = claim else { return }
            hooks.sessionDidBecomeInvalid?(self, nil)
            delegate?.session(self, didBecomeInvalidWithError: nil)
            TransferEvents.report(.sessionDidInvalidate, object: self)
            // Every ``waitUntilInvalid()`` caller, after the hook and the delegate.
            invalidation.open()
        }
    }

    /// Whether the session was invalidated; new tasks then fail with
    /// ``TransferError/Code/sessionInvalidated``.
    public var isInvalidated: Bool { state.withLock { $0.invalidated } }
}
