import Dispatch
import FoundationEssentials
import Glibc
import Synchronization

/// One finished request of a batch (see `SessionManager.results(for:options:)`).
public struct BatchResult: Sendable {
    /// The position of the request in the array or sequence given to the batch.
    public var index: Int
    /// The body and response, or the error of this request alone. HTTP error
    /// statuses are not errors here, as with ``SessionManager/data(for:)``.
    public var result: Result<(Data, HTTPResponse), TransferError>
    /// Timings, when ``BatchOptions/collectsMetrics`` is set (and the batch
    /// ran on the fast path).
    public var metrics: TaskMetrics?
    /// Body bytes received (also counted when bodies are discarded).
    public var bytesReceived: Int64
}

/// How a batch runs.
public struct BatchOptions: Sendable, Hashable {
    /// At most this many requests in the engine at once; the rest wait in order.
    /// A batch over a lazy sequence also takes no more than this many
    /// requests out of it ahead of the results the iterating task has taken.
    public var maxConcurrentRequests: Int
    /// Count each body and keep none of it (the `Data` is empty).
    public var discardsBodies: Bool
    /// Fill ``BatchResult/metrics``.
    public var collectsMetrics: Bool
    /// A batch over a lazy sequence: how many finished results may wait for
    /// the iterating task while ``maxConcurrentRequests`` stay in flight.
    ///
    /// With 0 (the default), results not yet taken count against the
    /// concurrency: memory stays within one window, and the engine refills
    /// only once the iterating task has taken some results. A consumer that
    /// keeps up but is often a step behind (it writes each result out, say)
    /// keeps the engine busy with a buffer as large as the window: requests
    /// are then refilled from the loop thread as they finish, instead of
    /// from the consumer's thread, which would wake the loop for each refill.
    public var bufferedResults: Int

    /// Options for a batch; the defaults keep bodies and skip metrics.
    public init(maxConcurrentRequests: Int = 64, discardsBodies: Bool = false, collectsMetrics: Bool = false,
                bufferedResults: Int = 0)
    {
        self.maxConcurrentRequests = maxConcurrentRequests
        self.discardsBodies = discardsBodies
        self.collectsMetrics = collectsMetrics
        self.bufferedResults = bufferedResults
    }
}

/// The results of a batch as they finish, in finishing order. Ending the
/// iteration early (or cancelling the Swift task that iterates) cancels the
/// requests still running.
public struct BatchResults: AsyncSequence, Sendable {
    public typealias Element = BatchResult
    public typealias Failure = Never

    /// The batch's results, chunk by chunk; dropping the last copy of the
    /// sequence and its iterators cancels the batch.
    let chunks: BatchChannel.Receiver
    /// Told of each result taken (batches over lazy sequences only).
    let demand: BatchDemand?

    init(chunks: BatchChannel, demand: BatchDemand? = nil) {
        self.chunks = BatchChannel.Receiver(chunks)
        self.demand = demand
    }

    /// An iterator over the results; one per batch.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: chunks, demand: demand)
    }

    /// Hands out the results of one loop pass after the other.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let base: BatchChannel.Receiver
        let demand: BatchDemand?
        /// The chunk being handed out, last result first: each is moved out
        /// with `popLast()`, not copied and destroyed.
        var buffer: [BatchResult] = []

        /// Results that have arrived and are not yet handed out: while this
        /// is above 0, ``next()`` returns without suspending. A consumer that
        /// batches its own output (the command's `--metrics` lines) writes it
        /// when this reaches 0, once per loop pass instead of once per result.
        package var readyCount: Int { buffer.count }

        /// The next finished request, or nil once every request has finished
        /// (or the batch was cancelled).
        public mutating func next() async -> BatchResult? {
            while buffer.isEmpty {
                // One chunk per loop pass: the results of every request that
                // finished in it.
                guard var chunk = await base.channel.next() else { return nil }
                // Reversed in place: the chunk's one reference is this one
                // (a shared array would be copied whole first).
                chunk.reverse()
                buffer = consume chunk
            }
            // Taken: its slot may be refilled (one relaxed add, one load).
            demand?.didConsume()
            return buffer.removeLast()
        }
    }
}

