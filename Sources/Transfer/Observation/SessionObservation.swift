import Dispatch
import FoundationEssentials
import Glibc
import Logging
import Synchronization

/// The one object the task lifecycle calls per event: it hands the event to
/// every ``EventMonitor`` (each on its queue) and to the session's logger.
///
/// Cost when nobody listens: every entry point first reads ``isActive`` (a
/// constant and one relaxed atomic load) and returns; nothing is built or
/// allocated. The lifecycle must call the entry points in the order the
/// events happen for a task, before acting on them (before submitting,
/// before cancelling), so each monitor's serial queue sees them in order.
final class SessionObservation: Sendable {
    let logger: Logger?
    /// Applied to every message and metadata value as it is emitted.
    let redaction: LogRedaction
    /// Precomputed from the logger's level (read once, when the session is made).
    let logsDebug: Bool
    /// libcurl's verbose trace is asked for (``TransferFlags/trace``).
    let tracesCurl: Bool
    /// A monitor that wants the per-task events: requests need tasks then.
    private let monitorsPresent: Atomic<Bool>
    /// Any monitor at all: every one gets ``EventMonitor/requestDidComplete(_:)``.
    private let completionsWanted: Atomic<Bool>
    /// The monitors of ``monitorsPresent``.
    private let monitors: Protected<[any EventMonitor]>
    /// Every monitor.
    private let completionMonitors: Protected<[any EventMonitor]>
    /// Events handed to monitors so far, counted one per monitor (for
    /// tests: a session without monitors must stay at 0).
    private let dispatched = Atomic<Int>(0)

    /// ``SessionConfiguration/requestInstruments``, fixed when the session is made.
    let instruments: [any RequestInstrument]

    init(_ settings: ObservationSettings) {
        instruments = settings.instruments
        logger = settings.logger
        redaction = settings.redaction
        let level = settings.logger?.logLevel
        logsDebug = level.map { $0 <= .debug } ?? false
        tracesCurl = level == .trace
        let lifecycle = settings.monitors.filter { $0.interests.contains(.taskLifecycle) }
        monitorsPresent = Atomic(!lifecycle.isEmpty)
        monitors = Protected(lifecycle)
        completionsWanted = Atomic(!settings.monitors.isEmpty)
        completionMonitors = Protected(settings.monitors)
    }

    /// At least one monitor is registered.
    var hasEventMonitors: Bool { monitorsPresent.load(ordering: .relaxed) }

    /// Requests must go through the task layer, which reports to the
    /// logger and the monitors: a monitor, or a logger at debug. A logger at
    /// info or above keeps the fast path: it gets no per-request record
    /// (failures are the caller's to judge, and are logged at debug).
    var blocksFastPath: Bool { logsDebug || monitorsPresent.load(ordering: .relaxed) }

    /// Someone wants lifecycle events of some task: a monitor, or a logger at
    /// debug (the session's; a request's own logger: ``isActive(for:)``).
    var isActive: Bool { logsDebug || monitorsPresent.load(ordering: .relaxed) }

    /// Someone wants the lifecycle events of `task`: a monitor, or the
    /// logger of its lines (``logger(for:)``) at debug.
    func isActive(for task: TransferTask) -> Bool {
        logsDebug(task) || monitorsPresent.load(ordering: .relaxed)
    }

    /// The logger of `task`'s lines: its request's own (``Request/logger``),
    /// else the session's.
    func logger(for task: TransferTask) -> Logger? {
        task.originalRequest.loggerReference?.logger ?? logger
    }

    /// Whether the logger of `task`'s lines is at debug or below.
    func logsDebug(_ task: TransferTask) -> Bool {
        task.originalRequest.loggerReference.map(\.logsDebug) ?? logsDebug
    }

    /// Whether libcurl's trace is wanted for `task` (its logger at trace).
    func tracesCurl(_ task: TransferTask) -> Bool {
        task.originalRequest.loggerReference.map(\.logsTrace) ?? tracesCurl
    }

    /// Some monitor wants ``EventMonitor/requestDidComplete(_:)`` (every monitor does).
    var wantsCompletions: Bool { completionsWanted.load(ordering: .relaxed) }

    func add(_ monitor: any EventMonitor) {
        completionMonitors.withLock { $0.append(monitor) }
        completionsWanted.store(true, ordering: .releasing)
        guard monitor.interests.contains(.taskLifecycle) else { return }
        monitors.withLock { $0.append(monitor) }
        monitorsPresent.store(true, ordering: .releasing)
    }

