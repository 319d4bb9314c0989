import Dispatch
import FoundationEssentials
import Glibc
import Synchronization

/// One file downloaded over several connections with `Range` requests,
/// written with positional writes into one part file sized (sparse) to the length, and
/// observed as one transfer.
///
/// It asks with `HEAD` for the length, `Accept-Ranges` and a validator;
/// without ranges (or a length) it falls back to one plain download. Each
/// connection gets at least ``DownloadOptions/minimumSegmentSize`` bytes (1 MiB
/// by default), so a small file uses fewer connections than asked, or one;
/// ``segmentsUsed`` reports the number. With
/// ``DownloadOptions/resumable`` it survives restarts like a plain download:
/// a manifest `<destination>.part.segments` names the ranges, and each
/// range keeps its own journal `<destination>.part.seg<i>.journal`.
///
/// ```swift
/// let download = session.segmentedDownload(with: request, to: file, segments: 4)
/// download.observeProgress(.download, on: .main) { print($0.fractionCompleted) }
/// let url = try await download.value
/// ```
///
/// It is a task of its session: it is in ``SessionManager/tasks`` until it
/// completes, and ``TransferTask/suspend()``, ``cancel()`` and
/// ``SessionManager/invalidateAndCancel()`` reach every connection. It
/// posts the task notifications (did resume, suspend, complete); the
/// per-transfer hooks are not called for its ranges.
public final class SegmentedDownload: TransferTask, @unchecked Sendable {
    // @unchecked Sendable: as TransferTask; its own mutable state is in
    // `parts` (a Protected lock), the rest is immutable.
    /// Called once with the response, the file and nil, or with the error;
    /// runs on the session's ``SessionManager/completionQueue``.
    public typealias CompletionHandler = @Sendable (HTTPResponse?, URL?, TransferError?) -> Void

    /// The request of the download.
    public let request: Request
    /// The file the segments are written into.
    public let destination: URL
    /// How many connections were asked for (``segmentsUsed`` says how many ran).
    public let segmentCount: Int
    /// The options the download was made with.
    public let options: DownloadOptions
    private let completionHandler: CompletionHandler?
    private let progressHandler: (@Sendable (TransferProgress) -> Void)?
    private let parts = Protected(Parts())
    /// The session's request instruments, bound on the creating thread: each
    /// wire request (the probe, every range) is a request of its own to them.
    private let instruments: [any RequestInstrument]

    private struct Parts {
        /// Phase and intent: every lifecycle change goes through it.
        var life = SegmentedLifecycle()
        var response: HTTPResponse?
        var error: TransferError?
        var total: Int64 = -1
        var initialBytes: Int64 = 0
        var startTime: Double = 0
        var segments: [Segment] = []
        var single: DownloadTask?
        var headID: UInt64 = 0
        var segmentsUsed = 0
        var progressPending = false
        var nextObserverID = 0
        var progressObservers: [Int: (DispatchQueue, @Sendable (TransferProgress) -> Void)] = [:]
        var stateObservers: [Int: (DispatchQueue, @Sendable (TaskState) -> Void)] = [:]
        var waiters: [@Sendable (Result<URL, TransferError>) -> Void] = []
        var result: Result<URL, TransferError>?

        /// Engine ids of the range transfers that have not ended.
        func runningRangeIDs() -> [UInt64] { segments.filter { !$0.done && $0.engineID != 0 }.map(\.engineID) }
    }

    /// One range and its engine transfer.
    final class Segment: @unchecked Sendable {
        // @unchecked Sendable: `counters` is written by the engine thread with
        // atomics and read with atomic loads (CounterBlock); `engineID` and
        // `done` are only touched under SegmentedDownload.parts's lock.
        let index: Int
        let start: Int64
        let end: Int64
        let resumeOffset: Int64
        let counters: CounterBlock
        var engineID: UInt64 = 0
        var done = false