/// How far a batch over a lazy sequence may run ahead of the task that
/// iterates its results: at most `limit` requests taken from the sequence
/// and not yet handed out by ``BatchResults/AsyncIterator``. So memory is
/// bounded by the concurrency and the buffer
/// (``BatchOptions/bufferedResults``), whether the consumer keeps up or not.
///
/// The producer (the batch) reads ``consumed``; when it has no room it
/// arms a target, and the consumer's iterator calls back once it has taken
/// that many results.
final class BatchDemand: Sendable {
    let limit: Int
    /// Results handed out by the iterator.
    private let consumedCount = Atomic<Int>(0)
    /// The consumed count at which `onCredit` runs; `Int.max`: disarmed.
    private let resumeAt = Atomic<Int>(Int.max)
    /// A class, not the closure itself: a closure kept in the generic
    /// `Protected` and read through `withLock { $0 }` is reabstracted on the
    /// way out and again on the write-back of the `inout`, so each read
    /// wrapped it in two more thunks (a chain 90,000 deep after a million
    /// requests, walked on every call).
    private let onCredit = Protected<Callback?>(nil)

    private final class Callback: Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    init(limit: Int) { self.limit = max(1, limit) }

    var consumed: Int { consumedCount.load(ordering: .acquiring) }

    /// Sets what runs when an armed target is reached (nil: nothing; a
    /// finished batch clears it, which breaks the batch -> demand -> batch cycle).
    func setOnCredit(_ body: (@Sendable () -> Void)?) {
        let callback = body.map(Callback.init)
        onCredit.withLock { $0 = callback }
    }

    /// How many more requests may be taken when `pulled` have been.
    func room(pulled: Int) -> Int { limit - (pulled - consumed) }

    /// Asks for `onCredit` once `target` results have been taken; false when
    /// they already have (then nothing is armed and the caller goes on).
    func arm(target: Int) -> Bool {
        resumeAt.store(target, ordering: .sequentiallyConsistent)
        // The consumer may have passed `target` before it could see it armed.
        if consumedCount.load(ordering: .sequentiallyConsistent) >= target {
            disarm(target)
            return false
        }
        return true
    }

    @discardableResult
    private func disarm(_ target: Int) -> Bool {
        resumeAt.compareExchange(expected: target, desired: Int.max, ordering: .sequentiallyConsistent).exchanged
    }

    /// The iterator took one result.
    func didConsume() {
        let now = consumedCount.add(1, ordering: .sequentiallyConsistent).newValue
        let target = resumeAt.load(ordering: .sequentiallyConsistent)
        // Only the caller that disarms the target runs the callback.
        if now >= target, disarm(target), let callback = onCredit.withLock({ $0 }) { callback.body() }
    }
}

extension SessionManager {
    /// Sends every request, at most `maxConcurrentRequests` at once, and
    /// returns their results in the order of `requests`.
    ///
    /// Each element is the body and response of its request, or its own
    /// ``TransferError``: one failure does not stop the others. Cancelling
    /// the Swift task cancels the requests still running; they (and those
    /// not started) then carry ``TransferError/Code/cancelled``.
    ///
    /// On a session nobody observes (see ``data(for:)``) the whole batch is
    /// handed to the engine in few commands and Swift is entered once per
    /// loop pass, not once per request.
    public func data(for requests: [Request], maxConcurrentRequests: Int = 64) async
        -> [Result<(Data, HTTPResponse), TransferError>]
    {
        var collected = [Result<(Data, HTTPResponse), TransferError>?](repeating: nil, count: requests.count)
        let options = BatchOptions(maxConcurrentRequests: maxConcurrentRequests)
        for await element in results(for: requests, options: options) {
            collected[element.index] = element.result
        }
        return collected.enumerated().map { index, result in
            result ?? .failure(TransferError(.cancelled, "cancelled", url: requests[index].url))
        }
    }