    /// Hands `completions` (in the order they finished) to every monitor:
    /// one hop per monitor, however many there are (a loop pass of the fast
    /// path hands over all of its requests at once).
    func requestsDidComplete(_ completions: [CompletedRequest]) {
        guard completionsWanted.load(ordering: .acquiring), !completions.isEmpty else { return }
        let current = completionMonitors.withLock { $0 }
        dispatched.add(current.count, ordering: .relaxed)
        for monitor in current {
            monitor.queue.async {
                for completion in completions { monitor.requestDidComplete(completion) }
            }
        }
    }

    /// Queues `body` on each monitor's queue.
    private func fanOut(_ body: @escaping @Sendable (any EventMonitor) -> Void) {
        guard monitorsPresent.load(ordering: .acquiring) else { return }
        let current = monitors.withLock { $0 }
        dispatched.add(current.count, ordering: .relaxed)
        for monitor in current {
            monitor.queue.async { body(monitor) }
        }
    }

    var dispatchedEvents: Int { dispatched.load(ordering: .relaxed) }

    private func metadata(_ task: TransferTask) -> Logger.Metadata {
        ["transfer.task": "\(task.taskIdentifier)"]
    }

    // MARK: - Lifecycle (any thread; never blocks, never runs user code here)

    func taskDidCreate(_ task: TransferTask) {
        guard hasEventMonitors else { return }
        fanOut { $0.taskDidCreate(task) }
    }

    /// For request adapters (interceptors): the request went out as `result`.
    func task(_ task: TransferTask, didAdapt request: Request, result: Result<Request, TransferError>) {
        guard isActive(for: task) else { return }
        if logsDebug(task), case .failure(let error) = result {
            logger(for: task)?.debug("adapter failed: \(error.code)", metadata: redaction.redacting(metadata(task)))
        }
        fanOut { $0.task(task, didAdaptRequest: request, result: result) }
    }

    /// The task starts (first resume) or continues after a suspend.
    func taskDidResume(_ task: TransferTask, starting: Bool) {
        guard isActive(for: task) else { return }
        if logsDebug(task) && starting {
            let request = task.originalRequest
            var meta = metadata(task)
            meta["transfer.method"] = "\(request.method.rawValue)"
            meta["transfer.url"] = "\(redaction.redacting(request.url))"
            let headers = task.session.configuration.httpAdditionalHeaders.merging(request.headers)
            meta["transfer.request.headers"] = redaction.metadata(headers)
            logger(for: task)?.debug("start \(request.method.rawValue) \(redaction.redacting(request.url))",
                          metadata: redaction.redacting(meta))
        }
        fanOut { $0.taskDidResume(task) }
    }

    func taskDidCancel(_ task: TransferTask) {
        guard isActive(for: task) else { return }
        fanOut { $0.taskDidCancel(task) }
    }

    /// Loop thread or delegate queue: the final response head.
    func task(_ task: TransferTask, didReceive response: HTTPResponse) {
        guard hasEventMonitors else { return }
        // A redirect that a hook may follow in Swift is not the response of
        // the task yet: it is reported as a redirect, or, if the hook
        // refuses it, as the response then (redirectRefused(_:response:)).
        if (300..<400).contains(response.statusCode), response.headers["Location"] != nil,
            task.session.handlesRedirectsManually
        {
            return
        }
        fanOut { $0.task(task, didReceiveResponse: response) }
    }

    /// A redirect hook refused to follow `response`: it is the task's response.
    func task(_ task: TransferTask, redirectRefused response: HTTPResponse) {
        guard hasEventMonitors else { return }
        fanOut { $0.task(task, didReceiveResponse: response) }
    }

    /// A redirect the task follows. `logNow` false: the caller is the engine
    /// thread, so the log record is posted to the delegate queue.
    func task(_ task: TransferTask, willRedirectFrom from: URL, to: URL, statusCode: Int, onEngineThread: Bool) {
        guard isActive(for: task) else { return }
        if logsDebug(task), let logger = logger(for: task) {
            var meta = metadata(task)
            meta["transfer.status"] = "\(statusCode)"
            let message: Logger.Message =
                "redirect \(statusCode) \(redaction.redacting(from)) -> \(redaction.redacting(to))"
            let redacted = redaction.redacting(meta)
            if onEngineThread {
                task.session.mailbox.post { logger.debug(message, metadata: redacted) }
            } else {
                logger.debug(message, metadata: redacted)
            }
        }
        fanOut { $0.task(task, willRedirectFrom: from, to: to, statusCode: statusCode) }
    }

    /// For the retry policy: `attempt` (1 for the first retry) after `error`.
    func task(_ task: TransferTask, willRetry attempt: Int, after error: TransferError) {
        guard isActive(for: task) else { return }
        if logsDebug(task) {
            var meta = metadata(task)
            meta["transfer.attempt"] = "\(attempt)"
            meta["transfer.error"] = "\(error.code)"
            logger(for: task)?.debug("retry \(attempt) after \(error.code)", metadata: redaction.redacting(meta))
        }
        fanOut { $0.task(task, willRetry: attempt, after: error) }
    }

