import Dispatch
import FoundationEssentials
import Synchronization

/// A batch on the fast path: its requests go to the engine a window at a
/// time (``BatchOptions/maxConcurrentRequests``), each window in one engine
/// command; finishes come back once per loop pass, which hands their results
/// over in one chunk and submits the next window. Requests are taken from
/// the source only as they are submitted, so a lazy source is never read
/// ahead; with a ``BatchDemand``, no further than the consumer allows. A
/// request's engine target is made when its window goes out and freed when
/// its result is handed over.
final class BatchRun: FastCancellable, @unchecked Sendable {
    // @unchecked Sendable: `state` is behind its lock (taken once per loop
    // pass, at start, when the consumer makes room, and when a request run
    // as a task finishes); `finishedThisPass` belongs to the loop thread;
    // `inEngine` is behind its lock, `cancelled` atomic; the rest is immutable.
    let session: SessionManager
    let options: BatchOptions
    private let output: BatchChannel
    private let demand: BatchDemand?
    /// Whether each request is checked for the fast path (false: the caller checked them all).
    private let checksEachRequest: Bool
    /// The requests in flight, for cancel(): one lock per window.
    private let inEngine = Protected(InFlightList())
    private let cancelled = Atomic<Bool>(false)
    private let state: Protected<State>
    /// Requests that finished in the current loop pass, and the buffer of
    /// the pass before, kept for the next (loop thread only: no dynamic
    /// exclusivity check).
    @exclusivity(unchecked) private var finishedThisPass: [FastRequest] = []
    @exclusivity(unchecked) private var spare: [FastRequest] = []
    /// The session's request instruments, bound on the caller's thread.
    private let instruments: [any RequestInstrument]
    /// Where windows are built: kept from one to the next, so that a window
    /// allocates no arrays or string arena of its own.
    private let window = Window()

    /// Used only by ``advance(_:)``, under the lock of `state`: no dynamic
    /// exclusivity checks.
    private final class Window {
        let strings = CStrings()
        @exclusivity(unchecked) var specs: [TransferSpec] = []
        @exclusivity(unchecked) var targets: [FastRequest] = []
        @exclusivity(unchecked) var contexts: [UnsafeMutableRawPointer?] = []
        @exclusivity(unchecked) var ids: [UInt64] = []

        /// Ready for the next window; the strings were copied by the engine.
        func clear() {
            strings.reset()
            specs.removeAll(keepingCapacity: true)
            targets.removeAll(keepingCapacity: true)
        }
    }

    private struct State {
        /// Where requests come from; nil once it has none left.
        var source: AnyIterator<Request>?
        /// Requests taken from the source so far (the next index).
        var next = 0
        var inFlight = 0
        var pending: [BatchResult] = []
        /// Requests finished since `inEngine` was last updated: the slots
        /// of fast-path requests, the indices of those run as tasks.
        var finishedSlots: [Int] = []
        var finishedTasks: [Int] = []
        /// The session was invalidated before the batch started: every request fails.
        var refused = false
        /// The batch's slot in the session's registry (nil: refused).
        var registrySlot: Int?
        var ended = false
    }

    init(session: SessionManager, source: AnyIterator<Request>, options: BatchOptions, demand: BatchDemand?,
         checksEachRequest: Bool, output: BatchChannel)
    {
        self.session = session
        self.options = options
        self.demand = demand
        self.checksEachRequest = checksEachRequest
        self.output = output
        self.state = Protected(State(source: source))
        let instruments = session.observation.instruments
        self.instruments = instruments.isEmpty ? [] : instruments.map { $0.bound() }
    }

    /// Caller's thread: the first window.
    func start() {
        let admitted = session.engine.pass.registry.admit(self)
        state.withLock { state in
            state.registrySlot = admitted
            state.refused = admitted == nil
            proceed(&state)
        }
    }

    /// Cancels the requests in flight; no more are taken from the source.
    func cancel() {
        cancelled.store(true, ordering: .sequentiallyConsistent)
        for request in inEngine.withLock({ $0.all }) { request.cancel() }
        // Ends the results now when nothing is in flight (say, waiting for the
        // consumer), but off this thread: cancel() runs inside the iterating
        // task's cancellation (the stream's onTermination, under that task's
        // status lock), while the loop thread may hold `state` and be handing
        // a chunk to that very task, which needs its status lock. Taking
        // `state` here deadlocked the two (seen under ThreadSanitizer).
        DispatchQueue.global().async { [self] in state.withLock { flush(&$0) } }
    }

