import Dispatch
import FoundationEssentials
import Glibc
import Synchronization

/// A task whose response body is collected in memory (in C, handed to Swift
/// once at completion), or streamed in chunks when the session's
/// `dataTaskDidReceiveData` hook (or a delegate with
/// ``SessionDelegate/wantsDataChunks``) is set, or when it feeds a
/// ``ResponseBodyStream`` (``SessionManager/stream(for:bufferSize:)``).
///
/// A streamed body is not also kept: the completion handler then gets empty
/// `Data()`, unless ``SessionConfiguration/accumulatesStreamedBody`` is set.
public class DataTask: TransferTask, @unchecked Sendable {
    // @unchecked Sendable: as TransferTask; `chunks` is guarded by its Protected lock.
    /// Called once with the response, the body and nil, or with the error;
    /// runs on the session's ``SessionManager/completionQueue``.
    ///
    /// When the body was streamed to a hook or delegate the body is empty
    /// `Data()` (see ``SessionConfiguration/accumulatesStreamedBody``).
    public typealias CompletionHandler = @Sendable (HTTPResponse?, Data?, TransferError?) -> Void

    let completionHandler: CompletionHandler?
    private let chunks = Protected<Data?>(nil)
    /// What the task's end delivers besides the raw body, owned here (not in
    /// a session table keyed by task id) and taken out once, at completion:
    /// a user closure that captures the task does not keep it alive after.
    private let ending: Protected<Ending>
    /// Chunks go to a hook, a delegate or a body stream (a streaming sink).
    let streaming: Bool
    /// Streamed chunks are also kept for the completion (opt-in, bounded).
    private let accumulates: Bool
    /// The consumer of ``SessionManager/stream(for:bufferSize:)``; nil for other tasks.
    let bodyBuffer: ResponseBodyBuffer?
    /// Chunk bytes posted to the hook or delegate and not yet delivered (a slow
    /// hook pauses the transfer instead of queueing the body in memory), by the
    /// same water marks as a ``ResponseBodyStream``.
    let hookBacklog = Protected(Backpressure(highWaterMark: hookBacklogLimit))
    /// The most chunk bytes that wait for the hook before the transfer pauses;
    /// it continues at half.
    static let hookBacklogLimit = SessionManager.defaultStreamBufferSize
    /// Count the body, store nothing (benchmarks, `transfer --discard`).
    let discardsBody: Bool

    /// Receives what the response serializer made of the task's result,
    /// with the task (the public handlers adapt to it).
    typealias SerializedDelivery = @Sendable (DataTask, Result<(any Sendable)?, TransferError>) -> Void

    /// The task's own completion state besides its body.
    struct Ending {
        /// Checks the result must pass (``validate(_:)``), in order.
        var validations: [ResponseValidation.Validator] = []
        /// Made at completion, in place of the session's ``SessionManager/responseSerializer``.
        var serializer: (@Sendable () -> any ResponseSerializer)?
        /// Gets the serialized value or error, on the completion queue.
        var serialized: SerializedDelivery?
    }

    init(session: SessionManager, identifier: Int, request: Request, delegate: TaskDelegate,
         discardsBody: Bool = false, bodyBuffer: ResponseBodyBuffer? = nil,
         completionHandler: CompletionHandler?, ending: Ending = Ending())
    {
        self.completionHandler = completionHandler
        self.ending = Protected(ending)
        self.discardsBody = discardsBody
        self.bodyBuffer = bodyBuffer
        let observers = session.observers
        if bodyBuffer != nil {
            // The stream is the only consumer: hooks get no chunks, nothing is kept.
            self.streaming = true
            self.accumulates = false
        } else {
            self.streaming = observers.hooks.dataTaskDidReceiveData != nil || observers.delegate?.wantsDataChunks == true
            self.accumulates = streaming && session.configuration.accumulatesStreamedBody
        }
        super.init(session: session, identifier: identifier, request: request, delegate: delegate)
    }

