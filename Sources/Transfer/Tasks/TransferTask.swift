import Dispatch
import FoundationEssentials
import Glibc
import Synchronization

/// A transfer run by a ``SessionManager``: the Linux spelling of
/// `NSURLSessionTask`. Subclasses: ``DataTask``, ``UploadTask``, ``DownloadTask``.
///
/// Tasks start suspended; ``resume()`` starts them. State changes are
/// reflected in ``state``, in the notifications, and in observers, in order
/// and exactly once.
public class TransferTask: ObservableTransfer, Hashable, CustomStringConvertible, @unchecked Sendable {
    // @unchecked Sendable: every mutable field lives in `core` (a Protected lock); the
    // rest is immutable, and `counterBlock` is written by the engine thread with
    // atomics and read here with atomic loads (Bridging/EngineRoute.swift).

    /// A number unique among the session's tasks.
    public let taskIdentifier: Int
    /// The request the task was made with.
    public let originalRequest: Request
    let session: SessionManager
    /// The engine's byte counters for this transfer. A download task that
    /// took a data task's transfer over shares the data task's block.
    let counterBlock: CounterBlock
    let core: Protected<Core>
    package let delegate: TaskDelegate
    /// Attempts sent and interceptor work between them (TransferTask+Attempts).
    let attempts = AttemptLedger()

    struct Core {
        /// The lifecycle: the only place state, engine id and pending
        /// requests live (see ``TaskStateMachine``).
        var life = TaskStateMachine<DownloadTask>()
        /// The route of the transfer in the engine, while one is there (the
        /// engine's event box holds it; become-download swaps its target).
        weak var route: EngineRoute?
        var taskDescription: String?
        var currentRequest: Request?
        var response: HTTPResponse?
        var metrics: TaskMetrics?
        var priority: Float = 0.5
        var upload = TransferProgress(completedUnitCount: 0, totalUnitCount: -1)
        var download = TransferProgress(completedUnitCount: 0, totalUnitCount: -1)
        var progressDeliveryPending = false
        var nextObserverID = 0
        var progressObservers: [Int: ProgressObserver] = [:]
        var stateObservers: [Int: StateObserver] = [:]
        var resumeDataHandler: (@Sendable (Data?) -> Void)?
        /// Set by ``setSpeedLimit(receive:send:)``; applied at start and while running.
        var speedLimit: SpeedLimit?
        var redirects = 0
        var challenges = 0
        /// The user/password answered to a 401, the scheme it answers, and the
        /// URL it was answered for: it is sent again only to that origin
        /// (``RedirectPolicy``).
        var credential: (value: Credential, schemes: EngineAuthSchemes, url: URL)?
        /// The user/password sent with the hop now running, if any.
        var credentialInFlight: Credential?
        /// The response a `becomeDownload` answer was for, while it waits for
        /// the engine id (TaskStateMachine.EngineCommands).
        var responseToBecomeDownload: HTTPResponse?
        /// The adapter, retrier or retry delay running between two attempts,
        /// while `life` awaits the attempt (a cancel stops it).
        var pendingAttempt: Task<Void, Never>?
        /// Credentials a server answered with a 401 for this task: never sent again.
        var refusedCredentials: [Credential] = []
        var lastDelivered: (upload: TransferProgress, download: TransferProgress)?
        var lastSent: Int64 = 0
        /// The cached entry the hop in the engine revalidates (DataTask+Cache).
        var cacheRevalidating: CachedResponse?
    }

    struct ProgressObserver {
        var direction: ProgressDirection
        var queue: DispatchQueue
        var handler: @Sendable (TransferProgress) -> Void
    }

    struct StateObserver {
        var queue: DispatchQueue
        var handler: @Sendable (TaskState) -> Void
    }

    /// - Parameter adopting: For a task that takes over a transfer already
    ///   in the engine (become-download): its id and counters.
    /// What the session's request instruments returned for this task's request.
    let requestObservers: [any RequestObserver]