        init?(index: Int, start: Int64, end: Int64, resumeOffset: Int64) {
            self.index = index
            self.start = start
            self.end = end
            self.resumeOffset = resumeOffset
            guard let block = CounterBlock.make() else { return nil }
            counters = block
        }

        var received: Int64 { max(resumeOffset, counters.received) }
    }

    init(session: SessionManager, request: Request, destination: URL, segments: Int, options: DownloadOptions,
         progress: (@Sendable (TransferProgress) -> Void)?, completionHandler: CompletionHandler?)
    {
        self.request = request
        self.destination = destination
        self.segmentCount = max(1, min(segments, 64))
        self.options = options
        self.progressHandler = progress
        self.completionHandler = completionHandler
        instruments = session.observation.instruments.map { $0.bound() }
        super.init(session: session, identifier: session.nextIdentifier(), request: request,
                   delegate: TaskDelegate(uploadProgress: nil, downloadProgress: nil), instrumented: false)
    }

    var partPath: String { destination.path + ".part" }
    var manifestPath: String { partPath + ".segments" }
    func journalPath(_ index: Int) -> String { partPath + ".seg\(index).journal" }

    // MARK: - Public state

    public override var state: TaskState { parts.withLock { $0.life.visibleState } }
    public override var response: HTTPResponse? { parts.withLock { $0.response } }
    public override var error: TransferError? { parts.withLock { $0.error } }
    /// Body bytes on disk over all ranges (including what a resumed run had).
    public override var countOfBytesReceived: Int64 { currentProgress().completedUnitCount }
    /// The file's length, or -1 until the probe (or the single download) says.
    public override var countOfBytesExpectedToReceive: Int64 { currentProgress().totalUnitCount }
    /// Connections used, known once the length is (0 before): at most
    /// `segmentCount`, fewer when the file is too small to give each
    /// ``DownloadOptions/minimumSegmentSize`` bytes, 1 for a plain download.
    public var segmentsUsed: Int { parts.withLock { $0.segmentsUsed } }

    /// The file URL once the download completed, or the error.
    public var value: URL {
        get async throws(TransferError) {
            resume()
            let result: Result<URL, TransferError> = await withCheckedContinuation { continuation in
                let done = parts.withLock { core -> Result<URL, TransferError>? in
                    if let result = core.result { return result }
                    core.waiters.append { continuation.resume(returning: $0) }
                    return nil
                }
                if let done { continuation.resume(returning: done) }
            }
            return try result.get()
        }
    }

    public override func progress(_ direction: ProgressDirection) -> TransferProgress {
        direction == .upload ? TransferProgress(completedUnitCount: 0, totalUnitCount: 0) : currentProgress()
    }

    private func currentProgress() -> TransferProgress {
        parts.withLock { core in
            if let single = core.single { return single.progress(.download) }
            let received = core.segments.reduce(Int64(0)) { $0 + $1.received }
            let elapsed = core.startTime > 0 ? Date().timeIntervalSince1970 - core.startTime : 0
            return TransferProgress(completedUnitCount: received, totalUnitCount: core.total, elapsed: elapsed,
                                    resumeOffset: core.initialBytes)
        }
    }

    @discardableResult
    public override func observeProgress(_ direction: ProgressDirection, on queue: DispatchQueue,
                                _ handler: @escaping @Sendable (TransferProgress) -> Void) -> ObservationToken
    {
        guard direction == .download else { return ObservationToken {} }
        let id: Int? = parts.withLock { core in
            guard !core.life.isCompleted else { return nil }
            core.nextObserverID += 1
            core.progressObservers[core.nextObserverID] = (queue, handler)
            return core.nextObserverID
        }
        guard let id else { return ObservationToken {} }
        return ObservationToken { [weak self] in _ = self?.parts.withLock { $0.progressObservers.removeValue(forKey: id) } }
    }