    /// Delegate queue, once per task. `asRequest`: the task is one request
    /// to `.completion` monitors (false when its wire requests were each).
    func taskDidComplete(_ task: TransferTask, metrics: TaskMetrics?, error: TransferError?, asRequest: Bool = true) {
        guard isActive(for: task) || wantsCompletions else { return }
        log(completionOf: task, metrics: metrics, error: error)
        defer {
            // After the task's own events: a monitor's queue is serial.
            if wantsCompletions && asRequest {
                requestsDidComplete([CompletedRequest(request: task.originalRequest, response: task.response,
                                                      metrics: metrics, error: error,
                                                      taskIdentifier: task.taskIdentifier)])
            }
        }
        fanOut { monitor in
            if let metrics, !metrics.reusedConnection {
                if metrics.nameLookup >= 0 { monitor.task(task, didFinishNameLookupIn: metrics.nameLookup) }
                if metrics.connect >= 0 { monitor.task(task, didConnectIn: metrics.connect) }
                if metrics.tlsHandshake > 0 { monitor.task(task, didFinishTLSHandshakeIn: metrics.tlsHandshake) }
            }
            monitor.task(task, didCompleteWith: metrics, error: error)
        }
    }

    private func logFailure(of request: Request, _ error: TransferError, metadata: Logger.Metadata,
                            to logger: Logger)
    {
        var meta = metadata
        meta["transfer.error"] = "\(error.code)"
        if let status = error.httpStatus { meta["transfer.status"] = "\(status)" }
        if let curl = error.curlCode { meta["transfer.curlCode"] = "\(curl)" }
        // The message may quote URLs (a refused redirect's Location, a cache
        // miss, curl's own text): redacted here, where the record is emitted.
        // At debug: the error is the caller's, who decides whether it is one
        // for the service (swift-log's guidance for libraries).
        let message = redaction.redacting(text: error.message)
        logger.debug("failed \(redaction.redacting(request.url)): \(error.code): \(message)",
                     metadata: redaction.redacting(meta))
    }

    private func log(completionOf task: TransferTask, metrics: TaskMetrics?, error: TransferError?) {
        guard logsDebug(task), let logger = logger(for: task) else { return }
        if let error, error.code != .cancelled {
            logFailure(of: task.originalRequest, error, metadata: metadata(task), to: logger)
            return
        }
        var meta = metadata(task)
        let response = task.response
        let status = response.map { String($0.statusCode) } ?? "-"
        let received = metrics?.bodyBytesReceived ?? task.countOfBytesReceived
        let sent = metrics?.bodyBytesSent ?? task.countOfBytesSent
        let seconds = cFormat("%.3f", max(0, metrics?.total ?? 0))
        meta["transfer.status"] = "\(status)"
        meta["transfer.bytesReceived"] = "\(received)"
        meta["transfer.bytesSent"] = "\(sent)"
        meta["transfer.duration"] = "\(seconds)"
        if let response { meta["transfer.response.headers"] = redaction.metadata(response.headers) }
        let outcome = error == nil ? "completed" : "cancelled"
        logger.debug("\(outcome) \(status), \(received) bytes in \(seconds) s", metadata: redaction.redacting(meta))
    }

    // MARK: - Engine events (loop thread)

    /// A redirect the engine follows by itself (loop thread; only while a
    /// monitor is active): `location` as sent, resolved against `from`.
    func task(_ task: TransferTask, willFollowRedirectFrom from: String, to location: String, statusCode: Int) {
        guard let fromURL = URL(string: from), let toURL = URL(string: location, relativeTo: fromURL)?.absoluteURL
        else { return }
        self.task(task, willRedirectFrom: fromURL, to: toURL, statusCode: statusCode, onEngineThread: true)
    }

    /// One redacted line of libcurl's trace: posted to the delegate queue
    /// (the logger's handler is user code and never runs on the engine).
    func trace(_ task: TransferTask, kind: TraceLineKind, line: String) {
        guard tracesCurl(task), let logger = logger(for: task) else { return }
        let prefix: String
        switch kind {
        case .headerIn: prefix = "< "
        case .headerOut: prefix = "> "
        case .text: prefix = "* "
        }
        let meta = metadata(task)
        // The engine redacted the built-in credential headers already; the
        // names added by the configuration, URL user info (a Location line)
        // and secret query values in request lines and curl's notes go here.
        let text = prefix + redaction.redacting(traceLine: line)
        task.session.mailbox.post { logger.trace("\(text)", metadata: meta) }
    }
}