    override func configure(_ spec: inout TransferSpec, strings: CStrings) throws(TransferError) {
        spec.sink = discardsBody ? .discard : streaming ? .stream : .memory
        // What is kept in memory is bounded; a body only streamed through is not.
        if spec.sink == .memory || accumulates {
            spec.maxBodySize = max(0, session.configuration.maximumResponseBodySize)
        }
        // Its reader paces it: over HTTP/1.1, where a pause stops reading the socket.
        if bodyBuffer != nil { spec.flags.insert(.consumerPaced) }
    }

    override func wantsDisposition() -> Bool {
        let (hooks, delegate) = session.observers
        return hooks.dataTaskDidReceiveResponse != nil || delegate != nil
    }

    override func needsResponseEvent() -> Bool { wantsDisposition() }

    override func engineDidReceiveResponse(_ response: HTTPResponse) {
        super.engineDidReceiveResponse(response)
        // Loop thread: the head (recorded by super first) goes straight to
        // the stream's buffer.
        if let buffer = bodyBuffer { buffer.didReceive(response) }
    }

    override func engineDidReceiveData(_ data: Data) -> Bool {
        // A stream's chunks go straight to its buffer; a full buffer holds
        // the transfer in the engine.
        if let buffer = bodyBuffer { return buffer.append(data) }
        guard streaming else { return false }
        if accumulates {
            // Append in place: rebuilding the body per chunk copied it all each time.
            chunks.withLock { body in
                if body == nil { body = Data() }
                body!.append(data)
            }
        }
        // Held here (loop thread) when too much waits for the hook; the
        // delivery that drains it lets the engine go on. The engine sets
        // its reason before this callback's caller returns, and the
        // wake-up is a command it runs after that: never lost.
        let hold = hookBacklog.withLock { $0.add(data.count) }
        session.mailbox.post { [self] in
            let (hooks, delegate) = session.observers
            hooks.dataTaskDidReceiveData?(session, self, data)
            if delegate?.wantsDataChunks == true { delegate?.session(session, dataTask: self, didReceive: data) }
            if hookBacklog.withLock({ $0.remove(data.count) }) { consumerDidDrain() }
        }
        return hold
    }

    override func didReceiveResponse(_ response: HTTPResponse) {
        let (hooks, delegate) = session.observers
        let disposition: ResponseDisposition
        if let hook = hooks.dataTaskDidReceiveResponse {
            disposition = hook(session, self, response)
        } else if let delegate {
            disposition = delegate.session(session, dataTask: self, didReceive: response)
        } else {
            disposition = .allow
        }
        switch disposition {
        case .allow:
            // No id: cancelled meanwhile (the engine is already told), or
            // still submitting (sent when the id is known).
            if let id = core.withLock({ $0.life.allowResponse() }) { session.transfers.setDisposition(id, .allow) }
        case .cancel:
            cancel()
        case .becomeDownload:
            becomeDownload(response: response)
        }
    }

    /// The same transfer continues as a download task: its body goes to a
    /// temporary file. The engine's events, this task's delegate (progress
    /// closures and `Progress` objects) and the transfer's counters move to
    /// the new task; this task's completion runs once, when the download
    /// ends, with ``TransferError/Code/becameDownload`` (see
    /// ``SessionManager/data(for:)``).
    private func becomeDownload(response: HTTPResponse) {
        // No id: cancelled meanwhile, or still submitting (then kept, and
        // acted on when the id is known: deferredBecomeDownload).
        let engineID = core.withLock { core -> UInt64? in
            let id = core.life.becomeDownloadRequested()
            if id == nil { core.responseToBecomeDownload = response }
            return id
        }
        guard let engineID else { return }
        becomeDownload(response: response, engineID: engineID)
    }

    override func deferredBecomeDownload(engineID: UInt64) {
        let kept = core.withLock { core -> HTTPResponse? in
            defer { core.responseToBecomeDownload = nil }
            return core.responseToBecomeDownload
        }
        // On the submitting thread: the hand-over (and the hooks it calls)
        // runs on the delegate queue, as when the id was known.
        guard let kept else { return }
        session.delegateQueue.async { [self] in becomeDownload(response: kept, engineID: engineID) }
    }