    @discardableResult
    public override func observeState(on queue: DispatchQueue,
                             _ handler: @escaping @Sendable (TaskState) -> Void) -> ObservationToken
    {
        let id: Int? = parts.withLock { core in
            guard !core.life.isCompleted else { return nil }
            core.nextObserverID += 1
            core.stateObservers[core.nextObserverID] = (queue, handler)
            return core.nextObserverID
        }
        guard let id else { return ObservationToken {} }
        return ObservationToken { [weak self] in _ = self?.parts.withLock { $0.stateObservers.removeValue(forKey: id) } }
    }

    // MARK: - Control

    /// Starts the download, or continues it after ``suspend()``.
    public override func resume() {
        enum Action { case none, start, resume([UInt64], DownloadTask?) }
        let action = parts.withLock { core -> Action in
            switch core.life.resume() {
            case .none:
                return .none
            case .start:
                core.startTime = Date().timeIntervalSince1970
                return .start
            case .continueConnections:
                return .resume(core.runningRangeIDs(), core.single)
            }
        }
        switch action {
        case .none:
            return
        case .start:
            session.observation.taskDidResume(self, starting: true)
            announce(.running)
            probe()
        case .resume(let ids, let single):
            session.observation.taskDidResume(self, starting: false)
            for id in ids { session.transfers.resume(id) }
            single?.resume()
            announce(.running)
        }
    }

    /// Pauses every connection without dropping it; ``resume()`` continues.
    public override func suspend() {
        let paused = parts.withLock { core -> ([UInt64], DownloadTask?)? in
            guard core.life.suspend() else { return nil }
            return (core.runningRangeIDs(), core.single)
        }
        guard let (ids, single) = paused else { return }
        for id in ids { session.transfers.pause(id) }
        single?.suspend()
        announce(.suspended)
    }

    /// Cancels every connection. A resumable download keeps its part file,
    /// manifest and journals for a later run; otherwise they are removed.
    public override func cancel() {
        let action = parts.withLock { core -> (SegmentedLifecycle.Cancel, [UInt64], DownloadTask?, UInt64) in
            let action = core.life.cancel()
            guard action != .none else { return (.none, [], nil, 0) }
            if core.error == nil { core.error = TransferError(.cancelled, "cancelled", url: request.url) }
            return (action, core.runningRangeIDs(), core.single, core.headID)
        }
        if action.0 != .none { session.observation.taskDidCancel(self) }
        switch action {
        case (.none, _, _, _):
            return
        case (.finishNow, _, _, _):
            // Never started: it never will, and it completes now.
            session.delegateQueue.async { self.finish() }
        case (.stopConnections, let ids, let single, let headID):
            // Each connection's end event leads to finishing; one not yet in
            // the engine sees the cancel when its submission returns.
            if headID != 0 { session.transfers.cancel(headID) }
            single?.cancel()
            for id in ids { session.transfers.cancel(id, keepPartial: options.resumable) }
        }
    }

    /// A task of an invalidated session: it fails without starting.
    override func finishLocally(_ error: TransferError) {
        let failNow = parts.withLock { core in
            guard core.life.invalidate() else { return false }
            if core.error == nil { core.error = error }
            return true
        }
        if failNow { session.delegateQueue.async { self.finish() } }
    }

    /// State observers and the task notification.
    private func announce(_ state: TaskState) {
        notifyState(state)
        switch state {
        case .running: session.postTaskNotification(.taskDidResume, task: self)
        case .suspended: session.postTaskNotification(.taskDidSuspend, task: self)
        default: break
        }
    }

    // MARK: - Probing

    private func probe() {
        var head = request
        head.method = .head
        let wire = WireRequest.start(&head, of: self)
        let strings = CStrings()
        defer { strings.free() }
        var spec = TransferSpec()
        do throws(TransferError) {
            try session.fillSpec(&spec, for: head, strings: strings)
        } catch {
            wire?.complete(response: nil, metrics: nil, error: error)
            fail(error)
            return
        }
        switch session.transfers.submit(&spec, target: ProbeTarget(self, wire)) {
        case .failure(let error):
            wire?.complete(response: nil, metrics: nil, error: error)
            fail(error)
        case .success(let id):
            let cancelNow = parts.withLock { core -> Bool in
                core.headID = id
                return core.life.isCancelled
            }
            if cancelNow { session.transfers.cancel(id) }
        }
    }

