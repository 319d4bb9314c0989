import Dispatch
import FoundationEssentials
import Glibc
import Synchronization

/// A task whose body goes straight to disk from the engine: no body byte
/// enters Swift. The file is written to a part file and moved into place
/// atomically on success; on failure nothing is left at the destination.
public final class DownloadTask: TransferTask, @unchecked Sendable {
    // @unchecked Sendable: as TransferTask; `location` is guarded by its Protected lock.
    /// AFNetworking's destination block: given the temporary file and the
    /// response, returns where to move the file. Runs on the session's delegate
    /// queue before the completion.
    public typealias Destination = @Sendable (_ temporaryURL: URL, _ response: HTTPResponse) -> URL
    /// Called once with the response, the final file URL and nil, or with the
    /// error; runs on the session's ``SessionManager/completionQueue``.
    public typealias CompletionHandler = @Sendable (HTTPResponse?, URL?, TransferError?) -> Void

    /// A fixed destination: the engine writes `<destination>.part` and renames it.
    let fixedDestination: URL?
    let destination: Destination?
    let completionHandler: CompletionHandler?
    let resume: ResumeData?
    let options: DownloadOptions
    /// The expected digest's 32 bytes, or nil; `digestError` when the hex in `options` is bad.
    private let expectedDigest: [UInt8]?
    private let digestError: TransferError?
    /// Where the engine writes when the destination is only known at the end.
    let temporaryPath: String
    private let location = Protected<URL?>(nil)
    /// The offset this task asked to continue at (resume data or journal).
    private let startOffset = Protected<Int64>(0)
    /// The data task whose transfer this task took over (become-download):
    /// it completes when this task does. Let go then: the data task's
    /// result names this task, and the pair must not keep each other alive.
    private let adoptedFrom: Protected<DataTask?>
    /// Whether this task took its transfer over from a data task.
    let isAdopted: Bool

    init(session: SessionManager, identifier: Int, request: Request, delegate: TaskDelegate,
         fixedDestination: URL?, destination: Destination?, resume: ResumeData?,
         options: DownloadOptions = DownloadOptions(), completionHandler: CompletionHandler?,
         adopting: (dataTask: DataTask, engineID: UInt64)? = nil)
    {
        self.adoptedFrom = Protected(adopting?.dataTask)
        self.isAdopted = adopting != nil
        self.fixedDestination = fixedDestination
        self.destination = destination
        self.completionHandler = completionHandler
        self.resume = resume
        self.options = options
        do throws(TransferError) {
            expectedDigest = try options.expectedDigest()
            digestError = nil
        } catch {
            expectedDigest = nil
            digestError = error
        }
        startOffset.withLock { $0 = resume?.bytesOnDisk ?? 0 }
        self.temporaryPath = resume?.partialFilePath
            ?? session.temporaryDirectory.appendingPathComponent("download-\(UUID().uuidString).part").path
        super.init(session: session, identifier: identifier, request: request, delegate: delegate,
                   adopting: adopting.map { ($0.engineID, $0.dataTask.counterBlock) })
        if let resume {
            core.withLock { $0.download.resumeOffset = resume.bytesOnDisk }
        }
    }

    override func configure(_ spec: inout TransferSpec, strings: CStrings) throws(TransferError) {
        if let digestError { throw digestError }
        spec.sink = .file
        if let expectedDigest { spec.setExpectedSHA256(expectedDigest, strings: strings) }
        if options.speedLimit > 0 { spec.maxReceiveSpeed = options.speedLimit }
        spec.maxBodySize = max(0, options.maximumFileSize)
        if !options.synchronizesToDisk && !options.resumable { spec.flags.insert(.noSync) }
        if let fixedDestination, resume == nil {
            let directory = fixedDestination.deletingLastPathComponent()
            try FileMover.ensureDirectory(directory)
            spec.setFileSink(path: fixedDestination.path, partPath: fixedDestination.path + ".part", strings: strings)
            if options.resumable {
                configureJournal(&spec, strings: strings, partPath: fixedDestination.path + ".part")
            }
        } else {
            // The part file lives in the private per-user folder, checked
            // (ours, 0700, not a symlink) each time a task starts.
            try TemporaryFolder.prepare(session.temporaryDirectory.path)
            spec.setFileSink(path: nil, partPath: temporaryPath, strings: strings)
        }
        if let resume {
            spec.resumeOffset = resume.bytesOnDisk
            spec.setIfRange(resume.validator, strings: strings)
        }
    }