    private func becomeDownload(response: HTTPResponse, engineID: UInt64) {
        let download = session.makeAdoptedDownloadTask(from: self, response: response, engineID: engineID)
        let (action, route) = core.withLock { core in (core.life.becomeDownload(download), core.route) }
        guard case .become(_, let suspended) = action, let route else {
            // Cancelled while the hook decided: the cancel already reached the
            // engine, and this task completes as cancelled. The successor never ran.
            return
        }
        // Suspended by the user meanwhile: the transfer is paused in the
        // engine, and the download says so (it is not visible to anyone yet).
        if suspended {
            download.adoptedTransferIsPaused()
        }
        // Every later event of the transfer goes to the download task, before
        // the engine is told to continue.
        route.handOver(to: download)
        session.adopt(download, from: self)
        let (hooks, delegate) = session.observers
        hooks.dataTaskDidBecomeDownloadTask?(session, self, download)
        delegate?.session(session, dataTask: self, didBecome: download)
        download.stateDidChange(suspended ? .suspended : .running)
        // The session's private folder is made (or checked: ours, 0700, no
        // symlink) before a byte goes there; a folder we cannot trust makes
        // the transfer stop instead.
        do throws(TransferError) {
            try TemporaryFolder.prepare(session.temporaryDirectory.path)
        } catch {
            session.transfers.setDisposition(engineID, .cancel)
            return
        }
        session.transfers.setDisposition(engineID, .becomeFile(path: download.temporaryPath))
    }

    /// On the delegate queue, after the download task that took the transfer
    /// over completed: this task completes too, once, with
    /// ``TransferError/Code/becameDownload`` (or the download's own error),
    /// carrying the download task and its file.
    func successorDidComplete(_ download: DownloadTask, error: TransferError?) {
        var result = error ?? TransferError(.becameDownload,
                                            "the response body was downloaded to a file (see downloadTask and fileURL)",
                                            url: originalRequest.url)
        result.downloadTask = download
        result.fileURL = download.fileURL
        complete(error: result, outcome: nil)
    }

    /// With a response cache, each hop's request is planned first
    /// (DataTask+Cache.swift): served from the cache, sent as a conditional
    /// request, or sent as it is. Without one, nothing changes. A body that is
    /// not kept (streamed to a hook, a delegate or ``ResponseBodyStream``
    /// without ``SessionConfiguration/accumulatesStreamedBody``) can be
    /// neither stored nor answered from a 304: such tasks bypass the cache.
    override func submit(_ request: Request) {
        guard let cache = session.responseCache, bodyBuffer == nil, !streaming || accumulates else {
            return super.submit(request)
        }
        submitConsultingCache(cache, request: request) { super.submit($0) }
    }

    override func complete(with outcome: Outcome) {
        let error = outcome.error(url: originalRequest.url)
        var body: Data?
        if !streaming {
            body = outcome.body
        } else if accumulates {
            body = chunks.withLock { $0 } ?? Data()
        } else {
            // Streamed through and not kept: nothing to cache either.
            body = Data()
        }
        var outcome = outcome
        if error == nil, !streaming || accumulates, let cache = session.responseCache {
            body = settleWithCache(cache, body: body, outcome: &outcome)
        }
        resultData = body
        complete(error: error, outcome: outcome)
    }

    override func complete(error: TransferError?, outcome: Outcome?) {
        // Every end (engine finish, local finish, cancel, become-download)
        // passes here: the stream's consumer learns it after its last chunk.
        bodyBuffer?.finish(error: error)
        super.complete(error: error ?? validationFailure(), outcome: outcome)
    }

    /// Adds a check the result must pass; no effect once the task completed
    /// (the validations ran, and were let go, then).
    func addValidation(_ validation: @escaping ResponseValidation.Validator) {
        ending.withLock { $0.validations.append(validation) }
    }