    /// - Parameter instrumented: False for a task whose wire requests each
    ///   get their own instrument observers (a segmented download's probe and
    ///   ranges): the task then has none of its own.
    init(session: SessionManager, identifier: Int, request: Request, delegate: TaskDelegate,
         adopting: (id: UInt64, counters: CounterBlock)? = nil, instrumented: Bool = true)
    {
        self.session = session
        self.taskIdentifier = identifier
        // The request instruments see it here, on the creating thread, and
        // may add headers (a become-download continues the data task's request).
        var request = request
        requestObservers = adopting == nil && instrumented ? session.observation.instruments.start(&request) : []
        self.originalRequest = request
        self.delegate = delegate
        counterBlock = adopting?.counters ?? CounterBlock()
        var initial = Core()
        initial.currentRequest = request
        if let adopting { initial.life = TaskStateMachine(adoptingEngineTransfer: adopting.id) }
        core = Protected(initial)
    }

    // MARK: - Public state

    /// Free text for your own use (URLSessionTask's `taskDescription`).
    public var taskDescription: String? {
        get { core.withLock { $0.taskDescription } }
        set { core.withLock { $0.taskDescription = newValue } }
    }

    /// The request being sent now: after redirects and adapters, the last one.
    public var currentRequest: Request? { core.withLock { $0.currentRequest } }
    /// The response head, once it arrived.
    public var response: HTTPResponse? { core.withLock { $0.response } }
    public var state: TaskState {
        let (visible, successor) = core.withLock { ($0.life.visibleState, $0.life.successor) }
        // A data task that became a download is as far along as its successor.
        return successor?.state ?? visible
    }
    /// Why the task failed, once it completed with an error.
    public var error: TransferError? { core.withLock { $0.life.completionError ?? nil } }
    /// Timing of the finished task (nil until it completes).
    public var metrics: TaskMetrics? { core.withLock { $0.metrics } }

    /// 0...1, as URLSessionTask.priority; higher runs first when the engine queues.
    public var priority: Float {
        get { core.withLock { $0.priority } }
        set { core.withLock { $0.priority = min(1, max(0, newValue)) } }
    }

    /// Body bytes sent so far (lock-free read of the engine's counter).
    public var countOfBytesSent: Int64 { counterBlock.sent }
    /// Body bytes to send, or -1 when unknown (falls back to Content-Length).
    public var countOfBytesExpectedToSend: Int64 {
        let expected = counterBlock.expectedToSend
        if expected >= 0 { return expected }
        return originalRequest.headers["Content-Length"].flatMap { Int64($0) } ?? -1
    }
    /// Body bytes received so far, including a resumed offset.
    public var countOfBytesReceived: Int64 { counterBlock.received }
    /// Body bytes expected, or -1 until the headers say.
    public var countOfBytesExpectedToReceive: Int64 { counterBlock.expectedToReceive }

    public var description: String {
        "<\(type(of: self)) \(taskIdentifier) \(state) \(originalRequest)>"
    }

    public static func == (lhs: TransferTask, rhs: TransferTask) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    // MARK: - Control

    /// Starts the task, or continues it after ``suspend()``.
    public func resume() {
        let action = core.withLock { $0.life.resume() }
        // A data task that became a download: the transfer is the successor's now.
        if case .forward(let successor) = action { return successor.resume() }
        perform(action)
    }

    /// Pauses a running task without dropping its connection; ``resume()``
    /// continues where it stopped. A suspend that arrives before the engine
    /// has given the transfer an id is kept and applied when it does.
    public func suspend() {
        let action = core.withLock { $0.life.suspend() }
        if case .forward(let successor) = action { return successor.suspend() }
        perform(action)
    }

    /// Cancels the task; it completes with ``TransferError/Code/cancelled``.
    public func cancel() {
        cancel(keepingPartialData: false)
    }

    func cancel(keepingPartialData keep: Bool) {
        let action = core.withLock { $0.life.cancel(keepPartial: keep) }
        if case .forward(let successor) = action { return successor.cancel() }
        perform(action)
    }