    /// Sends every request (bounded by ``BatchOptions/maxConcurrentRequests``)
    /// and yields each result, with its index, as it finishes.
    ///
    /// The requests start at once, whether or not the sequence is iterated,
    /// and results are kept until taken; dropping the sequence or cancelling
    /// the iterating task cancels the ones still running. For more requests
    /// than you want to hold at once, pass a lazy sequence instead: the
    /// `results(for:options:)` that takes `some Sequence<Request> & Sendable`.
    public func results(for requests: [Request], options: BatchOptions = BatchOptions()) -> BatchResults {
        if requests.isEmpty {
            return BatchResults(chunks: .finished())
        }
        // By index: `allSatisfy` would copy each request out of the array.
        if requests.indices.allSatisfy({ takesFastPath(requests[$0]) }) {
            return startRun(AnyIterator(requests.makeIterator()), options: options, demand: nil, checksEachRequest: false)
        }
        return startTasks(requests, options: options, demand: nil)
    }

    /// Sends the requests of a sequence, taking each from it only as a slot
    /// frees up, and yields each result, with its index in the sequence, as
    /// it finishes: a batch of a million requests holds about
    /// ``BatchOptions/maxConcurrentRequests`` of them at a time.
    ///
    /// Back-pressure: at most `maxConcurrentRequests` (plus
    /// ``BatchOptions/bufferedResults``) requests are out of the sequence at
    /// once, in flight or finished and not yet taken by the iterating task.
    /// A consumer that falls behind slows the batch down instead of letting
    /// results pile up.
    ///
    /// Requests start when the batch is made, not when iteration begins.
    /// Cancelling the iterating task (or dropping the results) cancels the
    /// requests in flight and takes no more from the sequence. A request
    /// that cannot take the engine's fast path (a body, an interceptor or a
    /// credential of its own, a response cache) runs as a task, the others
    /// stay on the fast path; on a session that is observed, every request
    /// runs as a task.
    ///
    /// - Parameters:
    ///   - requests: The requests, in order. Use a sequence whose iterator
    ///     makes each request in `next()` (a `Sendable` struct over a range
    ///     or over the lines of a file) so that a request exists only while
    ///     it is sent. The iterator runs on the engine's loop thread, on the
    ///     iterating task or on the batch's own task, one call at a time:
    ///     keep `next()` quick and non-blocking.
    ///   - options: Concurrency, whether bodies are kept, and metrics.
    /// - Returns: The results in finishing order; ``BatchResult/index`` is the
    ///   position of the request in `requests`.
    public func results(for requests: some Sequence<Request> & Sendable,
                        options: BatchOptions = BatchOptions()) -> BatchResults
    {
        let demand = BatchDemand(limit: max(1, options.maxConcurrentRequests) + max(0, options.bufferedResults))
        if usesFastPath {
            return startRun(AnyIterator(requests.makeIterator()), options: options, demand: demand,
                            checksEachRequest: true)
        }
        return startTasks(requests, options: options, demand: demand)
    }

    private func startRun(_ source: AnyIterator<Request>, options: BatchOptions, demand: BatchDemand?,
                          checksEachRequest: Bool) -> BatchResults
    {
        let channel = BatchChannel()
        let run = BatchRun(session: self, source: source, options: options, demand: demand,
                           checksEachRequest: checksEachRequest, output: channel)
        demand?.setOnCredit { run.creditArrived() }
        channel.onCancel { run.cancel() }
        run.start()
        return BatchResults(chunks: channel, demand: demand)
    }

