import Dispatch
import FoundationEssentials
import Glibc
import Logging
import Synchronization
import Transfer

/// Runs the jobs of a plan with bounded concurrency and turns their
/// outcomes into output files, stdout, metrics, failure lines and an exit code.
final class Runner: Sendable {
    let plan: RunPlan
    let display: ProgressDisplay
    let interrupts = Interrupts()
    let metrics: MetricsWriter?
    /// Jobs whose ``perform(_:)`` has returned; the run loop compares it with
    /// the results it has taken to batch metrics writes.
    private let finished = Atomic<Int>(0)
    /// The session shared by all jobs (nil when it could not start).
    private let session: SessionManager?
    private let sessionError: TransferError?
    /// `-v` lines (VerboseLog.swift); nil when not verbose.
    private let verbose: Logger?
    /// Where bodies bound for stdout or a device wait on disk.
    private let scratch = ScratchFolder()
    /// `-v` and `--trace`: libcurl's `*`, `>` and `<` lines (TraceOutput.swift).
    private let trace: TraceOutput?
    /// `-D FILE`, `--etag-save FILE`, `-w`: one transfer's writes at a time.
    private let curlOutput = Protected(())
    /// `--proto-redir`: the URL of each 3xx whose redirect was refused, and its target.
    private let refusedRedirects = Protected<[String: String]>([:])

    /// What one job ended with.
    struct JobResult: Sendable {
        var failure: Failure?
    }

    init(plan: RunPlan) throws(Failure) {
        self.plan = plan
        verbose = VerboseLog.make(enabled: plan.verbose)
        display = ProgressDisplay(style: plan.progress)
        trace = try TraceOutput(path: plan.curl.tracePath, verbose: plan.verbose, timed: plan.curl.traceTime)
        if let path = plan.curl.dumpHeader {
            // Truncated once: every transfer of the run appends its head.
            let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard fd >= 0 else {
                throw Failure(.localFile, "cannot open -D \(path): \(String(cString: strerror(errno)))")
            }
            close(fd)
        }
        var configuration = plan.configuration
        if let trace { configuration.logger = trace.logger }
        // Anything else on stdout (a body, status lines, headers) keeps each
        // metrics line in place among it, as printed.
        let sharesStdout = plan.print.status || plan.print.headers
            || (plan.print.body && plan.jobs.maker.output == .stdout)
        metrics = try plan.metricsPath.map { path throws(Failure) in
            try MetricsWriter(path: path, sharesStdout: sharesStdout)
        }
        do throws(TransferError) {
            let made = try Self.makeSession(configuration, features: plan.features)
            if let allowed = plan.curl.redirectSchemes {
                // curl's --proto-redir: a redirect elsewhere is not followed;
                // its 3xx then fails the transfer as a refused redirect (exit 8).
                let refused = refusedRedirects
                made.hooks.taskWillPerformHTTPRedirection = { _, _, response, request in
                    guard let scheme = request.url.scheme?.lowercased(), allowed.contains(scheme) else {
                        refused.withLock { $0[response.url.absoluteString] = request.url.absoluteString }
                        return nil
                    }
                    return request
                }
            }
            session = made
            sessionError = nil
        } catch {
            session = nil
            sessionError = error
        }
    }

    /// A session with the run's configuration and trust policy.
    private static func makeSession(_ configuration: SessionConfiguration, features: FeatureOptions)
        throws(TransferError) -> SessionManager
    {
        let session = try SessionManager(configuration: configuration)
        if let policy = features.securityPolicy { try session.setSecurityPolicy(policy) }
        return session
    }