    /// The first failed validation of a transfer that ended without error
    /// (the validations are taken out: they run once).
    private func validationFailure() -> TransferError? {
        let validations = ending.withLock { ending in
            defer { ending.validations = [] }
            return ending.validations
        }
        guard !validations.isEmpty, let response else { return nil }
        let data = resultData
        let request = currentRequest ?? originalRequest
        for validation in validations {
            if case .failure(let failure) = validation(request, response, data) {
                return ResponseValidation.attaching(response: response, data: data, to: failure)
            }
        }
        return nil
    }

    /// Serializes the result off the delegate queue (a concurrent queue of
    /// the session's: many tasks parse at once), then queues the serialized
    /// handler on the completion queue and posts the completion notification
    /// with `userInfo` completed by what the serializer made; the async
    /// waiter, if any, is woken last (it has heard everything then). Once.
    func deliverSerialized(error: TransferError?, userInfo: [String: Any], waiter: (any TaskWaiter)?) {
        let (makeSerializer, handler) = ending.withLock { ending in
            defer {
                ending.serializer = nil
                ending.serialized = nil
            }
            return (ending.serializer, ending.serialized)
        }
        let info = UncheckedUserInfo(value: userInfo)
        session.runSerialization { [self] in
            let serializer = makeSerializer?() ?? session.responseSerializer
            var userInfo = info.value
            userInfo[TransferEventKey.responseSerializer] = serializer
            let result: Result<(any Sendable)?, TransferError>
            if let error {
                result = .failure(ResponseValidation.attaching(response: response, data: resultData, to: error))
            } else {
                do throws(TransferError) {
                    result = .success(try serializer.serializedValue(response: response, data: resultData, error: nil))
                } catch {
                    result = .failure(error)
                    userInfo[TransferEventKey.error] = error
                }
            }
            if case .success(let value?) = result { userInfo[TransferEventKey.serializedResponse] = value }
            if let handler { session.runCompletion { handler(self, result) } }
            // As AF: posted after the completion handlers were queued.
            session.postNotification(.taskDidComplete, task: self, userInfo: userInfo, fromAnyQueue: true)
            waiter?.taskDidComplete(self, error: error)
        }
    }

    /// The head of a body stream is final once its consumer has it: no
    /// Swift-side follow-up (manual redirect, challenge answer, retry) may
    /// start another hop whose bytes would join the same stream.
    override var allowsFollowUps: Bool { bodyBuffer == nil }

    override func discardHopResult() {
        chunks.withLock { $0 = nil }
    }

    /// The body, kept between complete(with:) and the completion call.
    var resultData: Data? {
        get { chunks.withLock { $0 } }
        set { chunks.withLock { $0 = newValue } }
    }

    /// - Parameter hasWaiter: An async caller waits (``SessionManager/data(for:)``):
    ///   a file left by become-download is then the caller's.
    func callCompletion(error: TransferError?, hasWaiter: Bool) {
        // After become-download without a place for the file: it is valid
        // during the completion handler only, as a download's temporary file.
        let temporaryFile = error?.downloadTask?.temporaryFileURL
        guard let completionHandler else {
            if !hasWaiter, let temporaryFile { try? FileManager.default.removeItem(at: temporaryFile) }
            return
        }
        let response = self.response
        let data = resultData
        session.runCompletion {
            completionHandler(response, data, error)
            if let temporaryFile { try? FileManager.default.removeItem(at: temporaryFile) }
        }
    }
}

/// A data task that sends a body: from memory, a file, or a stream.
public final class UploadTask: DataTask, @unchecked Sendable {
    // @unchecked Sendable: as DataTask; `bodyBuffer` is written once before
    // submit and freed once after finish.

    private let body: Request.Body
    private let source = LentUploadBody()