    private func startTasks(_ requests: some Sequence<Request> & Sendable, options: BatchOptions,
                            demand: BatchDemand?) -> BatchResults
    {
        let channel = BatchChannel()
        // The batch is made now, before the Swift task below runs: admitted
        // now, its requests run even if the session is invalidated before
        // they start (and an invalidation waits for them). Refused now, they
        // fail with sessionInvalidated.
        let admission = BatchAdmission()
        let admitted = engine.pass.registry.admit(admission)
        let task = Task {
            await SessionAdmission.$session.withValue(admitted != nil ? ObjectIdentifier(self) : nil) {
                await self.runBatchAsTasks(requests, options: options, demand: demand, output: channel)
            }
            if let admitted { self.engine.pass.registry.remove(slot: admitted) }
        }
        admission.attach(task)
        channel.onCancel { task.cancel() }
        return BatchResults(chunks: channel, demand: demand)
    }

    /// One request of a batch as a task (``data(for:)`` or ``discard(for:)``).
    func batchResult(_ request: Request, index: Int, options: BatchOptions) async -> BatchResult {
        do throws(TransferError) {
            if options.discardsBodies {
                let (bytes, response) = try await discard(for: request)
                return BatchResult(index: index, result: .success((Data(), response)), metrics: nil,
                                   bytesReceived: bytes)
            }
            let (data, response) = try await self.data(for: request)
            return BatchResult(index: index, result: .success((data, response)), metrics: nil,
                               bytesReceived: Int64(data.count))
        } catch {
            return BatchResult(index: index, result: .failure(error), metrics: nil, bytesReceived: 0)
        }
    }

    /// The batch over tasks, for sessions whose hooks, delegate or
    /// notification observers must see every request. With a `demand`, a
    /// request is taken from the sequence only while the consumer is within
    /// its limit.
    private func runBatchAsTasks(_ requests: some Sequence<Request> & Sendable, options: BatchOptions,
                                 demand: BatchDemand?, output: BatchChannel) async
    {
        let width = max(1, options.maxConcurrentRequests)
        // Wakes this task when the consumer has made room (bufferingNewest(1): a wake is never lost).
        let (credits, creditContinuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        demand?.setOnCredit { creditContinuation.yield() }
        var creditIterator = credits.makeAsyncIterator()
        var iterator = requests.makeIterator()
        await withTaskGroup(of: BatchResult.self) { group in
            var pulled = 0
            var inFlight = 0
            var exhausted = false
            /// Starts requests while there is room; false when none could start for want of demand.
            func fill() -> Bool {
                while !exhausted && inFlight < width && !Task.isCancelled {
                    if let demand, demand.room(pulled: pulled) <= 0 {
                        if demand.arm(target: pulled - demand.limit + 1) { return false }
                        continue
                    }
                    guard let request = iterator.next() else {
                        exhausted = true
                        break
                    }
                    let index = pulled
                    pulled += 1
                    inFlight += 1
                    group.addTask { await self.batchResult(request, index: index, options: options) }
                }
                return true
            }
            while true {
                let started = fill()
                if inFlight == 0 {
                    if exhausted || Task.isCancelled || started { break }
                    // Nothing running and no room: wait for the consumer (nil: cancelled).
                    if await creditIterator.next() == nil { break }
                    continue
                }
                guard let result = await group.next() else { break }
                inFlight -= 1
                output.send([result])
            }
        }
        creditContinuation.finish()
        output.finish()
    }
}

/// A batch over tasks, in the session's registry from the moment it is made
/// until its last request has completed: invalidation waits for it, and
/// ``SessionManager/invalidateAndCancel()`` cancels it.
private final class BatchAdmission: FastCancellable {
    private let state = Protected<(task: Task<Void, Never>?, cancelled: Bool)>((nil, false))

    /// The Swift task running the batch; cancelled at once if the batch was.
    func attach(_ task: Task<Void, Never>) {
        let cancelled = state.withLock { state -> Bool in
            state.task = task
            return state.cancelled
        }
        if cancelled { task.cancel() }
    }

    func cancel() {
        let task = state.withLock { state -> Task<Void, Never>? in
            state.cancelled = true
            return state.task
        }
        task?.cancel()
    }
}
