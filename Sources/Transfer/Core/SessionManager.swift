import Dispatch
import Foundation
import Synchronization

/// Creates and manages tasks over one transfer engine: the Linux spelling
/// of AFURLSessionManager.
///
/// Threads: the engine thread does all network and file work. Hooks and
/// per-task progress closures run on ``delegateQueue`` (serial); completion
/// handlers run on ``completionQueue`` (default: a private serial queue —
/// nothing services the main queue in a Linux server).
public final class SessionManager: Sendable {
    /// The configuration the session was made with; fixed for its life.
    public let configuration: SessionConfiguration
    /// The session's cookies (the configuration's store, or its own fresh one); nil: none.
    public let cookieStore: CookieStore?
    /// The session's response cache (``SessionConfiguration/responseCache``); nil: none.
    public let responseCache: ResponseCache?
    let engine: Engine
    /// Tests only: runs on the submitting thread after the engine accepted a
    /// task's transfer and before the task records its id (with the task's
    /// lock held), to widen that window on purpose.
    package let afterEngineSubmitForTesting = TestSeam<UInt64>()
    /// Serial queue for hooks, delegate calls and progress closures.
    public let delegateQueue: DispatchQueue
    let temporaryDirectory: URL
    /// Batches engine-thread events onto `delegateQueue`.
    let mailbox: Mailbox
    /// Event monitors and the logger (Observation/EventMonitor+FanOut.swift).
    let observation: SessionObservation
    private let state: Protected<State>
    private static let identifiers = Atomic<Int>(0)
    /// No hook and no delegate: requests may take the fast path (``usesFastPath``).
    let fastPathOpen = Atomic<Bool>(true)

    struct State {
        var tasks: [Int: TransferTask] = [:]
        var invalidated = false
        var hooks = SessionHooks()
        var completionQueue: DispatchQueue?
        var completionGroup: DispatchGroup?
        var delegate: (any SessionDelegate)?
        var taskDescriptionForTasks: String?
        var invalidationNotified = false
        var securityPolicy = SecurityPolicy.defaultPolicy
        var securityPolicyError: TransferError?
        /// The response cache's name for the trust https responses are
        /// fetched under now (Cache/SecurityPolicy+Cache.swift); nil while
        /// it is weakened or refused: https responses are then neither
        /// stored nor served.
        var cacheTrustTag: String?
        /// The errors challenge handlers failed handshakes with, by "host:port".
        var trustFailures: [String: TransferError] = [:]
        var responseSerializer: any ResponseSerializer = HTTPResponseSerializer()
        var reachabilityManager = NetworkReachability()
        /// What ``SessionManager/reset()`` does besides dropping connections
        /// and TLS sessions; the cookie store and the cache add theirs.
        var resetActions: [@Sendable () -> Void] = []

        /// Whether a server-trust challenge has anyone to ask: the engine
        /// calls into Swift for every handshake only then.
        var asksAboutServerTrust: Bool {
            hooks.sessionDidReceiveChallenge != nil || hooks.authenticationChallengeHandler != nil
                || delegate?.wantsServerTrustChallenges == true
        }
    }

    /// Creates a manager and starts its engine thread.
    ///
    /// - Throws: ``TransferError`` when the engine cannot start (no threads or
    ///   fds left, or `configuration.caFile` cannot be loaded).
    public init(configuration: SessionConfiguration = .default) throws(TransferError) {
        self.configuration = configuration
        let label = "transfer.session.\(ObjectIdentifier(Self.self).hashValue)"
        delegateQueue = DispatchQueue(label: label + ".delegate")
        cookieStore = configuration.cookieStore.map { $0.isPlaceholder ? CookieStore() : $0 }
        responseCache = configuration.responseCache
        engine = try Engine(configuration: configuration, delegateQueue: delegateQueue, cookieStore: cookieStore)
        mailbox = engine.mailbox
        observation = SessionObservation(configuration.observation)
        temporaryDirectory = URL(fileURLWithPath: TemporaryFolder.path(), isDirectory: true)
        state = Protected(State())
        delegateQueue.setSpecific(key: queueKey, value: true)
        // The default policy, with the challenge hooks wired, from the start.
        try installSecurityPolicy(.defaultPolicy)
        // reset() empties the cookie store, as URLSession.reset empties its
        // storage (a store shared by sessions is emptied for all of them).
        if let cookieStore { addResetAction { cookieStore.resetCookies() } }
        // Checked at start-up: without libpsl, a host may set cookies for a
        // whole public suffix (Domain=co.uk); say so where it can be seen.
        if cookieStore != nil, !CookieStore.enforcesPublicSuffixList {
            configuration.logger?.warning(
                "libcurl has no public suffix list (libpsl): cookies for a public suffix such as Domain=co.uk are accepted")
        }
        // ... and its response cache, as URLSession.reset empties its URLCache.
        if let responseCache { addResetAction { responseCache.removeAllCachedResponses() } }
    }

    private let queueKey = DispatchSpecificKey<Bool>()

    deinit {
        // `engine` deinit stops the loop: every transfer finishes (cancelled)
        // and its box releases its task.
    }

    // MARK: - Properties

