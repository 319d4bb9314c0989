import CTransfer

/// The engine target of one hop of a task: every C callback of the
/// transfer lands here (through ``EngineTarget``'s methods, the one type a C
/// context is cast to) and goes on to the task that owns the transfer now.
///
/// The task that submitted the hop is the first owner. When a data task
/// becomes a download the route is handed over to the new ``DownloadTask``
/// before the engine is told to continue, so response, progress and finish
/// reach the task that owns the transfer, with no side table to consult (as
/// AFNetworking moves its task delegate in `didBecomeDownloadTask`).
///
/// Held by the engine (for as long as the transfer can call back) and
/// weakly by the task: no cycle outlives the transfer.
final class EngineRoute: EngineTarget, @unchecked Sendable {
    // @unchecked Sendable: its one stored property is behind a lock.
    private let current: Protected<TransferTask>

    init(_ owner: TransferTask) {
        current = Protected(owner)
    }

    /// The task the next event goes to.
    var owner: TransferTask { current.withLock { $0 } }

    /// Sends every later event of this transfer to `successor`.
    func handOver(to successor: TransferTask) {
        current.withLock { $0 = successor }
    }

    override func engineDidReceiveResponse(_ head: EngineResponseHead) {
        owner.engineDidReceiveResponse(head.response(requestURL: owner.originalRequest.url))
    }

    override func engineDidProgress(_ progress: ProgressSnapshot) {
        owner.engineDidProgress(progress)
    }

    override func engineDidReceiveData(_ chunk: UnsafeRawBufferPointer) -> Bool {
        owner.engineDidReceiveData(Data(chunk))
    }

    override func engineDidFinish(_ result: EngineResult) {
        owner.engineDidFinish(result.outcome)
    }

    override func engineRead(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        owner.engineRead(into: buffer)
    }

    override func engineRewind() -> Bool {
        owner.engineRewind()
    }

    override func engineDidTrace(_ kind: TraceLineKind, line: UnsafeRawBufferPointer) {
        let task = owner
        task.session.observation.trace(task, kind: kind, line: String(decoding: line, as: UTF8.self))
    }

    override func engineWillFollowRedirect(status: Int, from: UnsafePointer<CChar>, to location: UnsafePointer<CChar>) {
        let task = owner
        let observation = task.session.observation
        if !task.requestObservers.isEmpty {
            task.requestObservers.redirect(from: String(cString: from), to: String(cString: location),
                                           statusCode: status)
        }
        guard observation.isActive(for: task) else { return }
        observation.task(task, willFollowRedirectFrom: String(cString: from), to: String(cString: location),
                         statusCode: status)
    }
}

/// The engine's byte counters of one transfer (written by the loop thread
/// with atomics, read anywhere through ct_counters_*). A class so that a
/// download task taking a data task's transfer over reads the same block
/// the engine writes.
final class CounterBlock: @unchecked Sendable {
    // @unchecked Sendable: the pointer never changes; the block's fields are
    // atomics (ct_counters.h) and it is freed once, in deinit, after every
    // task and spec that borrowed it is gone.
    let pointer: UnsafeMutablePointer<ct_counters>

    private init(pointer: UnsafeMutablePointer<ct_counters>) {
        self.pointer = pointer
    }

    /// A zeroed block.
    convenience init() {
        guard let block = Self.allocate() else {
            // A 64-byte allocation failing means the process is out of memory.
            fatalError("Transfer: cannot allocate 64 bytes of counters (out of memory)")
        }
        self.init(pointer: block)
    }

    /// A zeroed block, or nil out of memory (for callers that fail a task instead).
    static func make() -> CounterBlock? {
        allocate().map { CounterBlock(pointer: $0) }
    }

    private static func allocate() -> UnsafeMutablePointer<ct_counters>? {
        var block: UnsafeMutablePointer<ct_counters>?
        guard ct_counters_create(&block) == CT_OK else { return nil }
        return block
    }

    deinit {
        ct_counters_destroy(pointer)
    }

    /// Body bytes sent so far.
    var sent: Int64 { ct_counters_sent(pointer) }
    /// Body bytes to send, or -1 when unknown.
    var expectedToSend: Int64 { ct_counters_expected_to_send(pointer) }
    /// Body bytes received so far, including a resumed offset.
    var received: Int64 { ct_counters_received(pointer) }
    /// Body bytes expected, or -1 until the headers say.
    var expectedToReceive: Int64 { ct_counters_expected_to_receive(pointer) }
}