    /// Runs everything; returns the exit code.
    func run() async -> Int32 {
        interrupts.install(onInterrupt: { [display] in display.stop() }, beforeExit: { [metrics] in metrics?.flush() })

        // Only failures are kept (a run of a million jobs holds its own few).
        var failures = FailureLog()
        if let session, runsAsBatch {
            await performBatch(session, failures: &failures)
        } else {
            await withTaskGroup(of: (Job, JobResult).self) { group in
                var jobs = plan.jobs.makeIterator()
                var running = 0
                var taken = 0
                while running < plan.parallel, let job = jobs.next() {
                    group.addTask { await self.performCounted(job) }
                    running += 1
                }
                for await (job, result) in group {
                    failures.add(job, result.failure)
                    taken += 1
                    if let job = jobs.next() {
                        group.addTask { await self.performCounted(job) }
                    }
                    // One metrics write per pass over the completions: when no
                    // other job has finished since, its line goes out now;
                    // otherwise the next turn of this loop takes that job first.
                    if finished.load(ordering: .acquiring) == taken { metrics?.flush() }
                }
            }
        }
        metrics?.flush()
        display.stop()
        interrupts.uninstall()
        scratch.remove()
        if let session {
            // Every job has ended: the shutdown returns once the session is
            // invalid and its engine released (connections closed, their TLS
            // contexts freed), so nothing of the engine is alive at exit.
            try? await session.shutdown()
            // Let events already queued for finished tasks run, so nothing
            // holds a task when the process exits.
            session.delegateQueue.sync {}
        }

        // One line per failure, in input order; the first one decides the exit code.
        var exitCode: Int32 = 0
        for (_, line, status) in failures.inInputOrder() {
            Terminal.note(line)
            if exitCode == 0 { exitCode = status.rawValue }
        }
        // -c FILE: after every transfer, with all the cookies of the run.
        if let failure = CookieOptions.writeJar(session, to: plan.cookieJarPath) {
            Terminal.note(failure.line(url: plan.cookieJarPath ?? ""))
            if exitCode == 0 { exitCode = failure.status.rawValue }
        }
        return exitCode
    }

    // MARK: - The batch

    /// `--parallel` runs of bodiless `--discard` jobs that nothing watches
    /// (no progress display, no per-transfer rate, no serializer, checksum or
    /// segments) go through the library's batch API: the engine gets the
    /// requests a window at a time and the results come back per loop pass.
    private var runsAsBatch: Bool {
        plan.parallel > 1 && plan.body.isEmpty && !display.isActive && taskSpeedLimit == nil
            && plan.features.serializer == nil && plan.features.expectedSHA256 == nil && plan.features.segments == 1
            && plan.jobs.maker.output == .discard
    }

    /// The batch takes its requests from the job list as slots free up (the
    /// library's lazy batch): a job list of any length is never held at once.
    /// Jobs whose URL is invalid fail without a request.
    private func performBatch(_ session: SessionManager, failures: inout FailureLog) async {
        let requests = BatchRequests(jobs: plan.jobs, verbose: plan.verbose)
        // Timings for --metrics, -v's summary line and -w's variables.
        // A window of results may wait for the output: the engine refills
        // from the loop thread while this task writes lines.
        let options = BatchOptions(maxConcurrentRequests: plan.parallel, discardsBodies: true,
                                   collectsMetrics: metrics != nil || plan.verbose || plan.curl.writeOut != nil,
                                   bufferedResults: plan.parallel)
        let batch = Task { [self] () -> FailureLog in
            var failures = FailureLog()
            var results = session.results(for: requests, options: options).makeAsyncIterator()
            while let element = await results.next() {
                for job in requests.takeInvalid() { failures.add(job, invalid(job)) }
                guard let job = requests.take(element.index) else { continue }
                var failure: Failure?
                var finalResponse: HTTPResponse?
                switch element.result {
                case .failure(let error):
                    failure = Failure(error)
                    finalResponse = error.response
                case .success(let (body, response)):
                    finalResponse = response
                    verboseResponse(response)
                    if let statusFailure = checkStatus(response) {
                        failStatus(job, response: response, memory: body, downloadedFile: nil)
                        failure = statusFailure
                    } else {
                        failure = emit(job, response: response, memory: body, downloadedFile: nil)
                    }
                }
                record(job, response: finalResponse, metrics: element.metrics,
                       received: element.metrics?.bodyBytesReceived ?? element.bytesReceived,
                       sent: element.metrics?.bodyBytesSent ?? 0, failure: failure)
                failures.add(job, failure)
                // The lines go out once every result received so far is
                // taken: before the next wait, so a watcher of the metrics
                // stream never waits on slower transfers, in one write per
                // loop pass rather than one per transfer.
                if results.readyCount == 0 { metrics?.flush() }
            }
            for job in requests.takeInvalid() { failures.add(job, invalid(job)) }
            return failures
        }
        // Ctrl-C cancels the batch: running requests end as cancelled,
        // queued ones never start.
        let batchID = -1
        if !interrupts.register(id: batchID, cancel: { batch.cancel() }) { batch.cancel() }
        failures = await batch.value
        interrupts.unregister(id: batchID)
        // Jobs taken but without a result, then those never taken: not started.
        let notStarted = Failure(.interrupted, "not started: the run was interrupted")
        for job in requests.takeAll() { failures.add(job, notStarted) }
        var rest = plan.jobs.makeIterator()
        while let job = rest.next() { failures.add(job, notStarted) }
    }