    /// On the delegate queue.
    private func didProbe(_ head: ProbeTarget.Head?, _ outcome: Outcome) {
        let choose = parts.withLock { core in
            core.headID = 0
            return core.life.probeEnded()
        }
        guard choose else {
            finish()
            return
        }
        guard let head, outcome.succeeded, head.response.statusCode == 200 else {
            // HEAD refused or odd: a plain download still has its chance.
            startSingle()
            return
        }
        let response = head.response
        parts.withLock { $0.response = response }
        let ranges = response.headers["Accept-Ranges"]?.lowercased().contains("bytes") == true
        let length = head.contentLength >= 0 ? head.contentLength : response.expectedContentLength
        let validator: String? = {
            if let etag = response.headers["ETag"], !etag.hasPrefix("W/") { return etag }
            return response.headers["Last-Modified"]
        }()
        // Below minimumSegmentSize per connection the extra round trips cost
        // more than they bring: use only as many ranges as the length fills.
        let fitting = max(0, length) / max(1, options.minimumSegmentSize)
        let count = Int(min(Int64(segmentCount), fitting))
        guard ranges, count > 1 else {
            startSingle()
            return
        }
        if options.maximumFileSize > 0 && length > options.maximumFileSize {
            fail(TransferError(.responseTooLarge, "the announced file (\(length) bytes) is larger than the limit of "
                + "\(options.maximumFileSize) bytes (DownloadOptions.maximumFileSize); "
                + "raise it to accept larger responses",
                url: request.url))
            return
        }
        do throws(TransferError) {
            try startSegments(length: length, count: count, validator: validator)
        } catch {
            fail(error)
        }
    }

    // MARK: - One connection

    private func startSingle() {
        let task = session.downloadTask(with: request, to: destination, options: options,
                                        progress: nil) { [self] response, url, error in
            session.delegateQueue.async {
                let ended = self.parts.withLock { core in
                    if let response { core.response = response }
                    if let error, core.error == nil { core.error = error }
                    core.single = nil
                    return core.life.singleEnded()
                }
                if ended { self.finish(fileURL: url) }
            }
        }
        let intent = parts.withLock { core -> SegmentedLifecycle.Intent in
            core.single = task
            core.segmentsUsed = 1
            return core.life.runSingle()
        }
        task.observeProgress(.download, on: session.delegateQueue) { [self] progress in deliver(progress) }
        task.resume()
        switch intent {
        case .run: break
        case .suspend: task.suspend()
        case .cancel: task.cancel()
        }
    }

    // MARK: - Segments

    private struct Manifest: Codable, Equatable {
        var url: String
        var validator: String?
        var length: Int64
        var ranges: [[Int64]]
    }

    private func startSegments(length: Int64, count: Int, validator: String?) throws(TransferError) {
        try FileMover.ensureDirectory(destination.deletingLastPathComponent())
        var ranges: [[Int64]] = []
        let size = length / Int64(count)
        for index in 0..<count {
            let start = Int64(index) * size
            let end = index == count - 1 ? length - 1 : start + size - 1
            ranges.append([start, end])
        }
        let manifest = Manifest(url: request.url.absoluteString, validator: validator, length: length, ranges: ranges)
        var offsets = Array(repeating: Int64(0), count: count)
        if options.resumable, let old = readManifest(), old == manifest,
            ResumeJournal.fileSize(partPath) == length
        {
            // Same file on the server and the same split: each range goes on
            // from what its journal confirms.
            for (index, range) in ranges.enumerated() {
                if let journal = ResumeJournal.read(at: journalPath(index)), journal.url == manifest.url,
                    journal.rangeStart == range[0], journal.rangeEnd == range[1],
                    journal.validator == nil || journal.validator == validator
                {
                    offsets[index] = journal.durable - range[0]
                }
            }
        } else {
            removeFiles()
            try preallocate(length)
            if options.resumable { try writeManifest(manifest) }
        }
        var segments: [Segment] = []
        for (index, range) in ranges.enumerated() {
            guard let segment = Segment(index: index, start: range[0], end: range[1], resumeOffset: offsets[index])
            else { throw TransferError(.internalError, "cannot allocate counters (out of memory)") }
            segment.done = offsets[index] == range[1] - range[0] + 1
            segments.append(segment)
        }
        let (run, pending) = parts.withLock { core -> (Bool, [Segment]) in
            core.total = length
            core.segments = segments
            core.segmentsUsed = count
            core.initialBytes = offsets.reduce(0, +)
            let pending = segments.filter { !$0.done }
            return (core.life.runRanges(pending: pending.count), pending)
        }
        guard run else {
            finish()
            return
        }
        for segment in pending { submit(segment, validator: validator) }
    }

