import FoundationEssentials
import Glibc
import Synchronization

/// The value `data(for:)` produces, on either path.
typealias DataResult = Result<(Data, HTTPResponse), TransferError>

/// One request on the fast path (see ``SessionManager/data(for:)``): the
/// engine's target for its transfer, with no task, delegate, progress or
/// notification around it.
///
/// Its whole life: built and submitted by the caller (one registry lock),
/// response head copied on the loop thread (not parsed), result built on
/// the loop thread at finish, and the caller resumed (or the batch fed) at
/// the end of that loop pass.
final class FastRequest: EngineTarget, FastCancellable, @unchecked Sendable {
    // @unchecked Sendable: `continuation` and `callerPriority` are written
    // once before submit (the engine's queue lock orders them before the
    // loop reads them); `status`, `version`, `effectiveURL`, `rawHeaders`
    // are written and read on the loop thread only; `outcome` is written on
    // the loop thread and taken there or by the job that resumes callers,
    // which the loop starts after writing it; `state` is atomic; the rest
    // is immutable. Those ordered accesses are why the mutable properties
    // skip the dynamic exclusivity check (`@exclusivity(unchecked)`): it
    // cost a runtime call per access, several per request.

    let request: Request
    let session: SessionManager
    /// The batch this request belongs to (nil: a lone `data(for:)` call), and its place in it.
    let run: BatchRun?
    let index: Int
    /// Its place in its batch's list of requests in the engine
    /// (``InFlightList``): set under that list's lock before the request is
    /// submitted, read by the loop thread once it has finished.
    @exclusivity(unchecked) var slot = -1
    /// A lone request's slot in the session's registry of work in flight
    /// (``FastRegistry``): set when it is admitted, before it is submitted.
    @exclusivity(unchecked) var registrySlot = -1
    @exclusivity(unchecked) var continuation: UnsafeContinuation<DataResult, Never>?
    /// The priority of the task awaiting `continuation`: the job that
    /// resumes several callers at once runs at the highest of theirs.
    @exclusivity(unchecked) var callerPriority: TaskPriority = .medium

    /// 0 before submit, then the engine id, then `finishedMark`; or
    /// `cancelledMark` once cancelled (before or while in the engine).
    private let state = Atomic<UInt64>(0)
    private static let cancelledMark = UInt64.max
    private static let finishedMark = UInt64.max - 1

    @exclusivity(unchecked) private var status = 0
    @exclusivity(unchecked) private var version: Int32 = 0
    /// The URL after redirects; nil when it is the request's.
    @exclusivity(unchecked) private var effectiveURL: String?
    @exclusivity(unchecked) private var rawHeaders: String?
    @exclusivity(unchecked) private var setsCookies = false
    /// Set at finish (loop thread), handed over at the end of the pass.
    @exclusivity(unchecked) private var outcome: BatchResult?
    /// What event monitors get (``EventMonitor/requestDidComplete(_:)``),
    /// made at finish only when some monitor wants it; taken at the end of
    /// the pass (loop thread).
    @exclusivity(unchecked) var completion: CompletedRequest?
    /// What the session's request instruments returned for this request
    /// (``RequestInstrument``); empty without instruments.
    let observers: [any RequestObserver]
    /// Whether the engine collects this request's timings: the batch asked
    /// for metrics, or an observer, event monitor or the completion
    /// notification was there when it started. Without, the result has
    /// only its byte counts (`CT_FLAG_NO_METRICS`).
    let collectsMetrics: Bool

    /// The result, leaving none behind (a batch keeps its requests until it ends).
    func takeOutcome() -> BatchResult? {
        // Moved out, not copied and destroyed: a result is a few hundred
        // bytes with its metrics, and this runs once per request.
        outcome.take()
    }

    init(session: SessionManager, request: consuming Request, run: BatchRun? = nil, index: Int = 0,
         observers: [any RequestObserver] = [])
    {
        self.session = session
        self.request = request
        self.observers = observers
        self.run = run
        self.index = index
        collectsMetrics = Self.collectsMetrics(session: session, run: run, observed: !observers.isEmpty)
    }

    /// Whether a request of `session` (of `run`, with observers or not) has
    /// its timings collected: known before its target is made, so that its
    /// spec can be built from the request itself (a `Request` read back from
    /// the target is copied).
    static func collectsMetrics(session: SessionManager, run: BatchRun?, observed: Bool) -> Bool {
        run?.options.collectsMetrics == true || observed
            || session.observation.wantsCompletions || TransferEvents.postsTasklessCompletions
    }