    /// A job without a request: its URL failed to parse.
    private func invalid(_ job: Job) -> Failure {
        let failure = job.invalidFailure ?? Failure(.invalidRequest, "invalid URL")
        record(job, task: nil, failure: failure)
        return failure
    }

    // MARK: - One job

    /// ``perform(_:)``, then counts the job as finished (its metrics line,
    /// if any, is in the writer's batch by then).
    private func performCounted(_ job: Job) async -> (Job, JobResult) {
        let result = await perform(job)
        finished.add(1, ordering: .releasing)
        return (job, result)
    }

    private func perform(_ job: Job) async -> JobResult {
        guard let request = job.request else { return JobResult(failure: invalid(job)) }
        if interrupts.isInterrupted {
            return JobResult(failure: Failure(.interrupted, "not started: the run was interrupted"))
        }
        guard let session else {
            let failure = Failure(sessionError ?? TransferError(.internalError, "no session"))
            record(job, task: nil, failure: failure)
            return JobResult(failure: failure)
        }

        if let failure = refusedBeforeRequest(job, request: request) {
            record(job, task: nil, failure: failure)
            return JobResult(failure: failure)
        }

        verbose?.info("* \(request.method) \(VerboseLog.shown(url: request.url.absoluteString))")
        if !plan.body.isEmpty || request.method == .head {
            return await performInMemory(job, request: request, session: session)
        }
        // --discard, and -o /dev/null (curl users' way to drop a body): counted, not kept.
        if job.output == .discard || job.output.isNullDevice, plan.features.serializer == nil,
            plan.features.expectedSHA256 == nil, plan.features.segments == 1
        {
            return await performInMemory(job, request: request, session: session, discarding: true)
        }
        return await performDownload(job, request: request, session: session)
    }

    /// `-O` and `--output-dir` without `--clobber`: a file already at the name
    /// the URL gives is refused before anything is sent, so a rerun of a
    /// finished batch costs no transfer. A name from Content-Disposition is
    /// known only from the response and is checked again at placement.
    private func refusedBeforeRequest(_ job: Job, request: Request) -> Failure? {
        guard case .remoteName(let directory) = job.output, !plan.clobber else { return nil }
        let path = Path.join(directory, RemoteName.make(requestURL: request.url))
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return Failure(.localFile, "not requested: \(path) exists (use --clobber to replace it)")
    }