    private func submit(_ segment: Segment, validator: String?) {
        var request = request
        let wire = WireRequest.start(&request, of: self)
        let strings = CStrings()
        defer { strings.free() }
        var spec = TransferSpec()
        do throws(TransferError) {
            try session.fillSpec(&spec, for: request, strings: strings)
        } catch {
            wire?.complete(response: nil, metrics: nil, error: error)
            segmentDidFinish(segment, error: error)
            return
        }
        spec.setFileSink(path: nil, partPath: partPath, strings: strings)
        spec.setRange(start: segment.start, end: segment.end)
        spec.resumeOffset = segment.resumeOffset
        spec.setIfRange(validator, strings: strings)
        spec.flags.formUnion([.failOnRangeIgnored, .noPreallocate])
        if options.resumable {
            spec.flags.insert(.keepPartial)
            spec.setJournal(path: journalPath(segment.index), intervalBytes: options.journalIntervalBytes,
                            intervalMilliseconds: options.journalIntervalMilliseconds, strings: strings)
        }
        if options.speedLimit > 0 {
            let used = max(1, parts.withLock { $0.segmentsUsed })
            spec.maxReceiveSpeed = max(1, options.speedLimit / Int64(used))
        }
        spec.count(into: segment.counters)
        switch session.transfers.submit(&spec, target: SegmentTarget(self, segment, wire)) {
        case .failure(let error):
            wire?.complete(response: nil, metrics: nil, error: error)
            segmentDidFinish(segment, error: error)
        case .success(let id):
            let (cancelNow, pauseNow) = parts.withLock { core -> (Bool, Bool) in
                segment.engineID = id
                return (core.life.intent == .cancel, core.life.intent == .suspend)
            }
            if cancelNow {
                session.transfers.cancel(id, keepPartial: options.resumable)
            } else if pauseNow {
                session.transfers.pause(id)
            }
        }
    }

    /// On the delegate queue (or the caller's, for a refused submit).
    private func segmentDidFinish(_ segment: Segment, error: TransferError?) {
        let (others, allDone) = parts.withLock { core -> ([UInt64], Bool) in
            var others: [UInt64] = []
            if let error {
                if core.error == nil {
                    core.error = error
                    others = core.segments.filter { !$0.done && $0 !== segment && $0.engineID != 0 }.map(\.engineID)
                }
            } else {
                segment.done = true
            }
            return (others, core.life.rangeEnded())
        }
        // One range failed: the others stop too, keeping what they have.
        for id in others { session.transfers.cancel(id, keepPartial: options.resumable) }
        if allDone { finish() }
    }

    // MARK: - Files

    private func readManifest() -> Manifest? {
        guard let data = FileManager.default.contents(atPath: manifestPath) else { return nil }
        return try? JSONDecoder().decode(Manifest.self, from: data)
    }

    private func writeManifest(_ manifest: Manifest) throws(TransferError) {
        guard let data = try? JSONEncoder().encode(manifest) else {
            throw TransferError(.internalError, "cannot encode the segment manifest")
        }
        try DurableFile.write(data, to: manifestPath)
    }