    /// Acts on what the state machine decided, outside the lock.
    private func perform(_ action: TaskStateMachine<DownloadTask>.ControlAction) {
        switch action {
        case .none, .forward:
            return
        case .notify(let state):
            stateDidChange(state)
        case .start:
            session.observation.taskDidResume(self, starting: true)
            stateDidChange(.running)
            start()
        case .resumeEngine(let id):
            session.observation.taskDidResume(self, starting: false)
            session.transfers.resume(id)
            stateDidChange(.running)
        case .pauseEngine(let id):
            session.transfers.pause(id)
            stateDidChange(.suspended)
        case .cancelEngine(let id, let keep):
            session.observation.taskDidCancel(self)
            stateDidChange(.canceling)
            session.transfers.cancel(id, keepPartial: keep)
        case .cancelLocally:
            session.observation.taskDidCancel(self)
            stateDidChange(.canceling)
            finishLocally(TransferError(.cancelled, "cancelled", url: originalRequest.url))
        case .cancelBetweenAttempts:
            stateDidChange(.canceling)
            cancelBetweenAttempts()
            finishLocally(TransferError(.cancelled, "cancelled", url: originalRequest.url))
        }
    }

    // MARK: - Starting

    /// Adds this task's part to the engine spec (Bridging/RequestSpec.swift
    /// builds the rest). Subclasses set body and sink.
    func configure(_ spec: inout TransferSpec, strings: CStrings) throws(TransferError) {}

    /// Extra engine events a subclass wants (data chunks, disposition).
    func wantsDisposition() -> Bool { false }

    private func start() {
        // With an interceptor the adapter runs first (TransferTask+Attempts).
        if !startFirstAttempt() { submit(originalRequest) }
    }

    /// Hands `request` to the engine with the 401 credential, if one was
    /// answered for the origin of `request`.
    func submit(_ request: Request) {
        // A hook's answer first; else the request's own credential, for the
        // origin the task started at only.
        var answer = core.withLock { core -> (Credential, EngineAuthSchemes)? in
            guard let stored = core.credential, RedirectPolicy.isSameOrigin(stored.url, request.url) else { return nil }
            return (stored.value, stored.schemes)
        }
        if answer == nil, let credential = request.credential, credential.serverTrust == nil,
            RedirectPolicy.isSameOrigin(originalRequest.url, request.url)
        {
            var schemes: EngineAuthSchemes = []
            if request.credentialSchemes.contains(.basic) { schemes.insert(.basic) }
            if request.credentialSchemes.contains(.digest) { schemes.insert(.digest) }
            if !schemes.isEmpty { answer = (credential, schemes) }
        }
        core.withLock { $0.credentialInFlight = answer?.0 }
        submit(request, credential: answer)
    }

    /// Hands `request` to the engine (first hop, or a redirect/auth follow-up).
    private func submit(_ request: Request, credential: (Credential, EngineAuthSchemes)?) {
        let strings = CStrings()
        defer { strings.free() }
        var spec: TransferSpec
        do throws(TransferError) {
            spec = try makeSpec(for: request, credential: credential, strings: strings)   // Bridging/RequestSpec.swift
        } catch {
            submitFailed(error)
            return
        }
        // Every engine event of the hop goes through its route, to whichever
        // task owns the transfer (this one, or its download successor).
        let route = EngineRoute(self)
        let paused = core.withLock { core -> Bool in
            core.route = route
            return core.life.handOver()
        }
        if paused { spec.flags.insert(.startPaused) }
        let submitted = session.transfers.submit(&spec, target: route)
        switch submitted {
        case .failure(let error):
            var error = error
            error.url = request.url
            submitFailed(error)
        case .success(let id):
            // The transfer already runs and its events reach the delegate
            // queue: a command one of them needed the id for before this line
            // was kept by the state machine and is sent now.
            session.afterEngineSubmitForTesting.run(id)
            let (commands, limit) = core.withLock { core in (core.life.submitted(id: id), core.speedLimit) }
            if commands.contains(.allowResponse) { session.transfers.setDisposition(id, .allow) }
            if commands.contains(.becomeDownload) { deferredBecomeDownload(engineID: id) }
            if commands.contains(.consumerReady) { consumerReady(id) }
            didSubmit(engineID: id)
            // A limit set between building the spec and knowing the id.
            if let limit { session.transfers.setSpeedLimit(id, receive: limit.receive, send: limit.send) }
            // A suspend or cancel that came while the id was not known.
            if commands.contains(.cancel) {
                session.transfers.cancel(id, keepPartial: commands.contains(.keepPartial))
            } else if commands.contains(.pause) {
                session.transfers.pause(id)
            } else if commands.contains(.resume) {
                session.transfers.resume(id)
            }
        }
    }