    /// Bodiless requests: the body goes to a file from the engine (the
    /// output path, a staging name for -O, or a temporary file for stdout
    /// and --discard, which are streamed out then removed), with the
    /// download options (resume, checksum, rate) and optionally segmented.
    private func performDownload(_ job: Job, request: Request, session: SessionManager) async -> JobResult {
        let target: String
        switch job.output {
        case .file(let path):
            // -z / --etag-compare: a 304 must leave the file as it is.
            target = plan.curl.conditional ? Self.stagingName(path) : path
        case .remoteName(let directory):
            // With --resume the staging name must be the same in the next run.
            let stem = plan.features.resume ? Self.stableName(request.url.absoluteString) : "\(getpid())-\(job.index)"
            target = Path.join(directory, ".transfer-\(stem).download")
        case .stdout, .discard, .device:
            do throws(Failure) {
                target = try scratch.get() + "/\(job.index).body"
            } catch {
                record(job, task: nil, failure: error)
                return JobResult(failure: error)
            }
        }
        let targetURL = URL(fileURLWithPath: target)
        var options = plan.features.downloadOptions
        options.speedLimit = taskSpeedLimit ?? 0
        // Our own temporary file, copied out and removed: never synced.
        if job.output.isStreamed { options.synchronizesToDisk = false }

        let response: HTTPResponse?
        let error: TransferError?
        let task: TransferTask?
        var segmented: SegmentedDownload?
        if plan.features.segments > 1 {
            let download = DownloadBox<SegmentedDownload>()
            (response, error) = await withCheckedContinuation {
                (continuation: CheckedContinuation<(HTTPResponse?, TransferError?), Never>) in
                let made = session.segmentedDownload(
                    with: request, to: targetURL, segments: plan.features.segments, options: options,
                    completionHandler: { response, _, error in continuation.resume(returning: (response, error)) })
                download.value = made
                start(made, job: job, direction: .download, cancel: { made.cancel() }, resume: { made.resume() })
            }
            segmented = download.value
            task = nil
        } else {
            let box = TaskBox()
            (response, error) = await withCheckedContinuation {
                (continuation: CheckedContinuation<(HTTPResponse?, TransferError?), Never>) in
                let made = session.downloadTask(
                    with: request, to: targetURL, options: options,
                    completionHandler: { response, _, error in continuation.resume(returning: (response, error)) })
                box.task = made
                start(made, job: job, direction: .download)
            }
            task = box.task
        }
        interrupts.unregister(id: job.index)

        let failure = finishDownload(job, response: response, error: error, file: target)
        if case .file(let path) = job.output, target != path, failure == nil, access(target, F_OK) == 0,
            rename(target, path) != 0
        {
            Self.removeRegularFile(target)
        }
        // A segmented download reports no TaskMetrics: count what reached the file.
        let segmentedBytes: Int64 = segmented == nil ? 0
            : (Path.fileSize(target) ?? 0)
        if job.output.isStreamed {
            unlink(target)   // our own temporary file
        } else if failure != nil && !(plan.curl.failWithBody && failure?.status == .status) {
            // Only a body the library already placed can be at `target` (a
            // refused status, a failed check after it); a resumable failure
            // keeps `target.part` and its journal, which this leaves alone.
            // Never anything but a regular file: the user named the path.
            Self.removeRegularFile(target)
        }
        display.finish(id: job.index, succeeded: failure == nil)
        if let segmented {
            record(job, response: segmented.response, metrics: nil,
                   received: max(segmentedBytes, segmented.progress(.download).completedUnitCount), sent: 0,
                   failure: failure)
        } else {
            record(job, task: task, failure: failure)
        }
        return JobResult(failure: failure)
    }

    /// The limit each task gets (--limit-rate, or its share of --limit-rate-total).
    private var taskSpeedLimit: Int64? { plan.features.perTransferRate }

    /// A file-name-safe digest of `text` (FNV-1a, 64 bits, hex).
    private static func stableName(_ text: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return String(hash, radix: 16)
    }

    private func finishDownload(_ job: Job, response: HTTPResponse?, error: TransferError?, file: String)
        -> Failure?
    {
        if let error { return Failure(error) }
        guard let response else { return Failure(.truncated, "no response") }
        verboseResponse(response)
        if let failure = checkStatus(response) {
            failStatus(job, response: response, memory: nil, downloadedFile: file)
            return failure
        }
        if plan.features.serializer != nil {
            let body: Data
            do {
                body = try Data(contentsOf: URL(fileURLWithPath: file))
            } catch {
                return Failure(.localFile, "cannot read the downloaded body: \(Describe.error(error))")
            }
            do throws(Failure) {
                if let replaced = try plan.features.serialize(body, response: response) {
                    return emit(job, response: response, memory: replaced, downloadedFile: nil)
                }
            } catch {
                return error
            }
        }
        return emit(job, response: response, memory: nil, downloadedFile: file)
    }

    /// Requests with a body, and HEAD: the response body is small by
    /// nature and collected in memory by the library. With `discarding`
    /// (--discard): the library counts the body and stores none of it.
    private func performInMemory(_ job: Job, request: Request, session: SessionManager, discarding: Bool = false)
        async -> JobResult
    {
        let (task, response, data, error) = await withCheckedContinuation {
            (continuation: CheckedContinuation<(TransferTask?, HTTPResponse?, Data?, TransferError?), Never>) in
            let box = TaskBox()
            let handler: DataTask.CompletionHandler = { response, data, error in
                continuation.resume(returning: (box.take(), response, data, error))
            }
            let task: DataTask
            switch plan.body {
            case .none where discarding:
                task = session.discardingDataTask(with: request, completionHandler: handler)
            case .none: task = session.dataTask(with: request, completionHandler: handler)
            case .data(let bytes): task = session.uploadTask(with: request, from: bytes, completionHandler: handler)
            case .file(let path):
                task = session.uploadTask(with: request, fromFile: URL(fileURLWithPath: path), completionHandler: handler)
            case .multipart:
                task = session.uploadTask(withStreamedRequest: request, completionHandler: handler)
            case .stream(let path):
                // Read once: a redirect that needs the body again fails clearly.
                var streamed = request
                let once = OneShot()
                streamed.body = .stream(BodyStreamProvider(source: {
                    once.take() ? DescriptorBodySource(path: path) : nil
                }), length: nil)
                task = session.uploadTask(withStreamedRequest: streamed, completionHandler: handler)
            }
            box.task = task
            start(task, job: job, direction: plan.body.isEmpty ? .download : .upload)
        }
        interrupts.unregister(id: job.index)

        var failure: Failure?
        if let error {
            failure = Failure(error)
        } else if let response {
            verboseResponse(response)
            if let statusFailure = checkStatus(response) {
                failStatus(job, response: response, memory: data ?? Data(), downloadedFile: nil)
                failure = statusFailure
            } else {
                var body = data ?? Data()
                do throws(Failure) {
                    if let replaced = try plan.features.serialize(body, response: response) { body = replaced }
                    failure = emit(job, response: response, memory: body, downloadedFile: nil)
                } catch {
                    failure = error
                }
            }
        } else {
            failure = Failure(.truncated, "no response")
        }
        display.finish(id: job.index, succeeded: failure == nil)
        record(job, task: task, failure: failure)
        return JobResult(failure: failure)
    }