    init(session: SessionManager, identifier: Int, request: Request, body: Request.Body, delegate: TaskDelegate,
         bodyBuffer: ResponseBodyBuffer? = nil, completionHandler: CompletionHandler?, ending: Ending = Ending())
    {
        self.body = body
        super.init(session: session, identifier: identifier, request: request, delegate: delegate,
                   bodyBuffer: bodyBuffer, completionHandler: completionHandler, ending: ending)
    }

    override func configure(_ spec: inout TransferSpec, strings: CStrings) throws(TransferError) {
        try super.configure(&spec, strings: strings)
        switch body {
        case .data(let data):
            // The engine borrows the bytes until finish: keep one copy of our own
            // for every hop (a redirect or 401 hop sends the same bytes again; freed
            // in deinit, which cannot run before the last finish callback).
            spec.setBody(source.body(copying: data))
        case .file(let url, let offset, let length):
            guard url.isFileURL else {
                throw TransferError(.invalidRequest, "upload body is not a file URL: \(url)", url: originalRequest.url)
            }
            guard FileManager.default.isReadableFile(atPath: url.path) else {
                var error = TransferError(.invalidRequest, "cannot read the upload file \(url.path)",
                                          url: originalRequest.url)
                error.systemErrno = ENOENT
                throw error
            }
            spec.setBody(file: url.path, offset: offset, length: length ?? -1, strings: strings)
        case .stream(let provider, let length):
            guard let first = provider.makeSource() else {
                throw TransferError(.invalidRequest, "the body stream provider gave no stream", url: originalRequest.url)
            }
            // Read on a thread of its own, never on the engine thread.
            let pump = BodyStreamPump(reopen: { [weak self] in
                guard let self else { return nil }
                let session = self.session
                // A redirect or retry needs the body again: ask the hook, then the provider.
                if let hook = session.hooks.taskNeedNewBodySource {
                    return session.delegateQueue.sync { hook(session, self) } ?? provider.makeSource()
                }
                return provider.makeSource()
            }, notify: { [weak engine = session.transfers] id in
                engine?.bodyReady(id)
            })
            source.replacePump(with: pump)
            pump.start(first)
            spec.setPulledBody(length: length ?? -1)
        }
    }

    /// A streamed body cannot be sent again by a retry.
    var hasStreamedBody: Bool {
        if case .stream = body { return true }
        return false
    }

    // Both run on the engine thread and never block (see BodyStreamPump).
    override func engineRead(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        source.pump?.read(into: buffer) ?? -1
    }

    override func engineRewind() -> Bool {
        source.pump?.rewind() ?? false
    }

    override func didSubmit(engineID: UInt64) {
        source.pump?.attach(engineID: engineID)
    }

    override func complete(error: TransferError?, outcome: Outcome?) {
        var error = error
        if let pump = source.pump {
            pump.stop()
            // The engine only knows "the body stream failed"; say why.
            if error?.code == .fileError, let reason = pump.failureReason { error?.message = reason }
        }
        super.complete(error: error, outcome: outcome)
    }
}

/// The body an upload task lends the engine: a private copy of in-memory
/// bytes (the engine borrows it until finish) or the pump of a streamed body.
private final class LentUploadBody: Sendable {
    private let state = Protected<(copy: LentBody?, pump: BodyStreamPump?)>((nil, nil))

    /// The task's copy of `data`, made at the first hop and reused by later ones
    /// (each hop used to make a new copy and lose the previous one). Held
    /// until the task goes, which cannot happen before the last finish
    /// callback, after which the engine no longer reads it.
    func body(copying data: Data) -> LentBody {
        state.withLock { state in
            if let copy = state.copy { return copy }
            let made = LentBody(copying: data)
            state.copy = made
            return made
        }
    }

    /// The pump of the current hop; a previous hop's pump is stopped.
    func replacePump(with fresh: BodyStreamPump) {
        let old = state.withLock { state -> BodyStreamPump? in
            defer { state.pump = fresh }
            return state.pump
        }
        old?.stop()
    }

    var pump: BodyStreamPump? { state.withLock { $0.pump } }
}