    /// The engine accepted the transfer under `engineID` (each hop).
    func didSubmit(engineID: UInt64) {}

    /// A `becomeDownload` answer came before the engine id was known
    /// (``DataTask`` acts on it now).
    func deferredBecomeDownload(engineID: UInt64) {}

    /// The consumer of the body (a stream's reader, the chunk hook) drained
    /// its buffer: the engine may deliver again. A drain that came before the
    /// engine id was known is kept and sent when it is. A lost command fails
    /// the task instead of leaving it held for ever.
    final func consumerDidDrain() {
        guard let id = core.withLock({ $0.life.consumerReady() }) else { return }
        consumerReady(id)
    }

    private func consumerReady(_ id: UInt64) {
        if !session.transfers.consumerReady(id) { cancel() }
    }

    func submitFailed(_ error: TransferError) {
        if case .finishLocally(let error) = core.withLock({ $0.life.submitFailed(error) }) {
            finishLocally(error)
        }
    }

    // MARK: - Engine events (loop thread: record, then hop; see EngineRoute)

    /// A body chunk of a streaming sink. True: hold the transfer until the
    /// consumer drains (``consumerDidDrain()``).
    func engineDidReceiveData(_ chunk: Data) -> Bool { false }

    /// The pull source of a streamed request body (``EngineTarget/engineRead(into:)``).
    func engineRead(into buffer: UnsafeMutableRawBufferPointer) -> Int { -1 }

    /// Starts a streamed request body again; false if impossible.
    func engineRewind() -> Bool { false }

    /// Loop thread: the response head of the current hop (its headers are
    /// parsed only if something reads them).
    func engineDidReceiveResponse(_ response: HTTPResponse) {
        core.withLock { $0.response = response }
        session.noteCookies(of: response, for: originalRequest)   // Cookies/SessionManager+Cookies.swift
        // Monitors hear of the response from the delegate queue, with the
        // rest of the loop pass's events: told from here, each response
        // woke the monitor's queue on its own, and the worker it woke took
        // the CPU from the loop (two context switches per request).
        let observed = session.observation.hasEventMonitors
        let needsEvent = needsResponseEvent()
        guard observed || needsEvent else { return }
        session.mailbox.post { [self] in
            if observed { session.observation.task(self, didReceive: response) }
            if needsEvent { didReceiveResponse(response) }
        }
    }

    /// On the delegate queue. Data tasks ask the hook for a disposition.
    func didReceiveResponse(_ response: HTTPResponse) {}

    /// Whether ``didReceiveResponse(_:)`` has anything to do (saves a hop per request).
    func needsResponseEvent() -> Bool { false }

    func engineDidProgress(_ snapshot: ProgressSnapshot) {
        let schedule: Bool = core.withLock { core in
            core.upload = TransferProgress(completedUnitCount: snapshot.sent,
                                           totalUnitCount: snapshot.expectedToSend, elapsed: snapshot.elapsed)
            core.download = TransferProgress(completedUnitCount: snapshot.received,
                                             totalUnitCount: snapshot.expectedToReceive, elapsed: snapshot.elapsed,
                                             resumeOffset: core.download.resumeOffset)
            guard !core.progressDeliveryPending, !core.life.isCompleted,
                !core.progressObservers.isEmpty || delegate.hasProgressListeners
            else { return false }
            core.progressDeliveryPending = true
            return true
        }
        if schedule {
            session.mailbox.post { [self] in deliverProgress() }
        }
    }