    /// Registers for Ctrl-C, shows progress, resumes; an interrupted run
    /// cancels instead (the completion handler still runs).
    private func start(_ task: TransferTask, job: Job, direction: ProgressDirection) {
        // Downloads carry their limit in DownloadOptions (set in the engine
        // spec before the transfer starts); other tasks only have this call.
        if !(task is DownloadTask), let rate = taskSpeedLimit { task.setSpeedLimit(receive: rate, send: rate) }
        start(task, job: job, direction: direction, cancel: { task.cancel() }, resume: { task.resume() })
    }

    private func start(_ transfer: any ObservableTransfer, job: Job, direction: ProgressDirection,
                       cancel: @escaping @Sendable () -> Void, resume: () -> Void)
    {
        guard interrupts.register(id: job.index, cancel: cancel) else {
            cancel()
            return
        }
        if display.isActive {
            display.add(id: job.index, label: displayName(job), task: transfer, direction: direction)
        }
        resume()
    }

    private func displayName(_ job: Job) -> String {
        if case .file(let path) = job.output { return Path.lastComponent(path) }
        guard let url = job.request?.url else { return job.urlString }
        let last = url.lastPathComponent
        return last.isEmpty || last == "/" ? (url.host ?? job.urlString) : last
    }

    // MARK: - Output

    private func checkStatus(_ response: HTTPResponse) -> Failure? {
        if (300..<400).contains(response.statusCode),
            let target = refusedRedirects.withLock({ $0[response.url.absoluteString] })
        {
            return Failure(.redirect, "--proto-redir: the redirect to \(target) is not allowed")
        }
        guard !plan.accepts(response.statusCode) else { return nil }
        return Failure(.status, "HTTP \(response.statusCode) (accepted: \(rangesText))")
    }

    private var rangesText: String {
        plan.acceptStatus.map { $0.lowerBound == $0.upperBound ? "\($0.lowerBound)" : "\($0.lowerBound)-\($0.upperBound)" }
            .joined(separator: ",")
    }

    /// Status line and headers to stdout, per --print / -i.
    private func headText(_ response: HTTPResponse) -> String {
        var text = ""
        if plan.print.status { text += "HTTP/\(response.httpVersion) \(response.statusCode)\n" }
        if plan.print.headers {
            for field in response.headers { text += Terminal.printable("\(field.name): \(field.value)") + "\n" }
            text += "\n"
        }
        return text
    }

    private func printHead(_ response: HTTPResponse) {
        let text = headText(response)
        if !text.isEmpty { Terminal.writeStdout(Array(text.utf8)) }
    }

    /// A status outside --accept-status: the head as asked, and with
    /// `--fail-with-body` the body too (curl's meaning); the exit stays 9.
    private func failStatus(_ job: Job, response: HTTPResponse, memory: Data?, downloadedFile: String?) {
        if plan.curl.failWithBody {
            _ = emit(job, response: response, memory: memory, downloadedFile: downloadedFile)
        } else {
            printHead(response)
        }
    }

    /// A name beside `path` for a body that may not be placed (a 304).
    private static func stagingName(_ path: String) -> String {
        let directory = Path.parent(path)
        let name = "." + Path.lastComponent(path) + ".transfer-\(getpid())"
        return directory.isEmpty ? name : Path.join(directory, name)
    }