    private func preallocate(_ length: Int64) throws(TransferError) {
        let fd = open(partPath, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw DurableFile.error("cannot create \(partPath)") }
        defer { close(fd) }
        // The real size at once, so every range can write at its offset, but
        // sparse: the length is the server's word (a HEAD claiming 10 GiB costs
        // no block), and each range's bytes take disk only as they arrive.
        // posix_fallocate here once left the whole claim allocated after a
        // failure; a disk that is really full shows at the first write.
        if ftruncate(fd, off_t(length)) != 0 {
            unlink(partPath)
            throw DurableFile.error("cannot size \(partPath)")
        }
    }

    private func removeFiles() {
        unlink(partPath)
        unlink(manifestPath)
        for index in 0..<max(segmentCount, 64) { unlink(journalPath(index)) }
    }

    // MARK: - Finishing

    /// No connection could run (before or instead of the ranges).
    private func fail(_ error: TransferError) {
        let finishNow = parts.withLock { core in
            if core.error == nil { core.error = error }
            return core.life.failBeforeConnections()
        }
        if finishNow { finish() }
    }

    /// On the delegate queue: every connection has ended (the lifecycle is
    /// in its finishing phase).
    private func finish(fileURL: URL? = nil) {
        let (isSingle, segmented, recorded) = parts.withLock { core -> (Bool, Bool, TransferError?) in
            (core.segmentsUsed == 1, !core.segments.isEmpty, core.error)
        }
        var error = recorded
        var url = fileURL
        if !isSingle && segmented && error == nil {
            do throws(TransferError) {
                try placeSegmentedFile()
                url = destination
            } catch let placeError {
                error = placeError
            }
        }
        if error != nil && segmented && !options.resumable {
            removeFiles()
        }
        if let e = error, e.code == .checksumMismatch { removeFiles() }
        complete(url: error == nil ? url : nil, error: error)
    }

    private func placeSegmentedFile() throws(TransferError) {
        if let expected = try options.expectedDigest() {
            // Ranges arrive out of order, so a streamed digest cannot cover
            // them: one pass over the finished file (page cache, mostly).
            let actual = try FileSHA256.digest(ofFile: partPath)   // Bridging/FileSHA256.swift
            if actual != expected {
                throw TransferError(.checksumMismatch, "SHA-256 mismatch: expected \(Self.hex(expected)), got \(Self.hex(actual))",
                                    url: request.url)
            }
        }
        try DurableFile.sync(partPath)
        try FileMover.move(from: URL(fileURLWithPath: partPath), to: destination, placing: true)
        DurableFile.syncDirectory(of: destination.path)
        unlink(manifestPath)
        for index in 0..<segmentCount { unlink(journalPath(index)) }
    }

    static func hex(_ bytes: [UInt8]) -> String { lowerHex(bytes) }

    private func complete(url: URL?, error: TransferError?) {
        let claimed = parts.withLock { core -> (Result<URL, TransferError>, [(DispatchQueue, @Sendable (TaskState) -> Void)],
                                               [@Sendable (Result<URL, TransferError>) -> Void], HTTPResponse?)? in
            guard core.life.complete() else { return nil }
            let result: Result<URL, TransferError>
            if let url, error == nil {
                result = .success(url)
            } else {
                let e = error ?? TransferError(.internalError, "the download ended without a file", url: request.url)
                core.error = e
                result = .failure(e)
            }
            core.result = result
            let observers = Array(core.stateObservers.values)
            let waiters = core.waiters
            core.waiters.removeAll()
            core.stateObservers.removeAll()
            return (result, observers, waiters, core.response)
        }
        guard let (result, observers, waiters, response) = claimed else { return }
        if case .success = result { deliver(currentProgress(), final: true) }
        parts.withLock { $0.progressObservers.removeAll() }
        for (queue, handler) in observers { queue.async { handler(.completed) } }
        // Monitors, the logger, hooks and the delegate, as for every task.
        // The metrics are per wire request: each was reported on its own.
        let failure: TransferError? = if case .failure(let e) = result { e } else { nil }
        session.announceCompletion(of: self, metrics: nil, error: failure, asRequest: false)
        // Out of the task lists before anyone hears of the completion.
        session.forget(self)
        var userInfo: [String: Any] = [:]
        if let response { userInfo[TransferEventKey.response] = response }
        switch result {
        case .success(let url): userInfo[TransferEventKey.assetPath] = url
        case .failure(let error): userInfo[TransferEventKey.error] = error
        }
        session.postNotification(.taskDidComplete, task: self, userInfo: userInfo)
        if let completionHandler {
            let fileURL = try? result.get()
            let error: TransferError? = if case .failure(let e) = result { e } else { nil }
            session.runCompletion { completionHandler(response, fileURL, error) }
        }
        for waiter in waiters { waiter(result) }
    }