    /// On the delegate queue: hands the latest snapshots to listeners,
    /// only what changed since the last delivery.
    func deliverProgress() {
        let delivery = core.withLock { core -> (TransferProgress, TransferProgress, [ProgressObserver], Int64, Bool, Bool)? in
            core.progressDeliveryPending = false
            guard !core.life.isCompleted else { return nil }
            let previous = core.lastDelivered
            core.lastDelivered = (core.upload, core.download)
            let sentBefore = core.lastSent
            core.lastSent = core.upload.completedUnitCount
            return (core.upload, core.download, Array(core.progressObservers.values), sentBefore,
                    previous?.upload != core.upload, previous?.download != core.download)
        }
        guard let (upload, download, observers, sentBefore, uploadChanged, downloadChanged) = delivery else { return }
        publish(upload: upload, download: download, observers: observers, uploadChanged: uploadChanged,
                downloadChanged: downloadChanged)
        if upload.completedUnitCount > sentBefore {
            let (hooks, delegate) = session.observers
            let delta = upload.completedUnitCount - sentBefore
            hooks.taskDidSendBodyData?(session, self, delta, upload.completedUnitCount, countOfBytesExpectedToSend)
            delegate?.session(session, task: self, didSendBodyData: delta, totalBytesSent: upload.completedUnitCount,
                              totalBytesExpectedToSend: countOfBytesExpectedToSend)
        }
    }

    private func publish(upload: TransferProgress, download: TransferProgress, observers: [ProgressObserver],
                         uploadChanged: Bool, downloadChanged: Bool)
    {
        delegate.progressDidChange(task: self, upload: upload, download: download)
        for observer in observers {
            let changed = observer.direction == .upload ? uploadChanged : downloadChanged
            guard changed else { continue }
            let value = observer.direction == .upload ? upload : download
            observer.queue.async { observer.handler(value) }
        }
    }

    func engineDidFinish(_ outcome: Outcome) {
        var outcome = outcome
        outcome.metrics.attempts = max(1, attempts.count)
        session.mailbox.post { [self, outcome] in
            switch core.withLock({ $0.life.engineFinished() }) {
            case .none:
                return
            case .complete:
                // Cancelled while the hop ran: a hop that Swift would have
                // followed (a redirect it handles, a 401 it answers) is not a
                // result; the task ends as the user asked. A final result
                // that raced the cancel stands.
                if isFollowUpHop(outcome) {
                    complete(error: TransferError(.cancelled, "cancelled", url: originalRequest.url), outcome: outcome)
                } else {
                    complete(with: outcome)
                }
            case .considerFollowUp:
                if !allowsFollowUps || (!followUp(after: outcome) && !considerRetry(after: outcome)) {
                    core.withLock { $0.life.endHops() }
                    complete(with: outcome)
                }
            }
        }
    }

    // MARK: - Redirects and authentication handled in Swift

    /// Whether `outcome` ends a hop that Swift follows with another (a
    /// redirect a hook or the delegate sees, a 401 the session answers).
    func isFollowUpHop(_ outcome: Outcome) -> Bool {
        guard outcome.succeeded, allowsFollowUps, let response else { return false }
        if (300..<400).contains(response.statusCode), outcome.redirectURL != nil, session.handlesRedirectsManually {
            return true
        }
        return response.statusCode == 401 && session.handlesChallenges
    }

    /// Whether a finished hop may be followed by another (redirect handled in
    /// Swift, challenge answer, retry). False: the hop's outcome is the result.
    var allowsFollowUps: Bool { true }