    /// Places a successful body where the plan says. Exactly one of
    /// `memory` (bytes to write) and `downloadedFile` (already on disk) is set.
    private func emit(_ job: Job, response: HTTPResponse, memory: Data?, downloadedFile: String?) -> Failure? {
        let head = headText(response)
        if plan.curl.conditional && response.statusCode == 304 {
            // Not modified: the head if asked, no body, no file touched.
            if !head.isEmpty { Terminal.writeStdout(Array(head.utf8)) }
            if let downloadedFile, !job.output.isStreamed { unlink(downloadedFile) }
            return nil
        }
        switch job.output {
        case .discard:
            if !head.isEmpty { Terminal.writeStdout(Array(head.utf8)) }
            return nil
        case .stdout:
            let rc: Int32 = Terminal.withStdout {
                var rc = head.isEmpty ? 0 : Terminal.writeAll(STDOUT_FILENO, Array(head.utf8))
                guard rc == 0, plan.print.body else { return rc }
                if let memory {
                    rc = memory.withUnsafeBytes { Terminal.writeAll(STDOUT_FILENO, $0) }
                } else if let downloadedFile {
                    rc = Terminal.copyFileToStdoutLocked(downloadedFile)
                }
                return rc
            }
            return rc == 0 ? nil : Failure(.localFile, "cannot write to stdout: \(String(cString: strerror(rc)))")
        case .file(let path):
            if !head.isEmpty { Terminal.writeStdout(Array(head.utf8)) }
            if let memory { return place(memory, at: path) }
            return nil
        case .device(let path):
            if !head.isEmpty { Terminal.writeStdout(Array(head.utf8)) }
            guard plan.print.body else { return nil }
            let fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC)
            guard fd >= 0 else { return Failure(.localFile, "cannot open \(path): \(String(cString: strerror(errno)))") }
            defer { close(fd) }
            var rc: Int32 = 0
            if let memory {
                rc = memory.withUnsafeBytes { Terminal.writeAll(fd, $0) }
            } else if let downloadedFile {
                rc = Terminal.copyFile(downloadedFile, to: fd)
            }
            return rc == 0 ? nil : Failure(.localFile, "cannot write \(path): \(String(cString: strerror(rc)))")
        case .remoteName(let directory):
            if !head.isEmpty { Terminal.writeStdout(Array(head.utf8)) }
            let name = RemoteName.make(response: response, requestURL: job.request?.url ?? response.url)
            let path = Path.join(directory, name)
            // The name is the server's: an existing file stays unless --clobber.
            if let memory { return place(memory, at: path, replacing: plan.clobber) }
            guard let downloadedFile else { return nil }
            let err = Self.move(downloadedFile, to: path, replacing: plan.clobber)
            if err != 0 {
                unlink(downloadedFile)
                let why = err == EEXIST ? "the file exists (use --clobber to replace it)" : String(cString: strerror(err))
                return Failure(.localFile, "cannot move the download to \(path): \(why)")
            }
            verbose?.info("* saved \(path)")
            return nil
        }
    }

    /// Unlinks `path` only when it is a regular file (never a device, FIFO or directory).
    static func removeRegularFile(_ path: String) {
        var info = stat()
        if lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG { unlink(path) }
    }

    /// Writes `data` to `path.part`, then renames it to `path`; on failure
    /// nothing is left at either name.
    private func place(_ data: Data, at path: String, replacing: Bool = true) -> Failure? {
        let directory = Path.parent(path)
        if !directory.isEmpty {
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            } catch {
                return Failure(.localFile, "cannot create directory \(directory): \(Describe.error(error))")
            }
        }
        let part = path + ".part"
        // Private while written; the placed file follows the umask (best
        // effort: where modes are refused it stays private).
        let fd = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            return Failure(.localFile, "cannot create \(part): \(String(cString: strerror(errno)))")
        }
        var rc = data.withUnsafeBytes { Terminal.writeAll(fd, $0) }
        if rc == 0 { _ = fchmod(fd, FileModes.placed()) }
        if rc == 0, fsync(fd) != 0 { rc = errno }
        close(fd)
        if rc == 0 { rc = Self.move(part, to: path, replacing: replacing) }
        if rc != 0 {
            unlink(part)
            let why = rc == EEXIST ? "the file exists (use --clobber to replace it)" : String(cString: strerror(rc))
            return Failure(.localFile, "cannot write \(path): \(why)")
        }
        return nil
    }

    /// rename(2), or without `replacing` link(2) then unlink: an existing
    /// file at `path` (even one that appears just before) makes it fail with
    /// EEXIST and stays as it was. Returns 0 or an errno.
    static func move(_ source: String, to path: String, replacing: Bool) -> Int32 {
        if replacing { return rename(source, path) == 0 ? 0 : errno }
        guard link(source, path) == 0 else { return errno }
        unlink(source)
        return 0
    }

    private func verboseResponse(_ response: HTTPResponse) {
        // With libcurl's trace on, its own `<` lines describe the response.
        guard let verbose, trace == nil else { return }
        verbose.info("< HTTP/\(response.httpVersion) \(response.statusCode) \(response.url.absoluteString)")
        for field in response.headers {
            verbose.info("< \(field.name): \(VerboseLog.shown(name: field.name, value: field.value))")
        }
    }

    private func record(_ job: Job, task: TransferTask?, failure: Failure?) {
        let taskMetrics = task?.metrics
        record(job, response: task?.response, metrics: taskMetrics,
               received: taskMetrics?.bodyBytesReceived ?? task?.countOfBytesReceived ?? 0,
               sent: taskMetrics?.bodyBytesSent ?? task?.countOfBytesSent ?? 0, failure: failure)
    }

    private func record(_ job: Job, response: HTTPResponse?, metrics taskMetrics: TaskMetrics?, received: Int64,
                        sent: Int64, failure: Failure?)
    {
        let status = response?.statusCode
        if let verbose {
            let seconds = Describe.threeDecimals(max(0, taskMetrics?.total ?? 0))
            let version = taskMetrics.map { " HTTP/" + $0.httpVersion } ?? ""
            let reused = taskMetrics?.reusedConnection == true ? ", reused connection" : ""
            let shown = VerboseLog.shown(url: job.urlString)
            verbose.info("* \(shown): \(received) bytes in \(seconds) s\(version)\(reused)")
        }
        metrics?.write(MetricsWriter.Record(url: job.urlString, status: status, metrics: taskMetrics,
                                            bytesReceived: received, bytesSent: sent, failure: failure))
        recordCurl(job, response: response, metrics: taskMetrics, received: received, sent: sent, failure: failure)
    }

    /// `-D FILE`, `--etag-save FILE` and `-w`, once per transfer as it ends.
    private func recordCurl(_ job: Job, response: HTTPResponse?, metrics taskMetrics: TaskMetrics?,
                            received: Int64, sent: Int64, failure: Failure?)
    {
        let curl = plan.curl
        guard curl.dumpHeader != nil || curl.etagSave != nil || curl.writeOut != nil || curl.remoteTime else {
            return
        }
        curlOutput.withLock { _ in
            if let path = curl.dumpHeader, let response {
                var text = "HTTP/\(response.httpVersion) \(response.statusCode)\r\n"
                for field in response.headers { text += "\(field.name): \(field.value)\r\n" }
                text += "\r\n"
                let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
                if fd >= 0 {
                    _ = Terminal.writeAll(fd, Array(text.utf8))
                    close(fd)
                }
            }
            if curl.remoteTime, failure == nil, let response, response.statusCode != 304,
                let modified = response.headers["Last-Modified"].flatMap(CurlPlan.parseDate)
            {
                // curl's -R: the file's times become the server's Last-Modified.
                // Only files this run placed: never stdout, a device or --discard.
                let path = filename(job, response: response)
                let seconds = Int(modified.timeIntervalSince1970)
                var times = [timespec(tv_sec: seconds, tv_nsec: 0), timespec(tv_sec: seconds, tv_nsec: 0)]
                if !job.output.isStreamed && !path.isEmpty { _ = utimensat(AT_FDCWD, path, &times, 0) }
            }
            if let path = curl.etagSave, let response, failure == nil,
                response.statusCode != 304 || response.headers["ETag"] != nil
            {
                // curl's rule: the ETag as sent, or an empty file without one
                // (a 304 without one keeps the file: it is still current).
                let etag = response.headers["ETag"].map { $0 + "\n" } ?? ""
                try? Data(etag.utf8).write(to: URL(fileURLWithPath: path))
            }
            if let format = curl.writeOut {
                let values = WriteOutValues(
                    index: job.index, url: job.urlString, method: job.request?.method.rawValue ?? "GET",
                    response: response, metrics: taskMetrics, bytesReceived: received, bytesSent: sent,
                    failure: failure, filename: filename(job, response: response),
                    referer: job.request?.headers["Referer"])
                for (fd, bytes) in format.render(values) {
                    if fd == STDERR_FILENO { Terminal.writeStderr(bytes) } else { Terminal.writeStdout(bytes) }
                }
            }
        }
    }

    /// `%{filename_effective}`: the file the body went to, "" for stdout and --discard.
    private func filename(_ job: Job, response: HTTPResponse?) -> String {
        switch job.output {
        case .file(let path), .device(let path): return path
        case .remoteName(let directory):
            let url = job.request?.url
            let name = response.map { RemoteName.make(response: $0, requestURL: url ?? $0.url) }
                ?? url.map { RemoteName.make(requestURL: $0) } ?? ""
            return Path.join(directory, name)
        case .stdout, .discard: return ""
        }
    }
}

