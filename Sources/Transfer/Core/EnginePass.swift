import Synchronization

/// What one pass of the engine's loop hands over when it ends
/// (`on_batch_end`): the fast-path requests that finished during the pass
/// (their callers resumed in one go, a batch's results handed over once per
/// pass), then the session's mailbox.
///
/// Also the registry of fast-path work in flight, so that invalidating the
/// session reaches requests that are not tasks.
final class EnginePass: @unchecked Sendable {
    // @unchecked Sendable: `finished` is only touched on the loop thread
    // (on_finish and on_batch_end both run there); `mailbox` and `registry`
    // are Sendable.
    let mailbox: Mailbox
    let registry = FastRegistry()
    private var finished: [FastRequest] = []

    init(mailbox: Mailbox) { self.mailbox = mailbox }

    /// Loop thread, from a fast request's finish: delivered at the end of the pass.
    func didFinish(_ request: FastRequest) {
        finished.append(request)
    }

    /// Loop thread, once per pass.
    func end() {
        if !finished.isEmpty {
            let done = finished
            finished.removeAll(keepingCapacity: true)
            var singles: [ObjectIdentifier] = []
            var runs: [ObjectIdentifier: BatchRun] = [:]
            for request in done {
                if let run = request.run {
                    run.didFinish(request)
                    runs[ObjectIdentifier(run)] = run
                } else {
                    singles.append(ObjectIdentifier(request))
                }
            }
            if !singles.isEmpty { registry.remove(singles) }
            // Event monitors that want completions: one hand-over per pass,
            // before the callers go on.
            if let observation = done.first?.session.observation, observation.wantsCompletions {
                var completions: [CompletedRequest] = []
                completions.reserveCapacity(done.count)
                for request in done {
                    if let completion = request.completion { completions.append(completion) }
                    request.completion = nil
                }
                observation.requestsDidComplete(completions)
            }
            for request in done where request.run == nil { request.resumeCaller() }
            for run in runs.values { run.passDidEnd() }
        }
        mailbox.flush()
    }
}

/// Something in flight on the fast path that invalidation must reach.
protocol FastCancellable: AnyObject, Sendable {
    func cancel()
}

/// The fast-path work in flight of one session: one lock to enter (which
/// also refuses work once the session is invalidated), one per loop pass to
/// leave.
final class FastRegistry: Sendable {
    private let state = Protected<State>(State())

    private struct State {
        var closed = false
        var live: [ObjectIdentifier: any FastCancellable] = [:]
    }

    /// Registers `work`; false once the session was invalidated.
    func admit(_ work: any FastCancellable) -> Bool {
        state.withLock { state in
            guard !state.closed else { return false }
            state.live[ObjectIdentifier(work)] = work
            return true
        }
    }

    func remove(_ ids: [ObjectIdentifier]) {
        state.withLock { state in
            for id in ids { state.live.removeValue(forKey: id) }
        }
    }

    func remove(_ work: any FastCancellable) { remove([ObjectIdentifier(work)]) }

    /// Refuses new work from now on; returns what is in flight.
    func close() -> [any FastCancellable] {
        state.withLock { state in
            state.closed = true
            return Array(state.live.values)
        }
    }
}
