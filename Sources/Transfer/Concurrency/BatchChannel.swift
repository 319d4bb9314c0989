/// Carries a batch's results to the task that iterates them: one chunk per
/// loop pass (or per request run as a task), in order, with no bound (the
/// producer bounds itself: ``BatchDemand``).
///
/// What `AsyncStream<[BatchResult]>` did for batches, for one element type
/// and one consumer. The standard library's stream runs unspecialized code:
/// each chunk looked up generic metadata about ten times and went through a
/// generic deque, about as many instructions as the request itself costs in
/// Swift when the batch runs one request at a time.
///
/// The same termination: the producer's ``finish()`` ends the sequence
/// after the chunks already sent; ``cancel()`` (the iterating task was
/// cancelled, or the consumer's last reference went away: ``Receiver``) runs
/// the cancellation handler once and then finishes. A chunk sent after
/// either is dropped.
final class BatchChannel: Sendable {
    private struct State {
        /// Chunks sent and not yet taken, oldest at `head`.
        var chunks: [[BatchResult]] = []
        var head = 0
        /// The consumer, suspended until a chunk or the end comes.
        var waiter: UnsafeContinuation<[BatchResult]?, Never>?
        var finished = false
        /// Run once on cancel; dropped at the end (it holds the producer).
        var onCancel: (@Sendable () -> Void)?

        mutating func popChunk() -> [BatchResult]? {
            guard head < chunks.count else { return nil }
            let chunk = chunks[head]
            chunks[head] = []
            head += 1
            if head == chunks.count {
                chunks.removeAll(keepingCapacity: true)
                head = 0
            }
            return chunk
        }
    }

    private let state = Protected(State())

    /// A channel that has already ended (a batch of no requests).
    static func finished() -> BatchChannel {
        let channel = BatchChannel()
        channel.finish()
        return channel
    }

    /// What runs if the consumer goes away before the end: set once, by the
    /// batch that produces, before it hands the sequence out.
    func onCancel(_ handler: @escaping @Sendable () -> Void) {
        state.withLock { state in
            if !state.finished { state.onCancel = handler }
        }
    }

    /// Producer: hands a chunk over (dropped once the channel has ended).
    /// Consumed: the consumer gets the array's only reference, and can
    /// change it in place.
    func send(_ chunk: consuming [BatchResult]) {
        // Moved, never copied: into the queue or to the waiting consumer.
        var held: [BatchResult]? = consume chunk
        let waiter = state.withLock { state -> UnsafeContinuation<[BatchResult]?, Never>? in
            if state.finished { return nil }
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.chunks.append(held.take()!)
            return nil
        }
        if let waiter, let chunk = held.take() { waiter.resume(returning: chunk) }
    }

    /// Producer: no chunk comes after those sent.
    func finish() {
        let waiter = state.withLock { state -> UnsafeContinuation<[BatchResult]?, Never>? in
            state.finished = true
            state.onCancel = nil
            let waiter = state.waiter
            state.waiter = nil
            return waiter
        }
        waiter?.resume(returning: nil)
    }

    /// Consumer side: the batch is no longer wanted.
    func cancel() {
        let handler = state.withLock { state -> (@Sendable () -> Void)? in
            let handler = state.onCancel
            state.onCancel = nil
            return state.finished ? nil : handler
        }
        handler?()
        finish()
    }

    /// Consumer: the next chunk, or nil at the end. Cancelling the calling
    /// task cancels the channel (chunks already sent are still handed out,
    /// as `AsyncStream` hands out its buffer). One task at a time.
    func next() async -> [BatchResult]? {
        // Without suspending when a chunk is there (several loop passes
        // may have ended while the consumer was busy).
        if Task.isCancelled { cancel() }
        if let ready = state.withLock({ $0.popChunk() }) { return ready }
        return await withTaskCancellationHandler {
            await withUnsafeContinuation { (continuation: UnsafeContinuation<[BatchResult]?, Never>) in
                let now = state.withLock { state -> [BatchResult]?? in
                    if let chunk = state.popChunk() { return .some(chunk) }
                    if state.finished { return .some(nil) }
                    precondition(state.waiter == nil, "BatchResults iterated by two tasks at once")
                    state.waiter = continuation
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            cancel()
        }
    }

    /// The consumer's hold on the channel: the sequence and each of its
    /// iterators keep one. When the last goes away before the end, the
    /// batch is cancelled, as dropping an `AsyncStream` cancels it.
    final class Receiver: Sendable {
        let channel: BatchChannel
        init(_ channel: BatchChannel) { self.channel = channel }
        deinit { channel.cancel() }
    }
}