/// Lets a completion handler see the task it belongs to (set right after
/// creation; a task of an invalidated session may complete before that).
/// The handler must ``take()`` it: the task holds its handler, the handler
/// this box, so a box still holding the task would be a retain cycle.
private final class TaskBox: Sendable {
    private let value = Protected<TransferTask?>(nil)
    var task: TransferTask? {
        get { value.withLock { $0 } }
        set { value.withLock { $0 = newValue } }
    }

    /// The task, leaving the box empty.
    func take() -> TransferTask? {
        value.withLock { slot in
            defer { slot = nil }
            return slot
        }
    }
}

/// Holds an object made inside a continuation closure for use after it.
private final class DownloadBox<T: AnyObject & Sendable>: Sendable {
    private let slot = Protected<T?>(nil)
    var value: T? {
        get { slot.withLock { $0 } }
        set { slot.withLock { $0 = newValue } }
    }
}

/// The failures of a run, by input position: what the end of the run prints
/// (one line each, in input order) and what decides the exit code.
struct FailureLog {
    private var entries: [(index: Int, line: String, status: ExitStatus)] = []

    mutating func add(_ job: Job, _ failure: Failure?) {
        guard let failure else { return }
        entries.append((job.index, failure.line(url: job.urlString), failure.status))
    }