    /// On the delegate queue: restarts the task when the hop ended in a
    /// redirect the hook wants followed, or in a 401 the challenge handler
    /// answers with a credential. Returns false when the task should complete.
    func followUp(after outcome: Outcome) -> Bool {
        // Only called between hops of a task that was not cancelled (TaskStateMachine.engineFinished).
        guard outcome.succeeded, let response else { return false }
        let status = response.statusCode
        if (300..<400).contains(status), let location = outcome.redirectURL, session.handlesRedirectsManually {
            return followRedirect(response: response, location: location)
        }
        if status == 401 {
            // The credential this hop sent did not do: it is never sent again.
            core.withLock { core in
                if let sent = core.credentialInFlight, !core.refusedCredentials.contains(sent) {
                    core.refusedCredentials.append(sent)
                }
            }
            if session.handlesChallenges,
                let challenge = AuthenticationChallengeHeader.preferred(
                    in: AuthenticationChallengeHeader.parse(response.headers.values(for: "WWW-Authenticate")))
            {
                return answerChallenge(response: response, challenge: challenge, outcome: outcome)
            }
        }
        return false
    }

    private func followRedirect(response: HTTPResponse, location: String) -> Bool {
        let current = currentRequest ?? originalRequest
        let hops = core.withLock { core -> Int in
            core.redirects += 1
            return core.redirects
        }
        guard hops <= session.configuration.maxRedirects else {
            complete(error: TransferError(.tooManyRedirects, "more than \(session.configuration.maxRedirects) redirects",
                                          url: current.url), outcome: nil)
            return true
        }
        guard let target = URL(string: location, relativeTo: current.url)?.absoluteURL,
            let scheme = target.scheme?.lowercased(), scheme == "http" || scheme == "https"
        else {
            complete(error: TransferError(.redirectRefused, "redirect to a non-HTTP location \(location.debugDescription)",
                                          url: current.url), outcome: nil)
            return true
        }
        // Credentials, cookies and proxy credentials stay behind on a change
        // of scheme, host or port (the one rule, shared with the engine path).
        var next = RedirectPolicy.request(current, redirectedTo: target)
        // 303, and 301/302 after a POST, continue as GET without a body (as browsers and curl do).
        if response.statusCode == 303 || ((response.statusCode == 301 || response.statusCode == 302) && next.method == .post) {
            if next.method != .head { next.method = .get }
            next.body = nil
            next.headers["Content-Length"] = nil
            next.headers["Content-Type"] = nil
        }
        guard let decided = session.willPerformRedirection(task: self, response: response, newRequest: next) else {
            session.observation.task(self, redirectRefused: response)
            return false   // refused: the redirect response is the result, as with URLSession
        }
        core.withLock { $0.currentRequest = decided }
        for observer in requestObservers {
            observer.requestWillRedirect(from: current.url, to: decided.url, statusCode: response.statusCode)
        }
        session.observation.task(self, willRedirectFrom: current.url, to: decided.url,
                                 statusCode: response.statusCode, onEngineThread: false)
        discardHopResult()
        beginHop(decided)
        return true
    }

    private func answerChallenge(response: HTTPResponse, challenge header: AuthenticationChallengeHeader,
                                 outcome: Outcome) -> Bool {
        let url = (currentRequest ?? originalRequest).url
        let previous = core.withLock { core -> Int in
            defer { core.challenges += 1 }
            return core.challenges
        }
        guard previous < 5 else { return false }   // the server keeps refusing: give it the 401
        let kind: AuthenticationChallenge.Kind = header.scheme == .basic
            ? .httpBasic(realm: header.realm) : .http(scheme: header.scheme, realm: header.realm)
        let challenge = AuthenticationChallenge(kind: kind, host: url.host ?? "",
                                                port: url.port ?? (url.scheme == "https" ? 443 : 80),
                                                previousFailureCount: previous, failureResponse: response,
                                                serverTrust: nil, policyVerdict: nil)
        let once = OnceFlag()
        let later: ChallengeCompletion = { [self] disposition in
            session.delegateQueue.async { [self] in
                guard once.claim() else { return }
                if !apply(disposition, url: url, scheme: header.scheme) {
                    core.withLock { $0.life.endHops() }
                    complete(with: outcome)
                }
            }
        }
        switch session.didReceiveChallenge(task: self, challenge: challenge, later: later) {
        case .disposition(let disposition):
            return once.claim() ? apply(disposition, url: url, scheme: header.scheme) : true
        case .fail(let error):
            if once.claim() { complete(error: error, outcome: nil) }
            return true
        case .deferred:
            // Waits for `later`; a cancel meanwhile ends the wait (beginHop
            // then finishes the task as cancelled).
            let token = Protected<ObservationToken?>(nil)
            let endWait: @Sendable () -> Void = { [self] in
                guard once.claim() else { return }
                token.withLock { $0?.cancel() }
                beginHop(currentRequest ?? originalRequest)
            }
            let observation = observeState(on: session.delegateQueue) { state in
                if state == .canceling { endWait() }
            }
            token.withLock { $0 = observation }
            // Cancelled while the handler ran, before the observer existed.
            if state == .canceling { endWait() }
            return true
        }
    }