    /// Resumable downloads: continue from the journal next to the part
    /// file when it matches this request, else start clean.
    private func configureJournal(_ spec: inout TransferSpec, strings: CStrings, partPath: String) {
        let journalPath = partPath + ".journal"
        spec.setJournal(path: journalPath, intervalBytes: options.journalIntervalBytes,
                        intervalMilliseconds: options.journalIntervalMilliseconds, strings: strings)
        spec.flags.insert(.keepPartial)
        if let journal = ResumeJournal.read(at: journalPath), journal.rangeStart < 0,
            journal.url == originalRequest.url.absoluteString, journal.durable > 0,
            // The validator becomes an If-Range header: the request's rules.
            (try? HTTPHeaders.validate(name: "If-Range", value: journal.validator ?? "")) != nil,
            ResumeJournal.fileSize(partPath) >= journal.durable,
            // Bytes past `durable` were never confirmed: drop them.
            Self.trim(partPath, to: journal.durable)
        {
            // A part file that may already be complete (killed between the
            // last journal update and the rename) would get 416 for
            // "bytes=<length>-": ask again for its last byte instead.
            let complete = journal.length < 0 || journal.durable >= journal.length
            let offset = complete ? journal.durable - 1 : journal.durable
            spec.resumeOffset = offset
            spec.setIfRange(journal.validator, strings: strings)
            startOffset.withLock { $0 = offset }
            core.withLock { $0.download.resumeOffset = offset }
        } else {
            unlink(partPath)
            unlink(journalPath)
        }
    }