    func inInputOrder() -> [(index: Int, line: String, status: ExitStatus)] {
        entries.sorted { $0.index < $1.index }
    }
}

/// The requests of a `--discard` batch, taken from the job list as the batch
/// asks for them. The batch numbers only the requests it got; this keeps the
/// jobs between the two (at most the batch's window) and the jobs without a
/// request, which never reach the batch.
struct BatchRequests: Sequence, Sendable {
    let jobs: JobList
    let verbose: Bool
    private let state = Protected(State())

    private struct State {
        /// Jobs handed to the batch, by the batch's index, until their result is taken.
        var out: [Int: Job] = [:]
        var invalid: [Job] = []
    }

    init(jobs: JobList, verbose: Bool) {
        self.jobs = jobs
        self.verbose = verbose
    }

    struct Iterator: IteratorProtocol {
        let owner: BatchRequests
        var jobs: JobList.Iterator
        var position = 0

        mutating func next() -> Request? {
            while let job = jobs.next() {
                guard let request = job.request else {
                    owner.state.withLock { $0.invalid.append(job) }
                    continue
                }
                if owner.verbose {
                    Terminal.note(Terminal.printable("* \(request.method) \(VerboseLog.shown(url: request.url.absoluteString))"))
                }
                let index = position
                position += 1
                owner.state.withLock { $0.out[index] = job }
                return request
            }
            return nil
        }
    }

    func makeIterator() -> Iterator { Iterator(owner: self, jobs: jobs.makeIterator()) }

    /// The job of the batch's request `index`, once.
    func take(_ index: Int) -> Job? { state.withLock { $0.out.removeValue(forKey: index) } }

    /// The jobs without a request met so far.
    func takeInvalid() -> [Job] {
        state.withLock { state in
            defer { state.invalid.removeAll() }
            return state.invalid
        }
    }

    /// Every job handed out and not taken, in input order (after a cancel).
    func takeAll() -> [Job] {
        state.withLock { state in
            defer { state.out.removeAll() }
            return state.out.values.sorted { $0.index < $1.index }
        }
    }
}