    /// Serializes the response of every data task when it completes
    /// (AFURLSessionManager's `responseSerializer`); default an
    /// ``HTTPResponseSerializer``, whose value is the body as `Data`. Handlers
    /// given as `serializedCompletionHandler` get its value or its error, and
    /// `Notification.Name.transferTaskDidComplete` carries both.
    /// Handlers taking `Data` keep getting the raw body and the transfer's
    /// error (plus the task's ``DataTask/validate()`` failures).
    public var responseSerializer: any ResponseSerializer {
        get { state.withLock { $0.responseSerializer } }
        set { state.withLock { $0.responseSerializer = newValue } }
    }

    /// The session's network reachability monitor (AFURLSessionManager's
    /// `reachabilityManager`): the default route by default. Nothing is
    /// watched until `reachabilityManager.startMonitoring()`; changes reach
    /// its status-change handler and `Notification.Name.transferReachabilityDidChange`.
    public var reachabilityManager: NetworkReachability {
        get { state.withLock { $0.reachabilityManager } }
        set { state.withLock { $0.reachabilityManager = newValue } }
    }

    /// A handler of a data task's serialized response: the value of the
    /// session's ``responseSerializer`` (nil on failure), and the transfer's
    /// or the serializer's error.
    public typealias SerializedCompletionHandler = @Sendable (HTTPResponse?, (any Sendable)?, TransferError?) -> Void

    /// Closures for session and task events (see ``SessionHooks``).
    public var hooks: SessionHooks {
        get { state.withLock { $0.hooks } }
        set { updateObservers { $0.hooks = newValue } }
    }

    /// A delegate object, for users who prefer one object to many closures.
    /// Held strongly until the session is invalidated, as URLSession does.
    /// It receives server-trust challenges when no challenge hook is set.
    public var delegate: (any SessionDelegate)? {
        get { state.withLock { $0.delegate } }
        set { updateObservers { $0.delegate = newValue } }
    }

    /// Changes the hooks or the delegate; rebuilds the engine's policy when
    /// server-trust challenges gain or lose someone to ask.
    private func updateObservers(_ change: (inout State) -> Void) {
        let (changed, policy, failedClosed) = state.withLock { state -> (Bool, SecurityPolicy, Bool) in
            let had = state.asksAboutServerTrust
            change(&state)
            fastPathOpen.store(Self.allowsFastPath(hooks: state.hooks, delegate: state.delegate), ordering: .relaxed)
            return (had != state.asksAboutServerTrust, state.securityPolicy, state.securityPolicyError != nil)
        }
        // The server-trust challenge costs a hop into Swift per handshake:
        // the engine only asks when a hook or a delegate that wants them is
        // there to answer.
        // A session refusing everything after an invalid policy keeps
        // refusing: the last valid policy must not come back this way.
        guard changed, !failedClosed else { return }
        do throws(TransferError) {
            try installSecurityPolicy(policy)
        } catch {
            failClosed(error)
        }
    }

    /// The server-trust policy checked in the handshake of every new TLS
    /// connection of this session (redirect hops and HTTP/2 included).
    ///
    /// Setting an invalid policy (a malformed pin, an enforced host rule
    /// without a backup pin, validating domains while allowing invalid
    /// certificates without pins) fails closed: every new TLS connection is
    /// refused until a valid policy is set, whatever else changes meanwhile
    /// (``hooks`` included). The getter still returns the last valid policy.
    /// Use ``setSecurityPolicy(_:)`` to get the error as well.
    public var securityPolicy: SecurityPolicy {
        get { state.withLock { $0.securityPolicy } }
        set { try? setSecurityPolicy(newValue) }
    }

    /// Installs `policy` for new TLS connections; connections checked under the
    /// previous policy are not reused by new transfers.
    ///
    /// - Throws: ``TransferError/Code/invalidRequest`` when the policy is invalid.
    ///   The session then fails closed, as with the ``securityPolicy`` setter:
    ///   every new TLS connection is refused until a valid policy is set (an
    ///   ignored error must not leave the connections of a pinning app unpinned).
    public func setSecurityPolicy(_ policy: SecurityPolicy) throws(TransferError) {
        do throws(TransferError) {
            try installSecurityPolicy(policy)
        } catch {
            failClosed(error)
            throw error
        }
    }

    /// Refuses every new TLS connection until a valid policy is installed.
    private func failClosed(_ error: TransferError) {
        state.withLock {
            $0.securityPolicyError = error
            $0.cacheTrustTag = nil
        }
        // The loop keeps its own reference; ours goes with this scope.
        engine.setTrustPolicy(EngineTrustPolicy.refusingEverything())
    }