    /// Cuts the part file to `length` without following a symlink at its
    /// path (truncate(2) would cut whatever file the link names).
    private static func trim(_ path: String, to length: Int64) -> Bool {
        let fd = open(path, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { return false }
        return ftruncate(fd, off_t(length)) == 0
    }

    override func needsResponseEvent() -> Bool { startOffset.withLock { $0 } > 0 }

    /// An intermediate hop (redirect, 401) was written like a body: remove it.
    override func discardHopResult() {
        if let fixedDestination, resume == nil {
            try? FileManager.default.removeItem(at: fixedDestination)
        }
    }

    override func didReceiveResponse(_ response: HTTPResponse) {
        // A 206 continues at the offset; anything else restarted from zero.
        let offset: Int64 = response.statusCode == 206 ? startOffset.withLock { $0 } : 0
        if offset == 0 { core.withLock { $0.download.resumeOffset = 0 } }
        let (hooks, delegate) = session.observers
        hooks.downloadTaskDidResume?(session, self, offset, countOfBytesExpectedToReceive)
        delegate?.session(session, downloadTask: self, didResumeAtOffset: offset,
                          expectedTotalBytes: countOfBytesExpectedToReceive)
    }

    /// Cancels the task. A resumable task keeps its part file and journal,
    /// so that a later task (or process) continues from them.
    public override func cancel() {
        cancel(keepingPartialData: options.resumable)
    }

    override func deliverProgress() {
        super.deliverProgress()
        let (hooks, delegate) = session.observers
        guard hooks.downloadTaskDidWriteData != nil || delegate != nil else { return }
        let written = countOfBytesReceived
        let last = lastReported.withLock { last -> Int64 in
            defer { last = written }
            return last
        }
        if written > last {
            hooks.downloadTaskDidWriteData?(session, self, written - last, written, countOfBytesExpectedToReceive)
            delegate?.session(session, downloadTask: self, didWriteData: written - last, totalBytesWritten: written,
                              totalBytesExpectedToWrite: countOfBytesExpectedToReceive)
        }
    }

    private let lastReported = Protected<Int64>(0)

    override func complete(with outcome: Outcome) {
        var error = outcome.error(url: originalRequest.url, sizeSetting: "DownloadOptions.maximumFileSize")
        var fileURL: URL?
        if error == nil, let path = outcome.filePath {
            let written = URL(fileURLWithPath: path)
            if fixedDestination != nil && resume == nil {
                fileURL = written
            } else {
                do throws(TransferError) {
                    fileURL = try placeFile(at: written)
                } catch let moveError {
                    error = moveError
                    try? FileManager.default.removeItem(at: written)
                    session.postNotification(.downloadDidFailToMoveFile, task: self,
                                             userInfo: [TransferEventKey.error: moveError])
                }
            }
            if error == nil, fileURL != nil {
                session.postNotification(.downloadDidMoveFile, task: self, userInfo: [:])
            }
        }
        if let e = error, e.code == .cancelled, outcome.bytesOnDisk > 0, let handler = takeResumeDataHandler() {
            handler(ResumeData(task: self, outcome: outcome)?.encoded())
        } else if let handler = takeResumeDataHandler() {
            handler(nil)
        }
        location.withLock { $0 = fileURL }
        complete(error: error, outcome: outcome)
    }

    override func complete(error: TransferError?, outcome: Outcome?) {
        if outcome == nil, let handler = takeResumeDataHandler() { handler(nil) }
        super.complete(error: error, outcome: outcome)
    }

    override func didDeliverCompletion(error: TransferError?) {
        // The data task this one took over completes once, right after.
        let predecessor = adoptedFrom.withLock { predecessor in
            defer { predecessor = nil }
            return predecessor
        }
        predecessor?.successorDidComplete(self, error: error)
    }

    /// The file when it is only valid during the completion call (no
    /// destination, no finish hook that placed it), else nil.
    var temporaryFileURL: URL? {
        let placed = fixedDestination != nil || destination != nil
            || session.hooks.downloadTaskDidFinishDownloading != nil
        return placed ? nil : fileURL
    }

    /// The final location after the destination closure and the session hook.
    private func placeFile(at temporary: URL) throws(TransferError) -> URL? {
        guard let response else { return temporary }
        var target: URL?
        let (hooks, delegate) = session.observers
        delegate?.session(session, downloadTask: self, didFinishDownloadingTo: temporary)
        if let hook = hooks.downloadTaskDidFinishDownloading {
            target = hook(session, self, temporary)
        }
        if target == nil, let destination {
            target = destination(temporary, response)
        }
        if target == nil, let fixedDestination {
            target = fixedDestination
        }
        guard let target else { return temporary }
        // A destination chosen at the end may come from the server (see
        // ``destination(inDirectory:)``): never replace a file unasked.
        try FileMover.move(from: temporary, to: target, replacing: replacesExistingFile, placing: true)
        return target
    }

    private func takeResumeDataHandler() -> (@Sendable (Data?) -> Void)? {
        core.withLock { core in
            defer { core.resumeDataHandler = nil }
            return core.resumeDataHandler
        }
    }

    /// Whether the move to a destination given by a ``Destination`` closure,
    /// ``destination(inDirectory:)`` or the finish hook replaces a file that
    /// is already there. Default `false`: the task fails with
    /// ``TransferError/Code/fileError`` (`EEXIST`) and the existing file is
    /// left as it was, as AFNetworking's move does. Set it before `resume()`.
    /// Downloads to a fixed URL (`downloadTask(with:to:)`) always replace.
    public var replacesExistingFile: Bool {
        get { replacing.withLock { $0 } }
        set { replacing.withLock { $0 = newValue } }
    }

    private let replacing = Protected<Bool>(false)

    /// Where the file is, once the task completed successfully.
    public var fileURL: URL? { location.withLock { $0 } }

    /// Cancels, keeping what was downloaded: `completionHandler` receives
    /// resume data for ``SessionManager/downloadTask(withResumeData:progress:destination:completionHandler:)``,
    /// or nil when nothing can be resumed. Runs on the delegate queue.
    public func cancel(byProducingResumeData completionHandler: @escaping @Sendable (Data?) -> Void) {
        let accepted = core.withLock { core -> Bool in
            guard !core.life.isCompleted, core.life.visibleState != .canceling else { return false }
            core.resumeDataHandler = completionHandler
            return true
        }
        guard accepted else {
            session.delegateQueue.async { completionHandler(nil) }
            return
        }
        cancel(keepingPartialData: true)
    }

    func callCompletion(error: TransferError?) {
        // Taken over from a data task: its completion (run next) owns the file.
        if isAdopted { return }
        let fileURL = self.fileURL
        let temporary = fixedDestination == nil && destination == nil && session.hooks.downloadTaskDidFinishDownloading == nil
        guard let completionHandler else {
            if temporary, let fileURL { try? FileManager.default.removeItem(at: fileURL) }
            return
        }
        let response = self.response
        session.runCompletion {
            completionHandler(response, fileURL, error)
            // Without a destination the file is only valid during the call,
            // as with URLSession: the temporary file never outlives the task.
            if temporary, let fileURL { try? FileManager.default.removeItem(at: fileURL) }
        }
    }
}

/// Moving downloads into place.
enum FileMover {
    static func ensureDirectory(_ directory: URL) throws(TransferError) {
        var isDirectory = false
        if FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory), isDirectory {
            return
        }
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            var e = TransferError(.fileError, "cannot create directory \(directory.path): \(error)")
            e.systemErrno = EACCES
            throw e
        }
    }

    /// Moves a finished download to `target`. With `replacing`, an existing
    /// file there is replaced atomically (rename(2)); without it, an existing
    /// file is left untouched and the move fails with
    /// ``TransferError/Code/fileError`` (`EEXIST`). Across file systems the
    /// file is copied next to `target` first, then moved the same way.
    /// Missing folders of `target` are created. With `placing` (a download
    /// reaching the name the user chose, not a part file moving between
    /// private folders) the file first gets ``placedMode``.
    static func move(from source: URL, to target: URL, replacing: Bool = true,
                     placing: Bool = false) throws(TransferError)
    {
        try ensureDirectory(target.deletingLastPathComponent())
        // Best effort, as in the engine's sink: where modes are refused the file stays private.
        if placing { _ = chmod(source.path, placedMode) }
        let err = replacing ? (rename(source.path, target.path) == 0 ? 0 : errno) : place(source.path, target.path)
        if err == 0 {
            if !replacing { unlink(source.path) }
            return
        }
        guard err == EXDEV else { throw moveFailure(err, target) }
        // Staged under a fresh name in the target's folder, then moved as above.
        let staging = target.deletingLastPathComponent()
            .appendingPathComponent(".transfer-\(UUID().uuidString).tmp").path
        do {
            try FileManager.default.copyItem(atPath: source.path, toPath: staging)
        } catch {
            try? FileManager.default.removeItem(atPath: staging)
            var e = TransferError(.fileError, "cannot copy the download to \(target.path): \(error)")
            e.systemErrno = EXDEV
            throw e
        }
        let staged = replacing ? (rename(staging, target.path) == 0 ? 0 : errno) : place(staging, target.path)
        unlink(staging)
        guard staged == 0 else { throw moveFailure(staged, target) }
        try? FileManager.default.removeItem(at: source)
    }

    /// Puts `source` at `target` only if nothing is there, in one step: a
    /// check then a rename would let a file appear in between and be
    /// replaced. link(2) fails with EEXIST instead; the caller removes
    /// `source`. File systems without hard links get an O_EXCL placeholder
    /// that the rename then replaces. Returns 0 or an errno.
    private static func place(_ source: String, _ target: String) -> Int32 {
        if link(source, target) == 0 { return 0 }
        let err = errno
        guard err == EPERM || err == EOPNOTSUPP || err == EMLINK else { return err }
        let fd = open(target, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        if fd < 0 { return errno }
        close(fd)
        if rename(source, target) == 0 { return 0 }
        let renameErr = errno
        unlink(target)
        return renameErr
    }

    private static func moveFailure(_ err: Int32, _ target: URL) -> TransferError {
        let why = err == EEXIST ? "a file is already there (not replaced)" : String(cString: strerror(err))
        var e = TransferError(.fileError, "cannot move the download to \(target.path): \(why)")
        e.systemErrno = err
        return e
    }
}

extension DownloadTask {
    /// The data task this download took its transfer from was suspended
    /// meanwhile: the transfer is paused in the engine, and this task's own
    /// machine says so (each task changes only its own state).
    func adoptedTransferIsPaused() {
        core.withLock { $0.life.adoptedTransferIsPaused() }
    }
}
