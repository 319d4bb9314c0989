import Dispatch
import FoundationEssentials
import Glibc

// Lifecycle in async form: `shutdown()` and `waitUntilInvalid()`
// (README, "Lifecycle"). Built on invalidation (SessionManager+Invalidation.swift).

extension SessionManager {
    /// Shuts the session down and returns once everything it held is released.
    ///
    /// In order:
    /// 1. The session is invalidated: every request or task created from now
    ///    on fails with ``TransferError/Code/sessionInvalidated``. Requests
    ///    and tasks created before run to completion (`cancellingTasks:
    ///    false`, the default, as ``finishTasksAndInvalidate()``), or are
    ///    cancelled and complete with ``TransferError/Code/cancelled``
    ///    (`cancellingTasks: true`, as ``invalidateAndCancel()``).
    /// 2. Once the last of them has completed (its completion handler or its
    ///    `await` delivered), the `sessionDidBecomeInvalid` hook, the
    ///    delegate and `Notification.Name.transferSessionDidInvalidate` are
    ///    told, and every ``waitUntilInvalid()`` returns.
    /// 3. The engine thread ends and its connections, DNS cache and
    ///    descriptors are closed.
    ///
    /// Any number of callers may await it, from any task; each returns when
    /// the session is released. A second call with `cancellingTasks: true`
    /// cancels what a graceful first call was waiting for.
    ///
    /// Cancelling the Swift task that awaits it turns a graceful shutdown
    /// into a cancelling one: the running requests are cancelled, the session
    /// is still released before this returns, and it then throws
    /// ``TransferError/Code/cancelled``.
    ///
    /// ```swift
    /// let session = try SessionManager()
    /// // ... serve requests ...
    /// try await session.shutdown()   // in-flight requests finish, new ones are refused
    /// ```
    ///
    /// - Parameter cancellingTasks: Cancel the running requests (true)
    ///   instead of letting them finish (false).
    /// - Throws: ``TransferError/Code/cancelled`` when the awaiting Swift task
    ///   was cancelled before the running requests had finished.
    public func shutdown(cancellingTasks: Bool = false) async throws(TransferError) {
        invalidateSession(cancelPendingTasks: cancellingTasks)
        if cancellingTasks { cancelEverything() }
        let interrupted = await withTaskCancellationHandler {
            await invalidation.wait(cancellable: false)
            return Task.isCancelled && !cancellingTasks
        } onCancel: {
            self.cancelEverything()
        }
        await releaseEngine()
        if interrupted {
            throw TransferError(.cancelled, "the shutdown was cancelled: the requests still running were cancelled")
        }
    }

    /// Returns once the session has become invalid: invalidated (by
    /// ``shutdown(cancellingTasks:)``, ``finishTasksAndInvalidate()``,
    /// ``invalidateAndCancel()`` or ``invalidateSession(cancelPendingTasks:resetSession:)``)
    /// and with every request and task it had completed — the moment the
    /// `sessionDidBecomeInvalid` hook runs. Unlike that hook, which holds one
    /// closure, any number of callers can wait. Returns at once when the
    /// session is already invalid, and early when the awaiting Swift task is
    /// cancelled (check ``isInvalid``).
    public func waitUntilInvalid() async {
        await invalidation.wait(cancellable: true)
    }

    /// Whether the session has become invalid: see ``waitUntilInvalid()``.
    public var isInvalid: Bool { invalidation.isOpen }

    /// Cancels every task and fast-path request in flight.
    func cancelEverything() {
        for task in tasks { task.cancel() }
        for work in engine.pass.registry.inFlight { work.cancel() }
    }

    /// Ends the engine thread off the cooperative pool (it blocks until the
    /// thread has ended), then lets the delegate queue deliver what the
    /// engine's last pass handed it.
    func releaseEngine() async {
        let engine = self.engine
        let queue = delegateQueue
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            detachThread {
                engine.stop()
                queue.async { continuation.resume() }
            }
        }
    }
}

/// A one-way gate many tasks can wait on: closed until ``open()``, then open for good.
final class Latch: Sendable {
    private struct State {
        var open = false
        var nextID = 0
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
    }

    private let state = Protected(State())

    var isOpen: Bool { state.withLock { $0.open } }

    /// Opens the gate: every waiter returns, and later ones do at once.
    func open() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.open = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the gate is open, or (`cancellable`) when the awaiting
    /// task is cancelled.
    func wait(cancellable: Bool) async {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.open || (cancellable && Task.isCancelled) { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            guard cancellable else { return }
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume()
        }
    }
}

/// Work the session admitted before it was invalidated and that starts its
/// requests later, from another Swift task (a batch over tasks): while this
/// names the session, its requests are let through an invalidation, as the
/// requests of a batch on the fast path are.
enum SessionAdmission {
    /// The session (its `ObjectIdentifier`) that admitted the running work.
    @TaskLocal static var session: ObjectIdentifier?

    /// Whether the running Swift task does work `session` admitted before
    /// it was invalidated. Read only on the refusal path.
    static func admits(_ session: SessionManager) -> Bool {
        Self.session == ObjectIdentifier(session)
    }
}
