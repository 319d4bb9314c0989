import FoundationEssentials

/// The body of one response as an `AsyncSequence` of `Data` chunks, in order,
/// with backpressure (Alamofire's `DataStreamRequest`, AsyncHTTPClient's
/// response body). Made by ``SessionManager/stream(for:bufferSize:)``.
///
/// The engine hands chunks to a bounded buffer; when the consumer falls
/// behind and the buffer reaches its size, the transfer is paused in the
/// engine (its socket is not read, other transfers go on), and it continues
/// once the consumer has drained the buffer to half its size. The body is
/// not kept anywhere else.
///
/// Iteration ends (`nil`) after the last chunk of a complete body, or
/// throws ``TransferError`` after the chunks that did arrive: for example
/// ``TransferError/Code/truncatedResponse``, ``TransferError/Code/timedOut``
/// or ``TransferError/Code/cancelled``.
///
/// Single pass: make one iterator. Dropping the iterator before the end
/// (leaving a `for try await` loop with `break`, `return` or a throw), or
/// dropping the stream without iterating, cancels the transfer, as does
/// cancelling the Swift task that waits in `next()`.
public struct ResponseBodyStream: AsyncSequence, Sendable {
    /// One chunk of the body, as the engine received it (after content decoding).
    public typealias Element = Data
    /// Every failure is a ``TransferError``.
    public typealias Failure = TransferError

    let owner: StreamOwner

    init(owner: StreamOwner) { self.owner = owner }

    /// The iterator of the body's chunks; make only one.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(reader: StreamReader(owner: owner))
    }

    /// The task that carries the transfer (for its counters, metrics and
    /// ``TransferTask/cancel()``).
    public var task: DataTask { owner.task }

    /// Reads the body's chunks; dropping it before the end cancels the transfer.
    public struct AsyncIterator: AsyncIteratorProtocol, Sendable {
        /// One chunk of the body.
        public typealias Element = Data
        /// Every failure is a ``TransferError``.
        public typealias Failure = TransferError

        let reader: StreamReader

        /// The next chunk, waiting for it if none is buffered; `nil` after the
        /// last chunk of a complete body.
        ///
        /// - Throws: ``TransferError`` once the buffered chunks are read, if the
        ///   transfer failed or was cancelled (cancelling the calling Swift task
        ///   cancels the transfer: ``TransferError/Code/cancelled``).
        public mutating func next() async throws(TransferError) -> Data? {
            try await reader.next()
        }
    }
}

/// Keeps the stream's task and buffer; cancels the transfer when the last
/// stream value and iterator are gone before its end.
final class StreamOwner: Sendable {
    let buffer: ResponseBodyBuffer
    let task: DataTask

    init(buffer: ResponseBodyBuffer, task: DataTask) {
        self.buffer = buffer
        self.task = task
    }

    /// Nobody will read on: drop what is buffered and stop the transfer.
    func abandon() {
        guard buffer.abandon() else { return }
        task.cancel()
    }

    deinit { abandon() }
}

/// One iterator's hold on the stream: dropping it before the end cancels.
final class StreamReader: Sendable {
    let owner: StreamOwner

    init(owner: StreamOwner) { self.owner = owner }

    func next() async throws(TransferError) -> Data? {
        let buffer = owner.buffer
        let task = owner.task
        let result: Result<Data?, TransferError> = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<Data?, TransferError>, Never>) in
                let (ready, drained) = buffer.take(orWait: continuation)
                // The engine was held and the buffer is at its low-water mark: let it go on.
                if drained { task.consumerDidDrain() }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            // The finish (cancelled) resumes the waiting continuation.
            task.cancel()
        }
        return try result.get()
    }

    deinit { owner.abandon() }
}

/// The water marks of body chunks that wait for their consumer (a stream's
/// reader or a chunk hook): the one rule for when the engine holds a transfer
/// (`CT_PAUSE_CONSUMER`) and when it may go on. Guarded by its owner's lock.
struct Backpressure: Sendable {
    let highWaterMark: Int
    var lowWaterMark: Int { highWaterMark / 2 }
    /// Bytes waiting for the consumer.
    private(set) var bytes = 0
    /// The engine is asked to hold the transfer.
    private(set) var holding = false
    /// How many times the engine was asked to hold.
    private(set) var holds = 0

    init(highWaterMark: Int) { self.highWaterMark = max(1, highWaterMark) }

    /// `count` more bytes wait. True: the engine must hold the transfer now.
    mutating func add(_ count: Int) -> Bool {
        bytes += count
        guard !holding, bytes >= highWaterMark else { return false }
        holding = true
        holds += 1
        return true
    }

    /// `count` bytes reached the consumer. True: the held transfer may go on
    /// (at the low-water mark, and only when `mayResume`).
    mutating func remove(_ count: Int, mayResume: Bool = true) -> Bool {
        bytes -= count
        guard holding, bytes <= lowWaterMark, mayResume else { return false }
        holding = false
        return true
    }

    /// Nothing waits any more (the consumer is gone).
    mutating func dropAll() { bytes = 0 }
}

/// The bounded buffer between the engine (producer, on the loop thread) and
/// the one consumer of a ``ResponseBodyStream``.
///
/// `append` answers true when the buffer reached its high-water mark: the
/// engine then holds the transfer (`CT_PAUSE_CONSUMER`) until the consumer,
/// having taken chunks down to the low-water mark, calls
/// ``TransferTask/consumerDidDrain()``. `holding` is set on the loop thread
/// before the engine sets its pause reason, and the wake-up is a command the
/// loop runs after that, so it is never lost.
final class ResponseBodyBuffer: Sendable {
    typealias ChunkWaiter = CheckedContinuation<Result<Data?, TransferError>, Never>
    typealias HeadWaiter = CheckedContinuation<Result<HTTPResponse, TransferError>, Never>