    // MARK: - Progress

    private func scheduleProgress() {
        let schedule = parts.withLock { core -> Bool in
            guard !core.progressPending, !core.life.isCompleted else { return false }
            core.progressPending = true
            return true
        }
        if schedule {
            session.delegateQueue.async { [self] in
                parts.withLock { $0.progressPending = false }
                deliver(currentProgress())
            }
        }
    }

    private func deliver(_ progress: TransferProgress, final: Bool = false) {
        let observers = parts.withLock { core in
            (core.life.isCompleted && !final) ? [] : Array(core.progressObservers.values)
        }
        progressHandler?(progress)
        for (queue, handler) in observers { queue.async { handler(progress) } }
    }

    private func notifyState(_ state: TaskState) {
        let observers = parts.withLock { Array($0.stateObservers.values) }
        for (queue, handler) in observers { queue.async { handler(state) } }
    }
}

/// Small durable-file helpers: write + fsync + rename + fsync of the directory.
enum DurableFile {
    static func error(_ what: String) -> TransferError {
        let err = errno
        var e = TransferError(.fileError, "\(what): \(String(cString: strerror(err)))")
        e.systemErrno = err
        return e
    }

    static func write(_ data: Data, to path: String) throws(TransferError) {
        let temporary = path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw error("cannot create \(temporary)") }
        let written = data.withUnsafeBytes { raw in Glibc.write(fd, raw.baseAddress, raw.count) }
        if written != data.count || fsync(fd) != 0 {
            let e = error("cannot write \(temporary)")
            close(fd)
            unlink(temporary)
            throw e
        }
        close(fd)
        guard rename(temporary, path) == 0 else {
            let e = error("cannot replace \(path)")
            unlink(temporary)
            throw e
        }
        syncDirectory(of: path)
    }

    static func sync(_ path: String) throws(TransferError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw error("cannot open \(path)") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw error("cannot sync \(path)") }
    }

    static func syncDirectory(of path: String) {
        // The path up to its last slash ("/" for a file at the root, "" for a bare name).
        let directory = path.lastIndex(of: "/").map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? ""
        let fd = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = fsync(fd)
        close(fd)
    }
}

extension SessionManager {
    /// A download of one file over `segments` connections (see
    /// ``SegmentedDownload``); falls back to one connection when the server
    /// has no ranges. Call ``SegmentedDownload/resume()`` or await
    /// ``SegmentedDownload/value``.
    ///
    /// - Note: `progress` runs on ``delegateQueue``; `completionHandler` once
    ///   on ``completionQueue``.
    public func segmentedDownload(with request: Request, to destination: URL, segments: Int = 4,
                                  options: DownloadOptions = DownloadOptions(),
                                  progress: (@Sendable (TransferProgress) -> Void)? = nil,
                                  completionHandler: SegmentedDownload.CompletionHandler? = nil) -> SegmentedDownload
    {
        register(SegmentedDownload(session: self, request: request, destination: destination, segments: segments,
                                   options: options, progress: progress, completionHandler: completionHandler))
    }
}