    private func installSecurityPolicy(_ policy: SecurityPolicy) throws(TransferError) {
        // Stored as given: a reinstall (after a hook change) wraps the report
        // handler once, not once more per reinstall.
        let given = policy
        var policy = policy
        if var pins = policy.pinPolicy, let reportURL = pins.reportURL {
            guard let scheme = reportURL.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
                throw TransferError(.invalidRequest, "the pin report URL must be http(s): \(reportURL)")
            }
            // Reports also go out as JSON POSTs, rate-limited per host and pattern.
            let userHandler = pins.reportHandler
            let limiter = ReportLimiter(interval: pins.reportInterval)
            pins.reportHandler = { [weak self] report in
                userHandler?(report)
                guard let self, limiter.admit(report) else { return }
                var request = Request(url: reportURL, method: .post, headers: ["Content-Type": "application/json"])
                request.body = .data(report.jsonData())
                self.dataTask(with: request).resume()
            }
            policy.pinPolicy = pins
        }
        try policy.validate()
        let wantsChallenge = state.withLock { $0.asksAboutServerTrust }
        var handler: EngineChallengeHandler?
        if wantsChallenge {
            handler = { @Sendable [weak self] trust, verdict in
                guard let self else { return .performDefaultHandling }
                return self.serverTrustChallenge(trust, verdict: verdict)
            }
        }
        let engineSide = try policy.makeEnginePolicy(challengeHandler: handler)
        let trustTag = policy.cacheTrustTag(caFile: configuration.caFile)
        state.withLock {
            $0.securityPolicy = given
            $0.securityPolicyError = nil
            $0.cacheTrustTag = trustTag
        }
        engine.setTrustPolicy(engineSide)   // the loop retains its own reference
    }

    /// Engine thread, mid-handshake: asks, on the delegate queue (user code
    /// never runs on the engine thread), the session's challenge hook, else
    /// the AF-style challenge handler, else the delegate. The handshake, and
    /// with it the engine thread, waits at most
    /// ``SessionConfiguration/serverTrustChallengeTimeout``; nil when no
    /// answer came by then (the server is refused; a late answer is dropped).
    private func serverTrustChallenge(_ trust: ServerTrust, verdict: TrustEvaluation) -> ServerTrustDisposition? {
        let (hooks, delegate) = observers
        let challenge = AuthenticationChallenge(kind: .serverTrust, host: trust.host ?? "", port: trust.port ?? 443,
                                                previousFailureCount: 0, failureResponse: nil, serverTrust: trust,
                                                policyVerdict: verdict)
        let answer = ChallengeAnswerBox()
        let ask: @Sendable () -> Void
        if let hook = hooks.sessionDidReceiveChallenge {
            ask = { answer.set(.disposition(hook(self, challenge))) }
        } else if let handler = hooks.authenticationChallengeHandler {
            ask = { answer.set(handler(self, nil, challenge, { answer.set(.disposition($0)) })) }
        } else if let delegate, delegate.wantsServerTrustChallenges {
            ask = { answer.set(.disposition(delegate.session(self, didReceive: challenge))) }
        } else {
            return .performDefaultHandling
        }
        // Not delegateQueue.sync: a hook that never returns, or a delegate
        // queue busy with work that waits for the engine, would stall every
        // transfer of the session for ever.
        delegateQueue.async(execute: ask)
        let bound = max(TimeLimit.clampedSeconds(configuration.serverTrustChallengeTimeout, fallback: 5), 0.001)
        guard let result = answer.wait(timeout: bound) else { return nil }
        let key = Self.originKey(host: challenge.host, port: challenge.port)
        let disposition: ChallengeDisposition
        switch result {
        case .fail(let error):
            // Refused; the tasks this handshake was for complete with `error`.
            state.withLock { $0.trustFailures[key] = error }
            return .cancel
        case .disposition(let answered):
            disposition = answered
        case .deferred:
            disposition = .performDefaultHandling   // never stored: the box waits for a real answer
        }
        state.withLock { _ = $0.trustFailures.removeValue(forKey: key) }
        switch disposition {
        case .useCredential(let credential):
            // Only a credential made from this chain accepts the server. A
            // user/password (a hook written for 401s) leaves the decision to
            // the policy: it can never accept a certificate.
            guard let accepted = credential.serverTrust, accepted.certificates == trust.certificates else {
                return .performDefaultHandling
            }
            // A server the policy refused is accepted by the hook: until the
            // next policy change, nothing fetched is trusted enough to cache.
            if !verdict.isValid { state.withLock { $0.cacheTrustTag = nil } }
            return .useCredential
        case .performDefaultHandling: return .performDefaultHandling
        case .cancelAuthenticationChallenge: return .cancel
        case .rejectProtectionSpace: return .reject
        }
    }

    private static func originKey(host: String, port: Int) -> String {
        host.lowercased() + ":" + String(port)
    }

    /// The error `task` completes with: a challenge handler's in place of the
    /// trust refusal it caused (which becomes its underlying error), else
    /// `error` as it is. On the delegate queue, once.
    func finalError(_ error: TransferError?, of task: TransferTask) -> TransferError? {
        substitutingChallengeFailure(error, of: task)
    }

    private func substitutingChallengeFailure(_ error: TransferError?, of task: TransferTask) -> TransferError? {
        guard let error, error.code == .serverTrustRejected,
            error.trustFailureReason == .rejectedByDelegate
        else { return error }
        let urls = [error.url, task.currentRequest?.url, task.originalRequest.url].compactMap { $0 }
        let found = state.withLock { state -> TransferError? in
            for url in urls {
                let port = url.port ?? (url.scheme?.lowercased() == "http" ? 80 : 443)
                if let failure = state.trustFailures[Self.originKey(host: url.host ?? "", port: port)] {
                    return failure
                }
            }
            return nil
        }
        guard var replacement = found else { return error }
        if replacement.url == nil { replacement.url = error.url }
        if replacement.underlyingError == nil { replacement.underlyingError = error }
        return replacement
    }

    /// Where completion handlers run; nil means a private serial queue.
    public var completionQueue: DispatchQueue? {
        get { state.withLock { $0.completionQueue } }
        set { state.withLock { $0.completionQueue = newValue } }
    }

    /// Entered before and left after each completion handler, when set.
    public var completionGroup: DispatchGroup? {
        get { state.withLock { $0.completionGroup } }
        set { state.withLock { $0.completionGroup = newValue } }
    }

    /// Given to every new task as its ``TransferTask/taskDescription``.
    public var taskDescriptionForTasks: String? {
        get { state.withLock { $0.taskDescriptionForTasks } }
        set { state.withLock { $0.taskDescriptionForTasks = newValue } }
    }

    private static let defaultCompletionQueue = DispatchQueue(label: "transfer.completion")

    /// All tasks that have not completed.
    public var tasks: [TransferTask] { state.withLock { $0.tasks.values.sorted { $0.taskIdentifier < $1.taskIdentifier } } }
    /// The data tasks not yet completed (upload tasks aside).
    public var dataTasks: [DataTask] { tasks.compactMap { $0 as? DataTask }.filter { !($0 is UploadTask) } }
    /// The upload tasks not yet completed.
    public var uploadTasks: [UploadTask] { tasks.compactMap { $0 as? UploadTask } }
    /// The download tasks not yet completed.
    public var downloadTasks: [DownloadTask] { tasks.compactMap { $0 as? DownloadTask } }

    /// The upload `Progress` of `task`: cancelling, pausing or resuming it
    /// acts on the task.
    public func uploadProgress(for task: TransferTask) -> Progress {
        task.delegate.progressObjects(for: task).upload
    }

    /// The download `Progress` of `task` (see ``uploadProgress(for:)``).
    public func downloadProgress(for task: TransferTask) -> Progress {
        task.delegate.progressObjects(for: task).download
    }

    // MARK: - Creating tasks

    /// A data task: the body is collected in the engine and handed over once.
    ///
    /// - Parameters:
    ///   - request: The request to send.
    ///   - uploadProgress: Called on ``delegateQueue``, throttled, as the body goes out.
    ///   - downloadProgress: Called on ``delegateQueue``, throttled, as the body comes in.
    ///   - completionHandler: Called once on ``completionQueue``.
    /// - Returns: A suspended task: call ``TransferTask/resume()``.
    public func dataTask(with request: Request,
                         uploadProgress: (@Sendable (TransferProgress) -> Void)? = nil,
                         downloadProgress: (@Sendable (TransferProgress) -> Void)? = nil,
                         completionHandler: DataTask.CompletionHandler? = nil) -> DataTask
    {
        let delegate = TaskDelegate(uploadProgress: uploadProgress, downloadProgress: downloadProgress)
        if case .some(let body) = request.body {
            let task = UploadTask(session: self, identifier: nextIdentifier(), request: request, body: body,
                                  delegate: delegate, completionHandler: completionHandler)
            return register(task)
        }
        let task = DataTask(session: self, identifier: nextIdentifier(), request: request, delegate: delegate,
                            completionHandler: completionHandler)
        return register(task)
    }

    /// A data task whose completion handler gets the response serialized by
    /// ``responseSerializer``, as AFNetworking's `dataTaskWithRequest:…completionHandler:`.
    ///
    /// - Parameters:
    ///   - request: The request to send; a body makes it an upload task.
    ///   - uploadProgress: Called on ``delegateQueue`` as the body goes out.
    ///   - downloadProgress: Called on ``delegateQueue`` as the body comes in.
    ///   - serializedCompletionHandler: Called once on ``completionQueue`` with
    ///     the serialized value, or nil and the transfer's or serializer's error.
    /// - Returns: A suspended task: call ``TransferTask/resume()``.
    public func dataTask(with request: Request,
                         uploadProgress: (@Sendable (TransferProgress) -> Void)? = nil,
                         downloadProgress: (@Sendable (TransferProgress) -> Void)? = nil,
                         serializedCompletionHandler: @escaping SerializedCompletionHandler) -> DataTask
    {
        let delegate = TaskDelegate(uploadProgress: uploadProgress, downloadProgress: downloadProgress)
        var ending = DataTask.Ending()
        ending.serialized = { task, result in
            switch result {
            case .success(let value): serializedCompletionHandler(task.response, value, nil)
            case .failure(let failure): serializedCompletionHandler(task.response, nil, failure)
            }
        }
        return makeDataTask(request, delegate: delegate, completionHandler: nil, ending: ending)
    }

    /// A data task, or an upload task when `request` has a body (a streamed
    /// body as it is; GET becomes POST only through the `uploadTask` calls).
    func makeDataTask(_ request: Request, delegate: TaskDelegate, completionHandler: DataTask.CompletionHandler?,
                      ending: DataTask.Ending = DataTask.Ending()) -> DataTask
    {
        if case .some(let body) = request.body {
            return register(UploadTask(session: self, identifier: nextIdentifier(), request: request, body: body,
                                       delegate: delegate, completionHandler: completionHandler, ending: ending))
        }
        return register(DataTask(session: self, identifier: nextIdentifier(), request: request, delegate: delegate,
                                 completionHandler: completionHandler, ending: ending))
    }

    /// A data task with only a completion handler (reads as AFNetworking's
    /// `dataTaskWithRequest:completionHandler:`; a trailing closure lands here).
    public func dataTask(with request: Request, completionHandler: @escaping DataTask.CompletionHandler) -> DataTask {
        dataTask(with: request, uploadProgress: nil, downloadProgress: nil, completionHandler: completionHandler)
    }

    /// A data task that counts the response body and stores none of it: the
    /// completion gets `nil` data; ``TransferTask/countOfBytesReceived`` says
    /// how much arrived. For benchmarks and health checks.
    public func discardingDataTask(with request: Request,
                                   downloadProgress: (@Sendable (TransferProgress) -> Void)? = nil,
                                   completionHandler: DataTask.CompletionHandler? = nil) -> DataTask
    {
        let delegate = TaskDelegate(uploadProgress: nil, downloadProgress: downloadProgress)
        let task = DataTask(session: self, identifier: nextIdentifier(), request: request, delegate: delegate,
                            discardsBody: true, completionHandler: completionHandler)
        return register(task)
    }

    /// An upload task whose body is read from `fileURL` in large blocks.
    public func uploadTask(with request: Request, fromFile fileURL: URL,
                           progress: (@Sendable (TransferProgress) -> Void)? = nil,
                           completionHandler: DataTask.CompletionHandler? = nil) -> UploadTask
    {
        makeUpload(request, body: .file(fileURL), progress: progress, completionHandler: completionHandler)
    }

    /// An upload task from a file, with only a completion handler.
    public func uploadTask(with request: Request, fromFile fileURL: URL,
                           completionHandler: @escaping DataTask.CompletionHandler) -> UploadTask
    {
        uploadTask(with: request, fromFile: fileURL, progress: nil, completionHandler: completionHandler)
    }

    /// An upload task from data, with only a completion handler.
    public func uploadTask(with request: Request, from bodyData: Data,
                           completionHandler: @escaping DataTask.CompletionHandler) -> UploadTask
    {
        uploadTask(with: request, from: bodyData, progress: nil, completionHandler: completionHandler)
    }

    /// An upload task whose body is `bodyData`.
    public func uploadTask(with request: Request, from bodyData: Data,
                           progress: (@Sendable (TransferProgress) -> Void)? = nil,
                           completionHandler: DataTask.CompletionHandler? = nil) -> UploadTask
    {
        makeUpload(request, body: .data(bodyData), progress: progress, completionHandler: completionHandler)
    }

    /// An upload task whose body is the request's stream body
    /// (`Request.Body.stream`); the `taskNeedNewBodyStream` hook supplies a
    /// fresh stream when the body must be sent again.
    public func uploadTask(withStreamedRequest request: Request,
                           progress: (@Sendable (TransferProgress) -> Void)? = nil,
                           completionHandler: DataTask.CompletionHandler? = nil) -> UploadTask
    {
        let body = request.body ?? .data(Data())
        return makeUpload(request, body: body, progress: progress, completionHandler: completionHandler)
    }

    private func makeUpload(_ request: Request, body: Request.Body,
                            progress: (@Sendable (TransferProgress) -> Void)?,
                            completionHandler: DataTask.CompletionHandler?) -> UploadTask
    {
        var request = request
        request.body = body
        if request.method == .get { request.method = .post }
        let delegate = TaskDelegate(uploadProgress: progress, downloadProgress: nil)
        let task = UploadTask(session: self, identifier: nextIdentifier(), request: request, body: body,
                              delegate: delegate, completionHandler: completionHandler)
        return register(task)
    }

    /// A download task: the body goes to disk from the engine.
    ///
    /// - Parameters:
    ///   - request: The request to send.
    ///   - progress: Called on ``delegateQueue`` as the body comes in.
    ///   - destination: Called on ``delegateQueue`` when the download finished,
    ///     with the temporary file and the response; the file is moved there.
    ///   - completionHandler: Called once on ``completionQueue`` with the final
    ///     file URL. Without a destination the file is removed after the call.
    public func downloadTask(with request: Request,
                             progress: (@Sendable (TransferProgress) -> Void)? = nil,
                             destination: DownloadTask.Destination? = nil,
                             completionHandler: DownloadTask.CompletionHandler? = nil) -> DownloadTask
    {
        let delegate = TaskDelegate(uploadProgress: nil, downloadProgress: progress)
        let task = DownloadTask(session: self, identifier: nextIdentifier(), request: request, delegate: delegate,
                                fixedDestination: nil, destination: destination, resume: nil,
                                completionHandler: completionHandler)
        return register(task)
    }

    /// A download task that writes `<destination>.part` and renames it to
    /// `destination` on success (nothing is left there on failure).
    ///
    /// Missing folders of `destination` are created. The part file is 0600;
    /// the placed file gets mode 0666 less the umask, as curl's files.
    public func downloadTask(with request: Request, to destination: URL,
                             progress: (@Sendable (TransferProgress) -> Void)? = nil,
                             completionHandler: DownloadTask.CompletionHandler? = nil) -> DownloadTask
    {
        let delegate = TaskDelegate(uploadProgress: nil, downloadProgress: progress)
        let task = DownloadTask(session: self, identifier: nextIdentifier(), request: request, delegate: delegate,
                                fixedDestination: destination, destination: nil, resume: nil,
                                completionHandler: completionHandler)
        return register(task)
    }

    /// A download to a fixed destination with only a completion handler.
    public func downloadTask(with request: Request, to destination: URL,
                             completionHandler: @escaping DownloadTask.CompletionHandler) -> DownloadTask
    {
        downloadTask(with: request, to: destination, progress: nil, completionHandler: completionHandler)
    }

    /// A download with a destination closure and a completion handler (no progress closure).
    public func downloadTask(with request: Request, destination: DownloadTask.Destination?,
                             completionHandler: @escaping DownloadTask.CompletionHandler) -> DownloadTask
    {
        downloadTask(with: request, progress: nil, destination: destination, completionHandler: completionHandler)
    }

    /// Continues a download from resume data made by
    /// ``DownloadTask/cancel(byProducingResumeData:)``: `Range` + `If-Range`;
    /// a server that ignores the range or a changed file restarts from zero.
    ///
    /// - Throws: ``TransferError/Code/invalidResumeData`` for corrupt or
    ///   foreign data, or a partial file that is gone.
    public func downloadTask(withResumeData resumeData: Data,
                             progress: (@Sendable (TransferProgress) -> Void)? = nil,
                             destination: DownloadTask.Destination? = nil,
                             completionHandler: DownloadTask.CompletionHandler? = nil) throws(TransferError)
        -> DownloadTask
    {
        let resume = try ResumeData.decode(resumeData, temporaryFolder: temporaryDirectory.path)
        let delegate = TaskDelegate(uploadProgress: nil, downloadProgress: progress)
        let task = DownloadTask(session: self, identifier: nextIdentifier(), request: resume.request,
                                delegate: delegate, fixedDestination: nil, destination: destination, resume: resume,
                                completionHandler: completionHandler)
        return register(task)
    }

    /// The download task that takes `dataTask`'s transfer (`engineID`) over
    /// after `.becomeDownload`: same request, delegate and counters. Not
    /// registered until ``adopt(_:from:)``.
    func makeAdoptedDownloadTask(from dataTask: DataTask, response: HTTPResponse, engineID: UInt64) -> DownloadTask {
        let task = DownloadTask(session: self, identifier: nextIdentifier(), request: dataTask.originalRequest,
                                delegate: dataTask.delegate, fixedDestination: nil, destination: nil, resume: nil,
                                completionHandler: nil, adopting: (dataTask, engineID))
        task.core.withLock { core in
            core.response = response
            core.currentRequest = dataTask.currentRequest
            core.upload = dataTask.progress(.upload)
            core.download = dataTask.progress(.download)
        }
        return task
    }

    /// The task lists show the download instead of the data task it took over.
    func adopt(_ download: DownloadTask, from dataTask: DataTask) {
        state.withLock { state in
            state.tasks[download.taskIdentifier] = download
            state.tasks.removeValue(forKey: dataTask.taskIdentifier)
        }
    }

    func nextIdentifier() -> Int {
        Self.identifiers.add(1, ordering: .relaxed).newValue
    }

    func register<T: TransferTask>(_ task: T) -> T {
        let (invalidated, description) = state.withLock { state -> (Bool, String?) in
            guard !state.invalidated else { return (true, nil) }
            state.tasks[task.taskIdentifier] = task
            return (false, state.taskDescriptionForTasks)
        }
        observation.taskDidCreate(task)
        if invalidated {
            // The task exists so the caller's code stays simple, but it can
            // only fail: the session is gone.
            let error = TransferError(.sessionInvalidated, "the session was invalidated; no new task can start",
                                      url: task.originalRequest.url)
            if case .finishLocally(let error) = task.core.withLock({ $0.life.failBeforeStart(error) }) {
                task.finishLocally(error)
            }
        } else if let description {
            task.taskDescription = description
        }
        return task
    }

    func forget(_ task: TransferTask) {
        let lastAfterInvalidation = state.withLock { state -> Bool in
            state.tasks.removeValue(forKey: task.taskIdentifier)
            return state.invalidated && state.tasks.isEmpty && !state.invalidationNotified
        }
        if lastAfterInvalidation { notifyInvalidation() }
    }

    // The engine spec is built in Bridging/RequestSpec.swift (fillSpec, fastSpec).

    // MARK: - Events from tasks (delegate queue unless noted)

    /// Redirects go through Swift when someone may want to see or change them.
    var handlesRedirectsManually: Bool {
        state.withLock { configuration.followRedirects && ($0.hooks.taskWillPerformHTTPRedirection != nil || $0.delegate != nil) }
    }

    /// 401 challenges go to a hook or the delegate when one is set.
    var handlesChallenges: Bool {
        state.withLock { $0.hooks.taskDidReceiveChallenge != nil || $0.asksAboutServerTrust }
    }

    /// The hook and the delegate, read once under the lock.
    /// The response cache's trust tag now (Cache/SecurityPolicy+Cache.swift;
    /// nil: weakened, refused, or overridden by a server-trust hook).
    var cacheTrustTag: String? { state.withLock { $0.cacheTrustTag } }

    var observers: (hooks: SessionHooks, delegate: (any SessionDelegate)?) {
        state.withLock { ($0.hooks, $0.delegate) }
    }

    func willPerformRedirection(task: TransferTask, response: HTTPResponse, newRequest: Request) -> Request? {
        let (hooks, delegate) = state.withLock { ($0.hooks, $0.delegate) }
        if let hook = hooks.taskWillPerformHTTPRedirection { return hook(self, task, response, newRequest) }
        if let delegate { return delegate.session(self, task: task, willPerformRedirection: response, newRequest: newRequest) }
        return newRequest
    }

    /// A 401 challenge, on the delegate queue: the AF-style handler (which
    /// may defer, then calls `later` once), else the task hook, the session
    /// hook, the delegate.
    func didReceiveChallenge(task: TransferTask, challenge: AuthenticationChallenge,
                             later: @escaping ChallengeCompletion) -> ChallengeAnswer
    {
        let (hooks, delegate) = state.withLock { ($0.hooks, $0.delegate) }
        if let handler = hooks.authenticationChallengeHandler { return handler(self, task, challenge, later) }
        if let hook = hooks.taskDidReceiveChallenge { return .disposition(hook(self, task, challenge)) }
        if let hook = hooks.sessionDidReceiveChallenge { return .disposition(hook(self, challenge)) }
        if let delegate { return .disposition(delegate.session(self, task: task, didReceive: challenge)) }
        return .disposition(.performDefaultHandling)
    }

    /// Once per task, on the delegate queue: hooks, delegate, notification,
    /// completion handler (queued), then the async waiter.
    ///
    /// A data task that became a download gets no `taskDidComplete` hook or
    /// delegate call (as with URLSession, those went to the download task);
    /// its notification, observers, completion handler and waiter still run.
    func taskDidComplete(_ task: TransferTask, error: TransferError?, outcome: Outcome?, waiter: (any TaskWaiter)?) {
        let (hooks, delegate) = state.withLock { ($0.hooks, $0.delegate) }
        let handedOver = !(task is DownloadTask) && error?.downloadTask != nil
        if !handedOver { observation.taskDidComplete(task, metrics: outcome?.metrics, error: error) }
        if let metrics = outcome?.metrics {
            hooks.taskDidFinishCollectingMetrics?(self, task, metrics)
            delegate?.session(self, task: task, didFinishCollecting: metrics)
        }
        if !handedOver {
            hooks.taskDidComplete?(self, task, error)
            delegate?.session(self, task: task, didCompleteWithError: error)
        }

        var userInfo: [String: Any] = [:]
        if let error { userInfo[TransferNotificationKey.error] = error }
        if let metrics = outcome?.metrics { userInfo[TransferNotificationKey.metrics] = metrics }
        if let response = task.response { userInfo[TransferNotificationKey.response] = response }

        // Out of the task lists before anyone hears of the completion.
        forget(task)
        if let data = task as? DataTask {
            data.callCompletion(error: error, hasWaiter: waiter != nil)
            if let body = data.resultData { userInfo[TransferNotificationKey.responseData] = body }
            // The response serializer (AF's) runs off this queue; it queues
            // the serialized handler, posts the notification, then wakes the waiter.
            data.deliverSerialized(error: error, userInfo: userInfo, waiter: waiter)
            return
        } else {
            userInfo[TransferNotificationKey.responseSerializer] = responseSerializer
            if let download = task as? DownloadTask {
                download.callCompletion(error: error)
                if let url = download.fileURL {
                    userInfo[TransferNotificationKey.assetPath] = url
                    // As AF: a download's serialized response is its file.
                    userInfo[TransferNotificationKey.serializedResponse] = url
                }
            }
            // As AF: posted after the completion handler was queued.
            postNotification(.transferTaskDidComplete, task: task, userInfo: userInfo)
        }
        waiter?.taskDidComplete(task, error: error)
    }

    /// Runs `body` on the completion queue, inside the completion group.
    func runCompletion(_ body: @escaping @Sendable () -> Void) {
        let (queue, group) = state.withLock { ($0.completionQueue, $0.completionGroup) }
        (queue ?? Self.defaultCompletionQueue).async(group: group, execute: body)
    }

    /// Where response serializers run: concurrent (JSON from many tasks is
    /// parsed at once), never the serial delegate queue; inside the
    /// completion group, since a serialized handler follows.
    func runSerialization(_ body: @escaping @Sendable () -> Void) {
        let group = state.withLock { $0.completionGroup }
        Self.serializationQueue.async(group: group, execute: body)
    }

    private static let serializationQueue = DispatchQueue(label: "transfer.serialization", attributes: .concurrent)

    func postTaskNotification(_ name: Notification.Name, task: TransferTask) {
        postNotification(name, task: task, userInfo: [:])
    }

    /// - Parameter fromAnyQueue: Post on the calling thread (a task's last
    ///   notification, after serialization); otherwise from the delegate queue.
    func postNotification(_ name: Notification.Name, task: TransferTask, userInfo: [String: Any],
                          fromAnyQueue: Bool = false)
    {
        // NotificationCenter is thread-safe; posting from the delegate queue
        // keeps notifications in the order of the events they describe.
        let info = UncheckedUserInfo(value: userInfo)
        let post: @Sendable () -> Void = { NotificationCenter.default.post(name: name, object: task, userInfo: info.value) }
        if fromAnyQueue || DispatchQueue.getSpecific(key: queueKey) != nil {
            post()
        } else {
            delegateQueue.async(execute: post)
        }
    }

    // MARK: - Invalidation

    /// Invalidates the session: no new task can be created afterwards.
    ///
    /// - Parameters:
    ///   - cancelPendingTasks: Cancel running tasks (true) or let them finish (false).
    ///   - resetSession: Also ``reset()`` the session, as AFNetworking does
    ///     (after the cancels, when `cancelPendingTasks`).
    public func invalidateSession(cancelPendingTasks: Bool, resetSession: Bool = false) {
        let pending: [TransferTask]? = state.withLock { state in
            guard !state.invalidated else { return nil }
            state.invalidated = true
            return Array(state.tasks.values)
        }
        // Requests on the fast path are not tasks: none starts from now on,
        // and those running are cancelled with the tasks.
        let fast = engine.pass.registry.close()
        guard let pending else { return }
        if cancelPendingTasks {
            for task in pending { task.cancel() }
            for work in fast { work.cancel() }
        }
        if resetSession { reset() }
        notifyIfIdle()
    }

    /// Forgets what the session kept between transfers (URLSession's
    /// `reset`): idle pooled connections are closed, and no later transfer
    /// reuses a connection or resumes a TLS session made before the reset
    /// (connections busy now are closed once idle); then the reset actions
    /// of the session's stores run (`resetCookiesAndCache()`). Running
    /// transfers continue. Safe from any thread.
    public func reset() {
        let (policy, refusal) = state.withLock { ($0.securityPolicy, $0.securityPolicyError) }
        // The engine's trust-policy command starts a new connection
        // generation: later transfers get a new trust marker (no reuse, no
        // TLS resumption across it) and idle sockets of older ones are shut.
        // The same policy is installed again; a failed-closed session stays so.
        if let refusal {
            failClosed(refusal)
        } else {
            do throws(TransferError) {
                try installSecurityPolicy(policy)
            } catch {
                failClosed(error)
            }
        }
        resetCookiesAndCache()
    }

    /// Registers what ``reset()`` must clear in a store of the session (its
    /// cookies, its response cache). Runs on the thread that resets.
    func addResetAction(_ action: @escaping @Sendable () -> Void) {
        state.withLock { $0.resetActions.append(action) }
    }

    /// Runs the registered reset actions, in the order they were added.
    func resetCookiesAndCache() {
        for action in state.withLock({ $0.resetActions }) { action() }
    }

    /// Cancels every task and invalidates the session.
    public func invalidateAndCancel() { invalidateSession(cancelPendingTasks: true) }

    /// Invalidates once running tasks have finished.
    public func finishTasksAndInvalidate() { invalidateSession(cancelPendingTasks: false) }

    private func notifyIfIdle() {
        let idle = state.withLock { $0.tasks.isEmpty && !$0.invalidationNotified }
        if idle { notifyInvalidation() }
    }

    /// Once, on the delegate queue, after the last task of an invalidated session.
    private func notifyInvalidation() {
        delegateQueue.async { [self] in
            let claim = state.withLock { state -> (SessionHooks, (any SessionDelegate)?)? in
                guard !state.invalidationNotified else { return nil }
                state.invalidationNotified = true
                defer { state.delegate = nil }
                return (state.hooks, state.delegate)
            }
            guard let (hooks, delegate) = claim else { return }
            hooks.sessionDidBecomeInvalid?(self, nil)
            delegate?.session(self, didBecomeInvalidWithError: nil)
            NotificationCenter.default.post(name: .transferSessionDidInvalidate, object: self)
        }
    }

    /// Whether the session was invalidated; new tasks then fail with
    /// ``TransferError/Code/sessionInvalidated``.
    public var isInvalidated: Bool { state.withLock { $0.invalidated } }
}