    /// What tests and diagnostics can see of the buffer.
    struct Snapshot: Sendable {
        /// Bytes the engine delivered.
        var received: Int64
        /// Bytes handed to the consumer.
        var consumed: Int64
        /// Bytes waiting in the buffer.
        var buffered: Int
        /// The engine is asked to hold the transfer.
        var holding: Bool
        /// How many times the engine was asked to hold.
        var holds: Int
        /// The transfer ended (its outcome is known).
        var finished: Bool
    }

    private struct State {
        var chunks: [Data] = []
        var first = 0
        var pressure: Backpressure
        var received: Int64 = 0
        var consumed: Int64 = 0
        var finished = false
        var abandoned = false
        var error: TransferError?
        var response: HTTPResponse?
        var headWaiter: HeadWaiter?
        var chunkWaiter: ChunkWaiter?
    }

    private let state: Protected<State>
    private let url: URL

    init(highWaterMark: Int, url: URL) {
        state = Protected(State(pressure: Backpressure(highWaterMark: highWaterMark)))
        self.url = url
    }

    var snapshot: Snapshot {
        state.withLock { s in
            Snapshot(received: s.received, consumed: s.consumed, buffered: s.pressure.bytes,
                     holding: s.pressure.holding, holds: s.pressure.holds, finished: s.finished)
        }
    }

    // MARK: Producer side (loop thread, except finish)

    /// The final response head (the first one only).
    func didReceive(_ response: HTTPResponse) {
        let waiter = state.withLock { s -> HeadWaiter? in
            guard s.response == nil else { return nil }
            s.response = response
            defer { s.headWaiter = nil }
            return s.headWaiter
        }
        waiter?.resume(returning: .success(response))
    }

    /// One chunk from the engine. Returns true when the engine must hold the transfer.
    func append(_ data: Data) -> Bool {
        let (waiter, hold) = state.withLock { s -> (ChunkWaiter?, Bool) in
            s.received += Int64(data.count)
            if s.abandoned { return (nil, true) }   // the cancel is on its way; take no more
            if let waiter = s.chunkWaiter {
                // The consumer waits: hand over directly, nothing is buffered.
                s.chunkWaiter = nil
                s.consumed += Int64(data.count)
                return (waiter, false)
            }
            s.chunks.append(data)
            return (nil, s.pressure.add(data.count))
        }
        waiter?.resume(returning: .success(data))
        return hold
    }

    /// The transfer ended: nil error for a complete body. Once; later calls do nothing.
    func finish(error: TransferError?) {
        let (head, chunk, response) = state.withLock { s -> (HeadWaiter?, ChunkWaiter?, HTTPResponse?) in
            guard !s.finished else { return (nil, nil, nil) }
            s.finished = true
            s.error = error
            defer {
                s.headWaiter = nil
                s.chunkWaiter = nil
            }
            return (s.headWaiter, s.chunkWaiter, s.response)
        }
        if let head {
            if let error {
                head.resume(returning: .failure(error))
            } else if let response {
                head.resume(returning: .success(response))
            } else {
                head.resume(returning: .failure(TransferError(.badResponse, "no response", url: url)))
            }
        }
        // A waiting consumer means an empty buffer: this is the end.
        chunk?.resume(returning: error.map { .failure($0) } ?? .success(nil))
    }

    // MARK: Consumer side

    /// Resumes `waiter` with the head once it arrives (at once if it has),
    /// or with the error if the transfer ends first.
    func waitForHead(_ waiter: HeadWaiter) {
        let ready = state.withLock { s -> Result<HTTPResponse, TransferError>? in
            if let response = s.response { return .success(response) }
            if s.finished {
                return .failure(s.error ?? TransferError(.badResponse, "no response", url: url))
            }
            s.headWaiter = waiter
            return nil
        }
        if let ready { waiter.resume(returning: ready) }
    }

    /// The next chunk, the end, or the error when one is ready (then the
    /// caller resumes `waiter` with it); otherwise `waiter` is kept and resumed
    /// by the producer. `drained`: the engine was held and may go on now.
    func take(orWait waiter: ChunkWaiter) -> (ready: Result<Data?, TransferError>?, drained: Bool) {
        state.withLock { s in
            if s.first < s.chunks.count {
                let chunk = s.chunks[s.first]
                s.chunks[s.first] = Data()
                s.first += 1
                if s.first == s.chunks.count {
                    s.chunks.removeAll(keepingCapacity: true)
                    s.first = 0
                } else if s.first >= 256 {
                    s.chunks.removeFirst(s.first)
                    s.first = 0
                }
                s.consumed += Int64(chunk.count)
                return (.success(chunk), s.pressure.remove(chunk.count, mayResume: !s.finished))
            }
            if s.finished || s.abandoned {
                let error = s.error ?? (s.abandoned && !s.finished
                    ? TransferError(.cancelled, "the response body stream was abandoned", url: url) : nil)
                return (error.map { .failure($0) } ?? .success(nil), false)
            }
            s.chunkWaiter = waiter
            return (nil, false)
        }
    }

    /// The consumer is gone: drops what is buffered. Returns true when the
    /// transfer was still running (the caller cancels it).
    func abandon() -> Bool {
        state.withLock { s in
            guard !s.finished, !s.abandoned else { return false }
            s.abandoned = true
            s.chunks.removeAll()
            s.first = 0
            s.pressure.dropAll()
            return true
        }
    }
}