    var isCancelled: Bool { state.load(ordering: .acquiring) == Self.cancelledMark }

    // MARK: - Lone requests (`data(for:)`)

    /// Caller's thread, inside the continuation: submits, or resumes at once
    /// when the request cannot start. `sent` is this request's ``request``,
    /// passed in by the caller that still holds it: read back from this
    /// object, a `Request` is copied.
    func start(_ sent: Request) {
        if Task.isCancelled || isCancelled {
            return fail(TransferError(.cancelled, "cancelled", url: request.url))
        }
        guard let admitted = session.engine.pass.registry.admit(self, late: SessionAdmission.admits(session)) else {
            return fail(SessionManager.invalidatedError(url: request.url))
        }
        registrySlot = admitted
        let strings = CStrings()
        defer { strings.free() }
        var spec: TransferSpec
        do throws(TransferError) {
            spec = try session.fastSpec(for: sent, strings: strings, discardsBody: false,
                                        collectsMetrics: collectsMetrics)
        } catch {
            session.engine.pass.registry.remove(slot: registrySlot)
            return fail(error)
        }
        switch session.engine.submit(&spec, target: self) {
        case .failure(var error):
            session.engine.pass.registry.remove(slot: registrySlot)
            error.url = request.url
            fail(error)
        case .success(let id):
            didSubmit(id: id)
        }
    }

    /// Fails a request that never reached the engine (its observers hear of it).
    private func fail(_ error: TransferError) {
        let completed = CompletedRequest(request: request, response: nil, metrics: nil, error: error,
                                         taskIdentifier: nil)
        for observer in observers { observer.requestDidComplete(completed) }
        resume(.failure(error))
    }

    private func resume(_ result: DataResult) {
        let continuation = self.continuation
        self.continuation = nil
        continuation?.resume(returning: result)
    }

    /// At the end of the pass this request finished in: on the loop thread,
    /// or in the job that resumes that pass's callers (``EnginePass``).
    func resumeCaller() {
        guard let outcome = takeOutcome() else { return }
        resume(outcome.result)
    }

    // MARK: - Engine id and cancellation (any thread)

    /// Records the engine id; a cancel that came meanwhile is sent now.
    func didSubmit(id: UInt64) {
        let (exchanged, seen) = state.compareExchange(expected: 0, desired: id, ordering: .acquiringAndReleasing)
        if !exchanged && seen == Self.cancelledMark { session.engine.cancel(id) }
    }

    /// Cancels: a request not yet submitted will not be; one in the engine
    /// finishes as cancelled; a finished one is left alone.
    func cancel() {
        var current = state.load(ordering: .acquiring)
        while current != Self.cancelledMark && current != Self.finishedMark {
            let (exchanged, seen) = state.compareExchange(expected: current, desired: Self.cancelledMark,
                                                         ordering: .acquiringAndReleasing)
            if exchanged {
                if current != 0 { session.engine.cancel(current) }
                return
            }
            current = seen
        }
    }

    // MARK: - Engine events (loop thread)

    override func engineDidReceiveResponse(_ head: EngineResponseHead) {
        // Copied, not parsed: HTTPResponse parses on first access.
        status = head.status
        version = head.httpVersion
        effectiveURL = head.changedURL
        rawHeaders = head.rawHeaders
        setsCookies = head.hasSetCookie
    }

    override func engineWillFollowRedirect(status: Int, from: UnsafePointer<CChar>, to location: UnsafePointer<CChar>) {
        if observers.isEmpty { return }
        observers.redirect(from: String(cString: from), to: String(cString: location), statusCode: status)
    }