    /// Loop thread, at the end of the pass `request` finished in.
    func didFinish(_ request: FastRequest) {
        finishedThisPass.append(request)
    }

    /// Loop thread, at the end of a pass in which some of this batch finished.
    func passDidEnd() {
        var done: [FastRequest] = []
        swap(&done, &finishedThisPass)
        swap(&finishedThisPass, &spare)
        defer {
            done.removeAll(keepingCapacity: true)
            spare = done
        }
        state.withLock { state in
            state.inFlight -= done.count
            for request in done {
                state.finishedSlots.append(request.slot)
                if let outcome = request.takeOutcome() { state.pending.append(outcome) }
            }
            proceed(&state)
        }
    }

    /// The consumer's thread: it has taken enough results for a new window.
    func creditArrived() {
        state.withLock { proceed(&$0) }
    }

    /// Any thread: a request run as a task has its result.
    private func taskDidFinish(_ result: BatchResult) {
        state.withLock { state in
            state.inFlight -= 1
            state.finishedTasks.append(result.index)
            state.pending.append(result)
            proceed(&state)
        }
    }

    private func proceed(_ state: inout State) {
        advance(&state)
        if !state.finishedSlots.isEmpty || !state.finishedTasks.isEmpty {
            inEngine.withLock { list in list.remove(&state.finishedSlots, tasks: &state.finishedTasks) }
        }
        flush(&state)
    }

    private func record(_ state: inout State, _ index: Int, _ result: Result<(Data, HTTPResponse), TransferError>) {
        state.pending.append(BatchResult(index: index, result: result, metrics: nil, bytesReceived: 0))
    }

    /// How many requests may be taken now.
    private func roomNow(_ state: State) -> Int {
        let limit = max(1, options.maxConcurrentRequests)
        guard let demand else { return limit - state.inFlight }
        while true {
            let room = min(limit - state.inFlight, demand.room(pulled: state.next))
            // No room because of the consumer (not the engine): wake when it
            // has taken a quarter window, so refills go out in windows, not one by one.
            if room > 0 || state.inFlight >= limit { return room }
            let step = max(1, demand.limit / 4)
            if demand.arm(target: state.next - demand.limit + step) { return 0 }
        }
    }

    /// Submits windows (one engine command each) while there is room.
    private func advance(_ state: inout State) {
        while state.source != nil && !cancelled.load(ordering: .sequentiallyConsistent) {
            let room = roomNow(state)
            if room <= 0 { return }
            let window = self.window
            defer { window.clear() }
            var tasks: [(Int, BatchTaskRequest)] = []
            var taken = 0
            while taken < room, let request = state.source?.next() {
                let index = state.next
                state.next += 1
                taken += 1
                if state.refused {
                    record(&state, index, .failure(SessionManager.invalidatedError(url: request.url)))
                    continue
                }
                if checksEachRequest && !session.takesFastPath(request) {
                    tasks.append((index, startTask(request, index: index)))
                    continue
                }
                if instruments.isEmpty {
                    enqueue(consume request, index: index, observers: [], into: window, state: &state)
                } else {
                    var instrumented = request
                    let observers = instruments.start(&instrumented)
                    enqueue(consume instrumented, index: index, observers: observers, into: window, state: &state)
                }
            }
            if taken < room { state.source = nil }
            if window.targets.isEmpty && tasks.isEmpty { continue }
            state.inFlight += tasks.count
            // Listed before they are submitted, so that a cancel() from now on
            // reaches them; one that came before is seen just after.
            inEngine.withLock { list in
                list.remove(&state.finishedSlots, tasks: &state.finishedTasks)
                for request in window.targets { request.slot = list.insert(request) }
                for (index, task) in tasks { list.insert(task, index: index) }
            }
            if cancelled.load(ordering: .sequentiallyConsistent) {
                for request in window.targets { request.cancel() }
                for (_, task) in tasks { task.cancel() }
            }
            if window.targets.isEmpty { continue }
            state.inFlight += window.targets.count
            if let error = session.engine.submitBatch(window.specs, targets: window.targets, contexts: &window.contexts,
                                                      ids: &window.ids)
            {
                state.inFlight -= window.targets.count
                inEngine.withLock { list in for request in window.targets { list.remove(slot: request.slot) } }
                for request in window.targets {
                    var error = error
                    error.url = request.request.url
                    Self.notify(request.observers, of: request.request, error)
                    record(&state, request.index, .failure(error))
                }
            } else {
                for (request, id) in zip(window.targets, window.ids) { request.didSubmit(id: id) }
            }
        }
    }

