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
    // Loop thread only, so no dynamic exclusivity check (a runtime call
    // per access, several per pass).
    @exclusivity(unchecked) private var finished: [FastRequest] = []
    /// The buffer of the pass before, emptied and kept: two buffers take
    /// turns, so a pass allocates none.
    @exclusivity(unchecked) private var spare: [FastRequest] = []

    init(mailbox: Mailbox) { self.mailbox = mailbox }

    /// Loop thread, from a fast request's finish: delivered at the end of the pass.
    func didFinish(_ request: FastRequest) {
        finished.append(request)
    }

    /// Loop thread, once per pass.
    func end() {
        if !finished.isEmpty {
            var done: [FastRequest] = []
            swap(&done, &finished)
            swap(&finished, &spare)
            var singles: [Int] = []
            // The batches that had a request finish: nearly always one, so a
            // list searched by identity, not a dictionary made per pass.
            var runs: [BatchRun] = []
            for request in done {
                if let run = request.run {
                    run.didFinish(request)
                    if !runs.contains(where: { $0 === run }) { runs.append(run) }
                } else {
                    singles.append(request.registrySlot)
                }
            }
            if !singles.isEmpty { registry.remove(slots: singles) }
            // Event monitors that want completions and the completion
            // notification: one hand-over each per pass, before the callers go on.
            if let session = done.first?.session {
                let monitors = session.observation.wantsCompletions
                let notifies = TransferEvents.postsTasklessCompletions
                if monitors || notifies {
                    var completions: [CompletedRequest] = []
                    completions.reserveCapacity(done.count)
                    for request in done {
                        if let completion = request.completion { completions.append(completion) }
                        request.completion = nil
                    }
                    if monitors { session.observation.requestsDidComplete(completions) }
                    if notifies && !completions.isEmpty {
                        TransferEvents.postCompletions(completions, on: session.delegateQueue)
                    }
                }
            }
            Self.resumeCallers(done)
            for run in runs { run.passDidEnd() }
            done.removeAll(keepingCapacity: true)
            spare = done
        }
        mailbox.flush()
    }
}

extension EnginePass {
    /// Resumes the `data(for:)` callers among `done`: one directly, several
    /// from one job on the global executor.
    ///
    /// Each resumed caller is a job for the global executor, and a job
    /// queued into an empty pool wakes a worker thread. Woken from the loop
    /// thread, which runs more than any other, that worker preempts it when
    /// they share a CPU: it runs the one job, finds the pool empty and
    /// sleeps, and the loop resumes the next caller. That made a wake-up and
    /// two context switches per request (23,000 context switches for 20,000
    /// GETs, one CPU). Resumed from one job, the callers are queued by a
    /// worker that has just been given the CPU, and they are run in one go
    /// (1,250 context switches for the same run).
    static func resumeCallers(_ done: [FastRequest]) {
        var callers: [FastRequest] = []
        var priority = TaskPriority.background
        for request in done where request.run == nil {
            callers.append(request)
            if request.callerPriority > priority { priority = request.callerPriority }
        }
        if callers.count > 1 {
            Task.detached(priority: priority) { for request in callers { request.resumeCaller() } }
        } else {
            for request in callers { request.resumeCaller() }
        }
    }
}

/// Something in flight on the fast path that invalidation must reach.
protocol FastCancellable: AnyObject, Sendable {
    func cancel()
}

/// The fast-path work in flight of one session: one lock to enter (which
/// also refuses work once the session is invalidated), one per loop pass to
/// leave. Once closed, it tells ``onDrained`` (once) when the last piece of
/// work has left: the session's shutdown waits for that.
final class FastRegistry: Sendable {
    private let state = Protected<State>(State())

    /// Work in flight by slot: a slot is given back when its work leaves
    /// and reused, so entering and leaving hash nothing (a `data(for:)`
    /// call enters and leaves once each).
    private struct State {
        var closed = false
        var live: [(any FastCancellable)?] = []
        var freeSlots: [Int] = []
        var count = 0
        /// Set by ``close(whenDrained:)``; taken when `live` empties.
        var onDrained: (@Sendable () -> Void)?

        var all: [any FastCancellable] { live.compactMap { $0 } }
    }

    /// Registers `work` and returns its slot (for ``remove(slot:)``); nil
    /// once the session was invalidated, unless `late` (`work` belongs to
    /// something admitted before: a batch) and work is still in flight
    /// (which that batch is).
    func admit(_ work: any FastCancellable, late: @autoclosure () -> Bool = false) -> Int? {
        state.withLock { state in
            guard !state.closed || (state.count > 0 && late()) else { return nil }
            state.count += 1
            if let slot = state.freeSlots.popLast() {
                state.live[slot] = work
                return slot
            }
            state.live.append(work)
            return state.live.count - 1
        }
    }

    /// The work in `slots` has left (each slot once, as ``admit(_:late:)`` gave it).
    func remove(slots: [Int]) {
        let drained = state.withLock { state -> (@Sendable () -> Void)? in
            for slot in slots {
                state.live[slot] = nil
                state.freeSlots.append(slot)
            }
            state.count -= slots.count
            guard state.closed, state.count == 0 else { return nil }
            defer { state.onDrained = nil }
            return state.onDrained
        }
        drained?()
    }

    func remove(slot: Int) { remove(slots: [slot]) }

    /// Refuses new work from now on; returns what is in flight. The first
    /// call's `whenDrained` runs once nothing is left in flight: at once
    /// (before this returns) when nothing is, else on the thread that removes
    /// the last piece of work.
    @discardableResult
    func close(whenDrained: (@Sendable () -> Void)? = nil) -> [any FastCancellable] {
        let (live, drained) = state.withLock { state -> ([any FastCancellable], (@Sendable () -> Void)?) in
            if !state.closed { state.onDrained = whenDrained }
            state.closed = true
            guard state.count == 0 else { return (state.all, nil) }
            defer { state.onDrained = nil }
            return ([], state.onDrained)
        }
        drained?()
        return live
    }

    /// What is in flight now.
    var inFlight: [any FastCancellable] { state.withLock { $0.all } }

    /// Closed, with nothing in flight.
    var isDrained: Bool { state.withLock { $0.closed && $0.count == 0 } }
}
