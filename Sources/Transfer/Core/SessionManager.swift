import Dispatch
import FoundationEssentials
import Logging
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
    /// The engine; its deinit (when the session goes) stops the loop: every
    /// transfer finishes, as cancelled, and releases its task.
    let engine: Engine
    /// What tasks ask of the engine for their transfers: `engine`, or a
    /// test's own (``TransferEngine``).
    let transfers: any TransferEngine
    /// Tests only: runs on the submitting thread after the engine accepted a
    /// task's transfer and before the task records its id (with the task's
    /// lock held), to widen that window on purpose.
    package let afterEngineSubmitForTesting = TestSeam<UInt64>()
    /// Serial queue for hooks, delegate calls and progress closures.
    public let delegateQueue: DispatchQueue
    let temporaryDirectory: URL
    /// Batches engine-thread events onto `delegateQueue`.
    let mailbox: Mailbox
    /// Event monitors and the logger (Observation/SessionObservation.swift).
    let observation: SessionObservation
    let state: Protected<State>
    /// Opened once the session has become invalid (SessionManager+Shutdown.swift).
    let invalidation = Latch()
    private static let identifiers = Atomic<Int>(0)
    /// Whether `configuration.httpAdditionalHeaders` sets a User-Agent
    /// (then no request gets the default one).
    let sessionSetsUserAgent: Bool
    /// No hook and no delegate: requests may take the fast path (``usesFastPath``).
    let fastPathOpen = Atomic<Bool>(true)
    /// Requests go without a proxy and libcurl reads no proxy variable
    /// (``ProxySetting/goesDirect(environmentNamesProxy:)``), decided once.
    let goesDirect: Bool

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
    public convenience init(configuration: SessionConfiguration = .default) throws(TransferError) {
        try self.init(configuration: configuration, transferEngine: nil)
    }

    /// A session whose tasks ask `transferEngine` (made from the real engine)
    /// for their transfers instead of the engine itself: the seam of tests
    /// that drive a task event by event.
    init(configuration: SessionConfiguration,
         transferEngine: ((Engine) -> any TransferEngine)?) throws(TransferError)
    {
        self.configuration = configuration
        sessionSetsUserAgent = configuration.httpAdditionalHeaders.containsUserAgent
        goesDirect = configuration.proxy.goesDirect(environmentNamesProxy: ProxySetting.environmentNamesProxy())
        let label = "transfer.session.\(ObjectIdentifier(Self.self).hashValue)"
        delegateQueue = DispatchQueue(label: label + ".delegate")
        cookieStore = configuration.cookieStore.map { $0.isPlaceholder ? CookieStore() : $0 }
        responseCache = configuration.responseCache
        engine = try Engine(configuration: configuration, delegateQueue: delegateQueue, cookieStore: cookieStore)
        mailbox = engine.mailbox
        transfers = transferEngine?(engine) ?? engine
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

    let queueKey = DispatchSpecificKey<Bool>()

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

    static let defaultCompletionQueue = DispatchQueue(label: "transfer.completion")

    /// All tasks that have not completed.
    public var tasks: [TransferTask] { state.withLock { $0.tasks.values.sorted { $0.taskIdentifier < $1.taskIdentifier } } }
    /// The data tasks not yet completed (upload tasks aside).
    public var dataTasks: [DataTask] { tasks.compactMap { $0 as? DataTask }.filter { !($0 is UploadTask) } }
    /// The upload tasks not yet completed.
    public var uploadTasks: [UploadTask] { tasks.compactMap { $0 as? UploadTask } }
    /// The download tasks not yet completed.
    public var downloadTasks: [DownloadTask] { tasks.compactMap { $0 as? DownloadTask } }

    func nextIdentifier() -> Int {
        Self.identifiers.add(1, ordering: .relaxed).newValue
    }

    func register<T: TransferTask>(_ task: T) -> T {
        let (invalidated, description) = state.withLock { state -> (Bool, String?) in
            // A request of work admitted before the invalidation (a batch) still runs.
            guard !state.invalidated || SessionAdmission.admits(self) else { return (true, nil) }
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
                && engine.pass.registry.isDrained
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

    /// A 401 challenge, on the delegate queue, to whoever answers it
    /// (``ChallengeAnswerer``: the AF-style handler may defer, then calls
    /// `later` once).
    func didReceiveChallenge(task: TransferTask, challenge: AuthenticationChallenge,
                             later: @escaping ChallengeCompletion) -> ChallengeAnswer
    {
        let (hooks, delegate) = state.withLock { ($0.hooks, $0.delegate) }
        switch ChallengeAnswerer.forAuthentication(hooks: hooks, delegate: delegate) {
        case .handler(let handler): return handler(self, task, challenge, later)
        case .taskHook(let hook): return .disposition(hook(self, task, challenge))
        case .sessionHook(let hook): return .disposition(hook(self, challenge))
        case .delegate(let delegate): return .disposition(delegate.session(self, task: task, didReceive: challenge))
        case .nobody: return .disposition(.performDefaultHandling)
        }
    }

}

/// Notification userInfo crossing to another queue. @unchecked Sendable:
/// the dictionary is built once and only read after the hop.
struct UncheckedUserInfo: @unchecked Sendable {
    let value: [String: Any]
}