/// Notification userInfo crossing to another queue. @unchecked Sendable:
/// the dictionary is built once and only read after the hop.
struct UncheckedUserInfo: @unchecked Sendable {
    let value: [String: Any]
}

/// At most one pin report per host and pattern per interval.
private final class ReportLimiter: Sendable {
    private let interval: TimeInterval
    private let last = Protected<[String: Date]>([:])

    init(interval: TimeInterval) { self.interval = interval }

    func admit(_ report: PinFailureReport) -> Bool {
        let key = report.host + "|" + report.pattern
        return last.withLock { last in
            if let previous = last[key], report.date.timeIntervalSince(previous) < interval { return false }
            last[key] = report.date
            return true
        }
    }
}

/// One answer of a server-trust challenge hook, handed from the delegate
/// queue to the engine thread that waits for it with a bound. The first
/// real answer counts; `.deferred` is not one.
/// @unchecked Sendable: `value` is guarded by `condition`.
private final class ChallengeAnswerBox: @unchecked Sendable {
    private let condition = NSCondition()
    private var value: ChallengeAnswer?

    func set(_ answer: ChallengeAnswer) {
        if case .deferred = answer { return }
        condition.withLock {
            guard value == nil else { return }
            value = answer
            condition.broadcast()
        }
    }

    /// The answer, or nil when none came within `timeout` seconds.
    func wait(timeout: TimeInterval) -> ChallengeAnswer? {
        let deadline = Date(timeIntervalSinceNow: timeout)
        return condition.withLock {
            while value == nil {
                if !condition.wait(until: deadline) { break }
            }
            return value
        }
    }
}