    /// Acts on a 401 answer; false when the 401 is the result.
    private func apply(_ disposition: ChallengeDisposition, url: URL, scheme: AuthenticationScheme) -> Bool {
        switch disposition {
        case .useCredential(let credential) where credential.serverTrust == nil && scheme.takesPassword:
            let schemes: EngineAuthSchemes = scheme == .digest ? .digest : .basic
            let refused = core.withLock { core -> Bool in
                if core.refusedCredentials.contains(credential) { return true }
                core.credential = (credential, schemes, url)
                return false
            }
            // The same wrong password again would loop: the 401 is the result.
            if refused { return false }
            discardHopResult()
            beginHop(currentRequest ?? originalRequest)
            return true
        case .useCredential:
            // A server-trust credential answers no 401, a password no Bearer
            // or unknown scheme: the 401 is the result.
            return false
        case .cancelAuthenticationChallenge:
            complete(error: TransferError(.cancelled, "authentication challenge cancelled", url: url), outcome: nil)
            return true
        case .performDefaultHandling, .rejectProtectionSpace:
            return false
        }
    }

    /// Forgets what an intermediate hop produced before the next one starts.
    func discardHopResult() {}

    /// On the delegate queue: starts the next hop, unless the task was
    /// cancelled while the hook decided.
    private func beginHop(_ request: Request) {
        let cancelled = TransferError(.cancelled, "cancelled", url: originalRequest.url)
        switch core.withLock({ $0.life.beginHop(cancelled: cancelled) }) {
        case .submit: submit(request)
        case .finishLocally(let error): complete(error: error, outcome: nil)
        case .none: break   // only reachable between hops, where the machine always answers
        }
    }

    /// Completes without the engine (cancelled before start, bad request).
    func finishLocally(_ error: TransferError) {
        session.delegateQueue.async { [self] in
            complete(error: error, outcome: nil)
        }
    }

    /// On the delegate queue, once: subclasses produce the result first.
    func complete(with outcome: Outcome) {
        complete(error: outcome.error(url: originalRequest.url), outcome: outcome)
    }

    /// The shared end of every task, on the delegate queue.
    func complete(error: TransferError?, outcome: Outcome?) {
        var error = session.finalError(error, of: self)
        if var e = error, e.response == nil { e.response = response; error = e }
        let finalSnapshot:
            (TransferProgress, TransferProgress, [ProgressObserver], [StateObserver], Bool, Bool, (any TaskWaiter)?)? =
            core.withLock { core in
                // Exactly once, whoever gets here first (engine finish, local finish, cancel).
                guard case .deliver(let waiter) = core.life.complete(error) else { return nil }
                core.route = nil
                core.metrics = outcome?.metrics
                if error == nil {
                    // A final report at 100 %: totals become what was really moved.
                    if core.download.totalUnitCount < 0 || core.download.completedUnitCount > core.download.totalUnitCount {
                        core.download.totalUnitCount = core.download.completedUnitCount
                    }
                    core.download.completedUnitCount = max(core.download.completedUnitCount, countOfBytesReceived)
                    core.download.totalUnitCount = max(core.download.totalUnitCount, core.download.completedUnitCount)
                    if core.upload.totalUnitCount < 0 { core.upload.totalUnitCount = core.upload.completedUnitCount }
                }
                let previous = core.lastDelivered
                core.lastDelivered = (core.upload, core.download)
                let result = (core.upload, core.download, Array(core.progressObservers.values),
                              Array(core.stateObservers.values), previous?.upload != core.upload,
                              previous?.download != core.download, waiter)
                core.progressObservers.removeAll()
                core.stateObservers.removeAll()
                return result
            }
        guard let (upload, download, progressObservers, stateObservers, uploadChanged, downloadChanged, waiter) =
            finalSnapshot
        else { return }
        publish(upload: upload, download: download, observers: progressObservers, uploadChanged: uploadChanged,
                downloadChanged: downloadChanged)
        for observer in stateObservers {
            observer.queue.async { observer.handler(.completed) }
        }
        session.taskDidComplete(self, error: error, outcome: outcome, waiter: waiter)
        didDeliverCompletion(error: error)
    }

