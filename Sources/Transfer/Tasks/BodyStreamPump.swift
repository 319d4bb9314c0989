import Dispatch

/// Reads a streamed upload body (a ``BodySource``) on a thread of its own into a
/// bounded buffer that the engine drains, so a stream that blocks (a pipe, a
/// socket, a slow producer) never blocks the engine thread and the other
/// transfers of the session.
///
/// - ``read(into:)`` runs on the engine thread: it takes what is buffered, or
///   answers ``EngineTarget/readPaused`` when nothing is, and the reader thread calls
///   `notify` (which queues ``Engine/bodyReady(_:)``) once bytes, the end or an
///   error arrive.
/// - ``rewind()`` runs on the engine thread too (a redirect or an auth retry
///   needs the body again): it drops the buffer and answers at once; a new
///   reader thread asks `reopen` for a fresh source (the
///   `taskNeedNewBodySource` hook, on the delegate queue) and fills the buffer.
/// - ``stop()`` ends the reader after its current read returns. A read that
///   blocks forever keeps its thread until the source is ended by its owner.
///
/// @unchecked Sendable: every stored property below `condition` is guarded by it.
final class BodyStreamPump: @unchecked Sendable {
    /// The most bytes buffered ahead of the engine.
    static let capacity = 256 << 10
    /// One read from the stream.
    static let chunkSize = 64 << 10

    private let condition = ConditionLock()
    private var bytes: [UInt8] = []
    private var head = 0
    private var ended = false
    private var failure: String?
    private var waiting = false
    private var generation = 0
    private var stopped = false
    private var engineID: UInt64 = 0
    private var notifyPending = false

    private let reopen: @Sendable () -> (any BodySource)?
    private let notify: @Sendable (UInt64) -> Void

    /// - Parameters:
    ///   - reopen: a fresh source after a rewind (nil: the body cannot be sent again).
    ///     Runs on the reader thread.
    ///   - notify: tells the engine the transfer with this id has something to read.
    init(reopen: @escaping @Sendable () -> (any BodySource)?, notify: @escaping @Sendable (UInt64) -> Void) {
        self.reopen = reopen
        self.notify = notify
    }

    /// Starts reading `source` (not yet read) on a new thread.
    func start(_ source: any BodySource) {
        let first = SourceHandOver(source)
        startReader(generation: condition.withLock { generation }) { first.source }
    }

    /// The engine id, known once the transfer was submitted. A wake-up asked
    /// for before it was known is delivered now.
    func attach(engineID id: UInt64) {
        let wake: Bool = condition.withLock {
            engineID = id
            defer { notifyPending = false }
            return notifyPending
        }
        if wake { notify(id) }
    }

    /// Why the stream failed, if it did.
    var failureReason: String? { condition.withLock { failure } }

    /// Engine thread: copies buffered bytes into `target`. Returns the count,
    /// 0 at the end of the stream, -1 after an error, or ``EngineTarget/readPaused``.
    func read(into target: UnsafeMutableRawBufferPointer) -> Int {
        condition.lock()
        defer { condition.unlock() }
        if stopped { return -1 }
        let available = bytes.count - head
        if available > 0 {
            guard let base = target.baseAddress, !target.isEmpty else { return 0 }
            let count = min(available, target.count)
            bytes.withUnsafeBytes { source in
                base.copyMemory(from: source.baseAddress! + head, byteCount: count)
            }
            head += count
            if head == bytes.count {
                bytes.removeAll(keepingCapacity: true)
                head = 0
            }
            condition.broadcast()
            return count
        }
        if failure != nil { return -1 }
        if ended { return 0 }
        waiting = true
        return EngineTarget.readPaused
    }

    /// Engine thread: forgets the current stream and starts over with a fresh
    /// one, read on a new thread. Never blocks.
    func rewind() -> Bool {
        let next: Int? = condition.withLock {
            guard !stopped else { return nil }
            generation += 1
            bytes.removeAll()
            head = 0
            ended = false
            failure = nil
            waiting = false
            condition.broadcast()
            return generation
        }
        guard let next else { return false }
        let reopen = self.reopen
        startReader(generation: next) { reopen() }
        return true
    }

    /// Ends the reader (after its current read returns).
    func stop() {
        condition.withLock {
            stopped = true
            condition.broadcast()
        }
    }

    private func startReader(generation: Int, open: @escaping @Sendable () -> (any BodySource)?) {
        detachThread { [self] in
            pump(generation: generation, open: open)
        }
    }

    /// Reader thread: fills the buffer from the stream until its end, an error,
    /// a rewind (a newer generation) or stop().
    private func pump(generation mine: Int, open: @Sendable () -> (any BodySource)?) {
        guard let source = open() else {
            finish(mine, failure: "no stream to send the body again (taskNeedNewBodyStream gave none)")
            return
        }
        defer { source.close() }
        var chunk = [UInt8](repeating: 0, count: Self.chunkSize)
        while true {
            let live: Bool = condition.withLock {
                while bytes.count - head >= Self.capacity && generation == mine && !stopped {
                    condition.wait()
                }
                return generation == mine && !stopped
            }
            guard live else { return }
            let count: Int
            do {
                count = try chunk.withUnsafeMutableBytes { buffer in try source.read(into: buffer) }
            } catch {
                let reason = (error as? TransferError)?.message ?? String(describing: error)
                finish(mine, failure: "the body stream failed: \(reason)")
                return
            }
            if count > 0 {
                let wake: UInt64? = condition.withLock {
                    guard generation == mine && !stopped else { return nil }
                    if head > 0 {
                        bytes.removeFirst(head)
                        head = 0
                    }
                    bytes.append(contentsOf: chunk[0..<count])
                    return takeWakeUp()
                }
                if let wake { notify(wake) }
                continue
            }
            finish(mine, failure: count < 0 ? "the body stream failed: read error" : nil)
            return
        }
    }

    /// Records the end (or a failure) of generation `mine` and wakes the engine.
    private func finish(_ mine: Int, failure reason: String?) {
        let wake: UInt64? = condition.withLock {
            guard generation == mine && !stopped else { return nil }
            if let reason { failure = reason } else { ended = true }
            return takeWakeUp()
        }
        if let wake { notify(wake) }
    }

    /// Under the lock: the id to wake if the engine is waiting (or remember it).
    private func takeWakeUp() -> UInt64? {
        guard waiting else { return nil }
        waiting = false
        guard engineID != 0 else {
            notifyPending = true
            return nil
        }
        return engineID
    }
}

/// Moves a not-yet-read source to the reader thread that alone uses it.
/// @unchecked Sendable: handed over once, never used by the sender again.
private final class SourceHandOver: @unchecked Sendable {
    let source: any BodySource
    init(_ source: any BodySource) { self.source = source }
}