    override func engineDidFinish(_ result: EngineResult) {
        var current = state.load(ordering: .acquiring)
        while current != Self.finishedMark {
            let (exchanged, seen) = state.compareExchange(expected: current, desired: Self.finishedMark,
                                                         ordering: .acquiringAndReleasing)
            if exchanged { break }
            current = seen
        }
        var response: HTTPResponse?
        if let rawHeaders {
            let url = effectiveURL.flatMap { URL(string: $0) } ?? request.url
            let built = HTTPResponse(url: url, statusCode: status, rawHeaderBlock: rawHeaders,
                                     httpVersion: EngineResponseHead.versionString(version))
            response = built
            // The cookie store keeps what libcurl drops (SameSite, time),
            // as the task path does at the head; only when a cookie came.
            if setsCookies, session.cookieStore != nil {
                session.noteCookies(of: built, for: request)
            }
        }
        let value: DataResult
        if result.succeeded, let response {
            // The C buffer is adopted, not copied.
            value = .success((result.takeBody(), response))
        } else if result.succeeded {
            result.discardBody()
            value = .failure(TransferError(.badResponse, "no response", url: request.url))
        } else {
            // Rare: the full copy of the result, as the task path makes it.
            var error = result.outcome.error(url: request.url)!
            if error.response == nil { error.response = response }
            value = .failure(error)
        }
        let wantsCompletion = session.observation.wantsCompletions || TransferEvents.postsTasklessCompletions
        let observed = !observers.isEmpty
        let batchMetrics = run?.options.collectsMetrics == true
        if wantsCompletion || observed {
            // A monitor added while the request ran gets no timings: the
            // engine did not collect them.
            let metrics = collectsMetrics ? result.metrics : nil
            let error: TransferError?
            if case .failure(let failure) = value { error = failure } else { error = nil }
            let completed = CompletedRequest(request: request, response: response, metrics: metrics, error: error,
                                             taskIdentifier: nil)
            if wantsCompletion { completion = completed }
            // Inline, before the caller is resumed (see RequestObserver).
            for observer in observers { observer.requestDidComplete(completed) }
        }
        // Last: `value` moves into the outcome instead of being copied.
        outcome = BatchResult(index: index, result: value, metrics: batchMetrics && collectsMetrics ? result.metrics : nil,
                              bytesReceived: result.bodyBytesReceived)
        session.engine.pass.didFinish(self)
    }
}

extension SessionManager {
    static func invalidatedError(url: URL) -> TransferError {
        TransferError(.sessionInvalidated, "the session was invalidated; no new task can start", url: url)
    }

    /// Sends `request` on the fast path (see ``data(for:)`` for when).
    func fastData(for request: Request) async throws(TransferError) -> (Data, HTTPResponse) {
        let fast: FastRequest
        let instrumented: Request?
        if observation.instruments.isEmpty {
            // One copy of the request: into its FastRequest.
            fast = FastRequest(session: self, request: request)
            instrumented = nil
        } else {
            var changed = request
            let observers = observation.instruments.start(&changed)
            instrumented = changed
            fast = FastRequest(session: self, request: consume changed, observers: observers)
        }
        let result = await withTaskCancellationHandler {
            await withUnsafeContinuation { (continuation: UnsafeContinuation<DataResult, Never>) in
                fast.continuation = continuation
                fast.callerPriority = Task.currentPriority
                if let instrumented { fast.start(instrumented) } else { fast.start(request) }
            }
        } onCancel: {
            fast.cancel()
        }
        return try result.get()
    }
}

extension SessionManager {
    /// Whether `data(for:)` and batches skip the task layer: no hook, no
    /// delegate, nobody observing the task notifications, no event monitor,
    /// no logger at debug level or below (one at info to error keeps it: the
    /// fast path logs its own failures), no session interceptor (a
    /// request's own interceptor is checked per request: ``takesFastPath(_:)``).
    /// Progress and metrics callbacks need a task, so they count as hooks here.
    var usesFastPath: Bool {
        fastPathOpen.load(ordering: .relaxed) && !TransferEvents.isObserved
            && !observation.blocksFastPath && !configuration.hasInterceptor
    }

    /// Whether `request` may skip the task layer: ``usesFastPath``, no body,
    /// no interceptor, no credential of its own (the task answers 401s), no
    /// logger of its own at debug or below (``Request/logger``),
    /// and no response cache that may answer it or must see its response
    /// (with none configured this costs one nil check).
    func takesFastPath(_ request: Request) -> Bool {
        request.body == nil && !request.hasInterceptor && request.credential == nil
            && request.loggerReference?.logsDebug != true
            && (responseCache == nil || request.method == .head) && usesFastPath
    }

    /// Called whenever hooks or the delegate change (under the session's
    /// lock): the seam for anything else that must see every request.
    static func allowsFastPath(hooks: SessionHooks, delegate: (any SessionDelegate)?) -> Bool {
        guard delegate == nil else { return false }
        // Any hook, present or added later: none of them may be skipped.
        for child in Mirror(reflecting: hooks).children {
            let value = Mirror(reflecting: child.value)
            if value.displayStyle != .optional || !value.children.isEmpty { return false }
        }
        return true
    }
}