// MARK: - Engine targets (loop thread)

extension SegmentedDownload {
    /// The HEAD probe's transfer: keeps the head, hands both to `didProbe`.
    fileprivate final class ProbeTarget: EngineTarget, @unchecked Sendable {
        // @unchecked Sendable: `head` is written and read on the loop thread only.
        private let download: SegmentedDownload
        private var head: Head?

        /// What the probe keeps of the head.
        struct Head {
            var response: HTTPResponse
            /// Content-Length as the engine read it; -1 when unknown.
            var contentLength: Int64
        }

        private let wire: WireRequest?

        init(_ download: SegmentedDownload, _ wire: WireRequest?) {
            self.download = download
            self.wire = wire
        }

        override func engineDidReceiveResponse(_ head: EngineResponseHead) {
            self.head = Head(response: head.response(requestURL: download.request.url),
                             contentLength: head.contentLength)
        }

        override func engineDidFinish(_ result: EngineResult) {
            let (download, head, outcome) = (download, head, result.outcome)
            wire?.complete(response: head?.response, metrics: outcome.metrics, error: outcome.error(url: download.request.url))
            download.session.delegateQueue.async { download.didProbe(head, outcome) }
        }
    }

    /// One segment's transfer: progress schedules the combined report; the
    /// finish goes to `segmentDidFinish`.
    fileprivate final class SegmentTarget: EngineTarget, @unchecked Sendable {
        // @unchecked Sendable: immutable but for `response`, written and
        // read on the loop thread only.
        private let download: SegmentedDownload
        private let segment: Segment
        private let wire: WireRequest?
        private var response: HTTPResponse?

        init(_ download: SegmentedDownload, _ segment: Segment, _ wire: WireRequest?) {
            self.download = download
            self.segment = segment
            self.wire = wire
        }

        override func engineDidReceiveResponse(_ head: EngineResponseHead) {
            // Kept only for an observer of the range's request.
            if wire != nil { response = head.response(requestURL: download.request.url) }
        }

        override func engineDidProgress(_ progress: ProgressSnapshot) {
            download.scheduleProgress()
        }

        override func engineDidFinish(_ result: EngineResult) {
            let (download, segment) = (download, segment)
            let error = result.outcome.error(url: download.request.url, sizeSetting: "DownloadOptions.maximumFileSize")
            wire?.complete(response: response, metrics: result.metrics, error: error)
            download.session.delegateQueue.async { download.segmentDidFinish(segment, error: error) }
        }
    }

    /// A wire request of the download (the probe or one range) as the
    /// session's observers see it: the request instruments' observers (a
    /// span, a metric per request) and `.completion` event monitors. Made
    /// only when someone observes requests; completed once, from any thread.
    final class WireRequest: @unchecked Sendable {
        // @unchecked Sendable: immutable but for `done`, which is atomic.
        private let request: Request
        private let observers: [any RequestObserver]
        private let download: SegmentedDownload
        private let done = Atomic<Bool>(false)

        private init(request: Request, observers: [any RequestObserver], download: SegmentedDownload) {
            self.request = request
            self.observers = observers
            self.download = download
        }

        /// Runs the download's bound instruments on `request` (they may add
        /// headers); nil when nobody observes requests.
        static func start(_ request: inout Request, of download: SegmentedDownload) -> WireRequest? {
            let observers = download.instruments.start(&request)
            guard !observers.isEmpty || download.session.observation.wantsCompletions else { return nil }
            return WireRequest(request: request, observers: observers, download: download)
        }

        func complete(response: HTTPResponse?, metrics: TaskMetrics?, error: TransferError?) {
            guard !done.exchange(true, ordering: .acquiringAndReleasing) else { return }
            let completed = CompletedRequest(request: request, response: response, metrics: metrics, error: error,
                                             taskIdentifier: download.taskIdentifier)
            for observer in observers { observer.requestDidComplete(completed) }
            download.session.observation.requestsDidComplete([completed])
        }
    }
}
