import Foundation
import Synchronization

/// One finished request of a batch (see ``SessionManager/results(for:options:)``).
public struct BatchResult: Sendable {
    /// The position of the request in the array given to the batch.
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
    public var maxConcurrentRequests: Int
    /// Count each body and keep none of it (the `Data` is empty).
    public var discardsBodies: Bool
    /// Fill ``BatchResult/metrics``.
    public var collectsMetrics: Bool

    /// Options for a batch; the defaults keep bodies and skip metrics.
    public init(maxConcurrentRequests: Int = 64, discardsBodies: Bool = false, collectsMetrics: Bool = false) {
        self.maxConcurrentRequests = maxConcurrentRequests
        self.discardsBodies = discardsBodies
        self.collectsMetrics = collectsMetrics
    }
}

/// The results of a batch as they finish, in finishing order. Ending the
/// iteration early (or cancelling the Swift task that iterates) cancels the
/// requests still running.
public struct BatchResults: AsyncSequence, Sendable {
    public typealias Element = BatchResult
    public typealias Failure = Never

    let chunks: AsyncStream<[BatchResult]>

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: chunks.makeAsyncIterator())
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<[BatchResult]>.AsyncIterator
        var buffer: [BatchResult] = []
        var position = 0

        public mutating func next() async -> BatchResult? {
            while position == buffer.count {
                // One chunk per loop pass: the results of every request that
                // finished in it.
                guard let chunk = await base.next() else { return nil }
                buffer = chunk
                position = 0
            }
            defer { position += 1 }
            return buffer[position]
        }
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
    /// The requests start at once, whether or not the sequence is iterated;
    /// dropping the sequence or cancelling the iterating task cancels the
    /// ones still running.
    public func results(for requests: [Request], options: BatchOptions = BatchOptions()) -> BatchResults {
        let (stream, continuation) = AsyncStream.makeStream(of: [BatchResult].self)
        if requests.isEmpty {
            continuation.finish()
            return BatchResults(chunks: stream)
        }
        if requests.allSatisfy({ takesFastPath($0) }) {
            let run = BatchRun(session: self, requests: requests, options: options, output: continuation)
            continuation.onTermination = { termination in
                if case .cancelled = termination { run.cancel() }
            }
            run.start()
        } else {
            let task = Task { await self.runBatchAsTasks(requests, options: options, output: continuation) }
            continuation.onTermination = { termination in
                if case .cancelled = termination { task.cancel() }
            }
        }
        return BatchResults(chunks: stream)
    }

    /// The batch over tasks, for sessions whose hooks, delegate or
    /// notification observers must see every request.
    private func runBatchAsTasks(_ requests: [Request], options: BatchOptions,
                                 output: AsyncStream<[BatchResult]>.Continuation) async
    {
        let width = max(1, min(options.maxConcurrentRequests, requests.count))
        await withTaskGroup(of: BatchResult.self) { group in
            var next = 0
            func add() {
                let index = next
                let request = requests[index]
                next += 1
                group.addTask {
                    do throws(TransferError) {
                        if options.discardsBodies {
                            let (bytes, response) = try await self.discard(for: request)
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
            }
            while next < width { add() }
            for await result in group {
                output.yield([result])
                if next < requests.count && !Task.isCancelled { add() }
            }
        }
        output.finish()
    }
}

/// A batch on the fast path: its requests go to the engine a window at a
/// time (``BatchOptions/maxConcurrentRequests``), each window in one engine
/// command; finishes come back once per loop pass, which hands their results
/// over in one chunk and submits the next window. A request's engine target
/// is made when its window goes out and freed when its result is handed over.
final class BatchRun: FastCancellable, @unchecked Sendable {
    // @unchecked Sendable: `next`, `inFlight`, `delivered`, `pending` and
    // `finished` belong to the thread that calls start() until its first
    // successful submit, and to the loop thread after it (the engine's queue
    // lock orders the two); `inEngine` is behind its lock, `cancelled` atomic;
    // the rest is immutable.
    let session: SessionManager
    let options: BatchOptions
    private let requests: [Request]
    private let output: AsyncStream<[BatchResult]>.Continuation
    /// The requests in the engine, by index, for cancel(): one lock per window.
    private let inEngine = Protected<[Int: FastRequest]>([:])
    private let cancelled = Atomic<Bool>(false)
    private var next = 0
    private var inFlight = 0
    private var delivered = 0
    private var pending: [BatchResult] = []
    /// Indices finished since `inEngine` was last updated.
    private var finished: [Int] = []

    init(session: SessionManager, requests: [Request], options: BatchOptions,
         output: AsyncStream<[BatchResult]>.Continuation)
    {
        self.session = session
        self.options = options
        self.requests = requests
        self.output = output
    }

    /// Caller's thread: the first window.
    func start() {
        guard session.engine.pass.registry.admit(self) else {
            for index in requests.indices {
                record(index, .failure(SessionManager.invalidatedError(url: requests[index].url)))
            }
            flush()
            return
        }
        if !advance() { flush() }
    }

    /// Cancels the requests in the engine; those not started finish as cancelled.
    func cancel() {
        cancelled.store(true, ordering: .sequentiallyConsistent)
        for request in inEngine.withLock({ Array($0.values) }) { request.cancel() }
    }

    /// Loop thread, at the end of the pass `request` finished in.
    func didFinish(_ request: FastRequest) {
        inFlight -= 1
        finished.append(request.index)
        if let outcome = request.takeOutcome() { pending.append(outcome) }
        delivered += 1
    }

    private func record(_ index: Int, _ result: Result<(Data, HTTPResponse), TransferError>) {
        pending.append(BatchResult(index: index, result: result, metrics: nil, bytesReceived: 0))
        delivered += 1
    }

    /// Loop thread, at the end of a pass in which some of this batch finished.
    func passDidEnd() {
        if !advance() && !finished.isEmpty {
            let done = finished
            finished.removeAll(keepingCapacity: true)
            inEngine.withLock { map in for index in done { map.removeValue(forKey: index) } }
        }
        flush()
    }

    /// Submits the next window (in one engine command); true when something
    /// went to the engine, after which the state belongs to the loop thread.
    private func advance() -> Bool {
        let limit = max(1, options.maxConcurrentRequests)
        while next < requests.count && inFlight < limit {
            let window = next..<min(requests.count, next + limit - inFlight)
            next = window.upperBound
            if cancelled.load(ordering: .sequentiallyConsistent) {
                for index in window { record(index, .failure(TransferError(.cancelled, "cancelled", url: requests[index].url))) }
                continue
            }
            let strings = CStrings()
            defer { strings.free() }
            var specs: [TransferSpec] = []
            var targets: [FastRequest] = []
            specs.reserveCapacity(window.count)
            targets.reserveCapacity(window.count)
            for index in window {
                do throws(TransferError) {
                    specs.append(try session.fastSpec(for: requests[index], strings: strings,
                                                      discardsBody: options.discardsBodies))
                    targets.append(FastRequest(session: session, request: requests[index], run: self, index: index))
                } catch {
                    record(index, .failure(error))
                }
            }
            if targets.isEmpty { continue }
            // Listed before they are submitted, so that a cancel() from now on
            // reaches them; one that came before is seen just after.
            let done = finished
            finished.removeAll(keepingCapacity: true)
            inEngine.withLock { map in
                for index in done { map.removeValue(forKey: index) }
                for request in targets { map[request.index] = request }
            }
            if cancelled.load(ordering: .sequentiallyConsistent) {
                for request in targets { request.cancel() }
            }
            inFlight += targets.count
            switch session.engine.submitBatch(specs, targets: targets) {
            case .failure(let error):
                inFlight -= targets.count
                inEngine.withLock { map in for request in targets { map.removeValue(forKey: request.index) } }
                for request in targets {
                    var error = error
                    error.url = request.request.url
                    record(request.index, .failure(error))
                }
            case .success(let ids):
                for (request, id) in zip(targets, ids) { request.didSubmit(id: id) }
                return true
            }
        }
        return false
    }

    /// Hands this pass's results over, and ends the sequence after the last.
    private func flush() {
        if !pending.isEmpty {
            output.yield(pending)
            pending.removeAll(keepingCapacity: true)
        }
        if delivered == requests.count {
            output.finish()
            inEngine.withLock { $0.removeAll() }
            session.engine.pass.registry.remove(self)
        }
    }
}