    /// Adds `request` to the window: its spec, built from the request itself,
    /// then its target, into which the request moves. (A `Request` read back
    /// from its target, or kept in a `var` across an `inout` call, is copied:
    /// about 600 instructions per request.) A request whose spec cannot be
    /// made fails here, and its observers hear of it.
    private func enqueue(_ request: consuming Request, index: Int, observers: [any RequestObserver],
                         into window: Window, state: inout State)
    {
        let collects = FastRequest.collectsMetrics(session: session, run: self, observed: !observers.isEmpty)
        do throws(TransferError) {
            window.specs.append(try session.fastSpec(for: request, strings: window.strings,
                                                     discardsBody: options.discardsBodies, collectsMetrics: collects))
        } catch {
            Self.notify(observers, of: request, error)
            record(&state, index, .failure(error))
            return
        }
        window.targets.append(FastRequest(session: session, request: consume request, run: self, index: index,
                                          observers: observers))
    }

    /// Tells a request's observers it failed before reaching the engine.
    private static func notify(_ observers: [any RequestObserver], of request: Request, _ error: TransferError) {
        if observers.isEmpty { return }
        let completed = CompletedRequest(request: request, response: nil, metrics: nil, error: error,
                                         taskIdentifier: nil)
        for observer in observers { observer.requestDidComplete(completed) }
    }

    /// A request that cannot take the fast path, as a task; its result comes
    /// back through ``taskDidFinish(_:)`` (which waits for the caller's lock).
    private func startTask(_ request: Request, index: Int) -> BatchTaskRequest {
        let session = self.session
        let options = self.options
        return BatchTaskRequest(Task { [self] in
            taskDidFinish(await session.batchResult(request, index: index, options: options))
        })
    }

    /// Hands the results so far over, and ends the sequence after the last.
    private func flush(_ state: inout State) {
        if !state.pending.isEmpty {
            // Moved out, so that the consumer holds the chunk's only reference.
            var chunk: [BatchResult] = []
            swap(&chunk, &state.pending)
            state.pending.reserveCapacity(chunk.count)
            output.send(consume chunk)
        }
        let noMore = state.source == nil || cancelled.load(ordering: .sequentiallyConsistent)
        if noMore && state.inFlight == 0 && !state.ended {
            state.ended = true
            output.finish()
            demand?.setOnCredit(nil)
            inEngine.withLock { $0 = InFlightList() }
            if let slot = state.registrySlot { session.engine.pass.registry.remove(slot: slot) }
        }
    }
}

/// The requests of a batch in the engine, for ``BatchRun/cancel()``. A
/// fast-path request takes a slot, given back when it has finished and
/// reused by a later one: no hashing per request. Requests run as tasks
/// (rare: those that cannot take the fast path) are kept by their index.
struct InFlightList {
    private var requests: [FastRequest?] = []
    private var freeSlots: [Int] = []
    private var tasks: [Int: any FastCancellable] = [:]

    /// Lists `request`; returns its slot.
    mutating func insert(_ request: FastRequest) -> Int {
        if let slot = freeSlots.popLast() {
            requests[slot] = request
            return slot
        }
        requests.append(request)
        return requests.count - 1
    }

    mutating func insert(_ task: any FastCancellable, index: Int) { tasks[index] = task }

    mutating func remove(slot: Int) {
        requests[slot] = nil
        freeSlots.append(slot)
    }

    /// Removes the requests in `slots` and the tasks of `tasks`, and empties both lists.
    mutating func remove(_ slots: inout [Int], tasks indices: inout [Int]) {
        for slot in slots { remove(slot: slot) }
        for index in indices { tasks.removeValue(forKey: index) }
        slots.removeAll(keepingCapacity: true)
        indices.removeAll(keepingCapacity: true)
    }

    /// Everything listed.
    var all: [any FastCancellable] {
        var all: [any FastCancellable] = requests.compactMap { $0 }
        all.append(contentsOf: tasks.values)
        return all
    }
}

/// A request of a batch that runs as a task (it cannot take the fast path),
/// as the batch's in-flight list sees it.
private final class BatchTaskRequest: FastCancellable {
    let task: Task<Void, Never>
    init(_ task: Task<Void, Never>) { self.task = task }
    func cancel() { task.cancel() }
}