    /// After this task's completion was delivered (once).
    func didDeliverCompletion(error: TransferError?) {}

    func stateDidChange(_ state: TaskState) {
        let observers = core.withLock { Array($0.stateObservers.values) }
        for observer in observers {
            observer.queue.async { observer.handler(state) }
        }
        switch state {
        case .running:
            session.postTaskNotification(.taskDidResume, task: self)
        case .suspended:
            session.postTaskNotification(.taskDidSuspend, task: self)
        default:
            break
        }
    }

    /// Registers the async/await waiter; fires at once if already complete
    /// (otherwise the completion fires it, after queueing the handler).
    func attach(_ waiter: any TaskWaiter) {
        if case .fire(let error) = core.withLock({ $0.life.attach(waiter) }) {
            waiter.taskDidComplete(self, error: error)
        }
    }

    // MARK: - ObservableTransfer

    public func progress(_ direction: ProgressDirection) -> TransferProgress {
        core.withLock { direction == .upload ? $0.upload : $0.download }
    }

    @discardableResult
    public func observeProgress(_ direction: ProgressDirection, on queue: DispatchQueue,
                                _ handler: @escaping @Sendable (TransferProgress) -> Void) -> ObservationToken
    {
        let id: Int? = core.withLock { core in
            guard !core.life.isCompleted else { return nil }
            core.nextObserverID += 1
            core.progressObservers[core.nextObserverID] = ProgressObserver(direction: direction, queue: queue,
                                                                           handler: handler)
            return core.nextObserverID
        }
        guard let id else { return ObservationToken {} }
        return ObservationToken { [weak self] in
            _ = self?.core.withLock { $0.progressObservers.removeValue(forKey: id) }
        }
    }

    @discardableResult
    public func observeState(on queue: DispatchQueue,
                             _ handler: @escaping @Sendable (TaskState) -> Void) -> ObservationToken
    {
        let id: Int? = core.withLock { core in
            guard !core.life.isCompleted else { return nil }
            core.nextObserverID += 1
            core.stateObservers[core.nextObserverID] = StateObserver(queue: queue, handler: handler)
            return core.nextObserverID
        }
        guard let id else { return ObservationToken {} }
        return ObservationToken { [weak self] in
            _ = self?.core.withLock { $0.stateObservers.removeValue(forKey: id) }
        }
    }

    /// Progress events and state changes as an async sequence that ends
    /// when the task completes.
    public var events: AsyncStream<TaskEvent> {
        AsyncStream { continuation in
            let progressUp = observeProgress(.upload, on: session.delegateQueue) { continuation.yield(.uploadProgress($0)) }
            let progressDown = observeProgress(.download, on: session.delegateQueue) {
                continuation.yield(.downloadProgress($0))
            }
            let stateToken = observeState(on: session.delegateQueue) { state in
                continuation.yield(.state(state))
                if state == .completed { continuation.finish() }
            }
            if self.state == .completed { continuation.finish() }
            continuation.onTermination = { _ in
                progressUp.cancel()
                progressDown.cancel()
                stateToken.cancel()
            }
        }
    }
}

/// What ``TransferTask/events`` yields.
public enum TaskEvent: Sendable, Hashable {
    /// The task's state changed.
    case state(TaskState)
    /// Upload progress.
    case uploadProgress(TransferProgress)
    /// Download progress.
    case downloadProgress(TransferProgress)
}
