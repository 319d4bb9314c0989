import Dispatch
import FoundationEssentials

/// A session manager for one HTTP API: a base URL, a request serializer, a
/// response serializer, and one method per verb (AFNetworking's
/// `AFHTTPSessionManager`).
///
/// ```swift
/// let api = try HTTPSessionManager(baseURL: URL(string: "https://api.example.com/v1"))
/// api.GET("users", parameters: ["page": 2], success: { task, value in
///     if let json = value as? JSONValue { print(json) }
/// }, failure: { task, error in
///     print(error.httpStatus ?? 0, error)
/// })
/// let user = try await api.get("users/7", as: User.self)
/// ```
///
/// Composition, not inheritance: ``SessionManager`` is `final`, so this type
/// owns one (``session``) and forwards what most callers need — tasks,
/// hooks, the delegate, queues, progress objects, invalidation. Anything else
/// (download tasks, uploads from files) is on ``session`` itself. Several
/// managers may share one session through ``init(baseURL:session:)``.
///
/// The closure verbs keep AFNetworking's upper-case names (`GET`, `POST`, ...)
/// so code ported from Objective-C reads the same, and so they stand apart
/// from the lower-case async/await verbs (`get`, `post`, ...).
///
/// Threads: every property is safe to read and write from any thread. Request
/// building runs on the caller's thread; response serialization and
/// `success`/`failure` run on ``completionQueue``, never on the engine thread;
/// progress closures run on the session's `delegateQueue`.
public final class HTTPSessionManager: Sendable, CustomStringConvertible {
    /// Receives the task and the response serializer's value (nil for an
    /// empty body with the default JSON serializer).
    public typealias Success = @Sendable (DataTask, (any Sendable)?) -> Void
    /// Receives the task (nil when no task was created because the request
    /// could not be built) and the error, with the response and body attached
    /// when there were any (``TransferError/response``, ``TransferError/responseData``).
    public typealias Failure = @Sendable (DataTask?, TransferError) -> Void
    /// Throttled progress of one direction of a task.
    public typealias ProgressHandler = @Sendable (TransferProgress) -> Void

    /// The session that runs the tasks.
    public let session: SessionManager

    /// Relative paths are resolved against this URL. A non-empty path always
    /// ends in `/` (`http://h/v1` is kept as `http://h/v1/`), so `users`
    /// resolves to `http://h/v1/users` and `/users` to `http://h/users`.
    public let baseURL: URL?

    private let state: Protected<State>

    fileprivate struct State {
        var requestSerializer: HTTPRequestSerializer
        var responseSerializer: any ResponseSerializer
    }

    /// Creates a manager with its own session.
    ///
    /// - Parameters:
    ///   - baseURL: The URL relative paths resolve against; nil means every
    ///     path must be an absolute URL.
    ///   - configuration: For the new session.
    /// - Throws: ``TransferError`` when the session's engine cannot start.
    public convenience init(baseURL: URL? = nil, configuration: SessionConfiguration = .default) throws(TransferError) {
        self.init(baseURL: baseURL, session: try SessionManager(configuration: configuration))
    }

    /// Creates a manager over an existing session (shared with other managers
    /// or used directly as well).
    public init(baseURL: URL?, session: SessionManager) {
        self.baseURL = baseURL.map(Self.normalizedBaseURL)
        self.session = session
        state = Protected(State(requestSerializer: HTTPRequestSerializer(), responseSerializer: JSONResponseSerializer()))
    }

    /// `url` with a `/` appended to a non-empty path that lacks one
    /// (AFNetworking's `initWithBaseURL:`); query and fragment are kept.
    static func normalizedBaseURL(_ url: URL) -> URL {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true) else { return url }
        let path = components.percentEncodedPath
        guard !path.isEmpty, !path.hasSuffix("/") else { return components.url ?? url }
        components.percentEncodedPath = path + "/"
        return components.url ?? url
    }

    // MARK: - Serializers

    /// Builds every request; default an ``HTTPRequestSerializer`` (query
    /// string for GET/HEAD/DELETE, form body otherwise). Set a
    /// ``JSONRequestSerializer`` for JSON bodies.
    public var requestSerializer: HTTPRequestSerializer {
        get { state.withLock { $0.requestSerializer } }
        set { state.withLock { $0.requestSerializer = newValue } }
    }

    /// Validates and decodes every response; default a ``JSONResponseSerializer``.
    /// Read when a task completes, so a change applies to running tasks too
    /// (as in AFNetworking).
    public var responseSerializer: any ResponseSerializer {
        get { state.withLock { $0.responseSerializer } }
        set { state.withLock { $0.responseSerializer = newValue } }
    }

    // MARK: - Security policy

    /// Refuses a pinning security policy on a manager whose base URL is not
    /// `https` (AFNetworking raises an exception there; this throws).
    ///
    /// Pinning only means something for TLS connections, and a manager without
    /// an https base URL would send pinned and unpinned requests alike.
    ///
    /// - Parameter pinning: Whether the policy pins (its pinning mode is not `.none`).
    /// - Throws: ``TransferError/Code/invalidRequest`` when `pinning` is true
    ///   and ``baseURL`` is nil or not https.
    public func validateSecurityPolicy(pinning: Bool) throws(TransferError) {
        try Self.validateSecurityPolicy(pinning: pinning, baseURL: baseURL)
    }

    /// The session's server-trust policy (see ``SessionManager/securityPolicy``).
    public var securityPolicy: SecurityPolicy { session.securityPolicy }

    /// Installs `policy` for the manager's connections.
    ///
    /// - Throws: ``TransferError/Code/invalidRequest`` for a pinning policy on a
    ///   manager whose base URL is not https, or for an invalid policy.
    public func setSecurityPolicy(_ policy: SecurityPolicy) throws(TransferError) {
        let pins = policy.pinningMode != .none || !policy.pinnedPublicKeyHashes.isEmpty
        try validateSecurityPolicy(pinning: pins)
        try session.setSecurityPolicy(policy)
    }

    /// ``validateSecurityPolicy(pinning:)`` for any base URL.
    public static func validateSecurityPolicy(pinning: Bool, baseURL: URL?) throws(TransferError) {
        guard pinning else { return }
        guard baseURL?.scheme?.lowercased() == "https" else {
            throw TransferError(
                .invalidRequest,
                "a pinning security policy can only be applied to a manager with an https base URL, not "
                    + (baseURL.map { $0.absoluteString.debugDescription } ?? "no base URL"),
                url: baseURL)
        }
    }

    // MARK: - Forwarded from the session

    /// The configuration of the underlying ``SessionManager``.
    public var configuration: SessionConfiguration { session.configuration }

    /// Where `success` and `failure` run (and completion handlers of the
    /// session's other tasks); nil means the session's private serial queue.
    public var completionQueue: DispatchQueue? {
        get { session.completionQueue }
        set { session.completionQueue = newValue }
    }

    /// Entered before and left after each `success`/`failure` call, when set.
    public var completionGroup: DispatchGroup? {
        get { session.completionGroup }
        set { session.completionGroup = newValue }
    }

    /// The session's hooks (see ``SessionHooks``).
    public var hooks: SessionHooks {
        get { session.hooks }
        set { session.hooks = newValue }
    }

    /// The session's delegate.
    public var delegate: (any SessionDelegate)? {
        get { session.delegate }
        set { session.delegate = newValue }
    }

    /// The tasks not yet completed, of every kind (``SessionManager/tasks``).
    public var tasks: [TransferTask] { session.tasks }
    /// The data tasks not yet completed (upload tasks aside).
    public var dataTasks: [DataTask] { session.dataTasks }
    /// The upload tasks not yet completed.
    public var uploadTasks: [UploadTask] { session.uploadTasks }
    /// The download tasks not yet completed.
    public var downloadTasks: [DownloadTask] { session.downloadTasks }

    /// See ``SessionManager/invalidateSession(cancelPendingTasks:resetSession:)``.
    public func invalidateSession(cancelPendingTasks: Bool, resetSession: Bool = false) {
        session.invalidateSession(cancelPendingTasks: cancelPendingTasks, resetSession: resetSession)
    }

    /// See ``SessionManager/reset()``.
    public func reset() { session.reset() }

    /// The session's reachability monitor (see ``SessionManager/reachabilityManager``).
    public var reachabilityManager: NetworkReachability {
        get { session.reachabilityManager }
        set { session.reachabilityManager = newValue }
    }

    /// Cancels every task and invalidates the session.
    public func invalidateAndCancel() { session.invalidateAndCancel() }

    /// Invalidates the session once running tasks have finished.
    public func finishTasksAndInvalidate() { session.finishTasksAndInvalidate() }

    public var description: String {
        "<HTTPSessionManager baseURL: \(baseURL?.absoluteString ?? "nil"), session: \(session)>"
    }

    // MARK: - Building requests

    /// `path` resolved against ``baseURL`` as `NSURL`'s `URLWithString:relativeToURL:`
    /// does (RFC 3986): `foo` appends to the base path, `/foo` replaces it,
    /// `//host/foo` and `http://host/foo` replace more. An empty path is the
    /// base URL itself.
    ///
    /// - Returns: An absolute URL, or nil when `path` is not a URL reference
    ///   (Foundation percent-encodes spaces and non-ASCII letters rather than
    ///   refusing them).
    public func url(for path: String) -> URL? {
        Self.resolve(path, against: baseURL)
    }

    /// ``url(for:)`` for any (already normalized) base URL.
    static func resolve(_ path: String, against baseURL: URL?) -> URL? {
        // NSURL resolves an empty reference to the base; Foundation on Linux
        // returns nil, so answer RFC 3986's way here (the base, no fragment).
        if path.isEmpty {
            guard let baseURL, var components = URLComponents(url: baseURL, resolvingAgainstBaseURL: true) else {
                return nil
            }
            components.fragment = nil
            return components.url
        }
        guard let resolved = URL(string: path, relativeTo: baseURL) else { return nil }
        // Hand the engine a URL that stands alone, not a (relative, base) pair.
        return URL(string: resolved.absoluteString)
    }

    /// The request the manager would send for `method` and `path`.
    ///
    /// - Parameters:
    ///   - method: The HTTP method.
    ///   - path: Resolved with ``url(for:)``: relative to ``baseURL``, or absolute.
    ///   - parameters: Encoded by ``requestSerializer`` (query string or body).
    ///   - headers: Set over the request serializer's headers.
    /// - Returns: The request, not sent.
    /// - Throws: ``TransferError/Code/invalidRequest`` for a path that makes no
    ///   http(s) URL, parameters the serializer cannot encode, or an invalid
    ///   header (a CR or LF in a value, a bad name).
    public func request(
        method: HTTPMethod, path: String, parameters: JSONValue? = nil, headers: HTTPHeaders? = nil
    ) throws(TransferError) -> Request {
        try requestSerializer.request(method: method, url: try resolve(path), parameters: parameters,
                                      headers: headers ?? [:])
    }

    private func resolve(_ path: String) throws(TransferError) -> URL {
        guard let url = url(for: path) else {
            throw TransferError(
                .invalidRequest,
                "cannot make a URL of \(path.debugDescription) relative to \(baseURL?.absoluteString ?? "no base URL")",
                url: baseURL)
        }
        return url
    }

    /// A multipart form request for `path` (see
    /// ``HTTPRequestSerializer/multipartFormRequest(method:url:parameters:headers:constructingBody:)``).
    ///
    /// - Throws: as ``request(method:path:parameters:headers:)``, and
    ///   ``TransferError/Code/invalidRequest`` for GET or HEAD.
    public func multipartFormRequest(
        method: HTTPMethod = .post, path: String, parameters: JSONValue? = nil, headers: HTTPHeaders? = nil,
        constructingBody: (inout MultipartFormData) throws -> Void
    ) throws(TransferError) -> Request {
        try requestSerializer.multipartFormRequest(
            method: method, url: try resolve(path), parameters: parameters, headers: headers ?? [:],
            constructingBody: constructingBody)
    }

    // MARK: - Tasks

    /// A data task for `method` and `path`, not yet resumed (AFNetworking's
    /// `dataTaskWithHTTPMethod:URLString:parameters:headers:uploadProgress:downloadProgress:success:failure:`).
    ///
    /// - Parameters:
    ///   - method: The HTTP method.
    ///   - path: Resolved with ``url(for:)``.
    ///   - parameters: Encoded by ``requestSerializer``.
    ///   - headers: Set over the request serializer's headers.
    ///   - uploadProgress: On the session's delegate queue, as the body goes out.
    ///   - downloadProgress: On the session's delegate queue, as the body comes in.
    ///   - success: On ``completionQueue`` with the serialized response.
    ///   - failure: On ``completionQueue`` with a transfer, validation or
    ///     serialization error.
    /// - Returns: A suspended task, or nil when the request could not be built;
    ///   `failure` is then called with a nil task, asynchronously on ``completionQueue``.
    public func dataTask(
        method: HTTPMethod, path: String, parameters: JSONValue? = nil, headers: HTTPHeaders? = nil,
        uploadProgress: ProgressHandler? = nil, downloadProgress: ProgressHandler? = nil,
        success: Success? = nil, failure: Failure? = nil
    ) -> DataTask? {
        let request: Request
        do {
            request = try self.request(method: method, path: path, parameters: parameters, headers: headers)
        } catch {
            reportBuildFailure(error, to: failure)
            return nil
        }
        let delegate = TaskDelegate(uploadProgress: uploadProgress, downloadProgress: downloadProgress)
        return session.makeDataTask(request, delegate: delegate, completionHandler: nil,
                                    ending: ending(success: success, failure: failure))
    }

    /// Calls `failure` with a nil task, later, on the completion queue: the
    /// caller has not even seen the nil return yet (AFNetworking does the same).
    private func reportBuildFailure(_ error: TransferError, to failure: Failure?) {
        guard let failure else { return }
        session.runCompletion { failure(nil, error) }
    }

    /// Starts `task` (when there is one) and hands it back.
    private func resumed(_ task: DataTask?) -> DataTask? {
        task?.resume()
        return task
    }

    // MARK: - Verbs

    /// Sends GET; `parameters` go into the query string.
    ///
    /// - Parameters:
    ///   - path: Resolved with ``url(for:)``.
    ///   - parameters: Encoded by ``requestSerializer``.
    ///   - headers: Set over the request serializer's headers.
    ///   - progress: Download progress, on the session's delegate queue.
    ///   - success: On ``completionQueue`` with the response serializer's value.
    ///   - failure: On ``completionQueue``.
    /// - Returns: The running task, or nil when the request could not be built
    ///   (`failure` is then called asynchronously with a nil task).
    @discardableResult
    public func GET(
        _ path: String, parameters: JSONValue? = nil, headers: HTTPHeaders? = nil, progress: ProgressHandler? = nil,
        success: Success? = nil, failure: Failure? = nil
    ) -> DataTask? {
        resumed(dataTask(method: .get, path: path, parameters: parameters, headers: headers,
                         downloadProgress: progress, success: success, failure: failure))
    }

    /// Sends HEAD; `success` gets only the task (its ``TransferTask/response``
    /// has the head). A status outside the response serializer's acceptable
    /// codes still calls `failure`.
    ///
    /// - Returns: As ``GET(_:parameters:headers:progress:success:failure:)``.
    @discardableResult
    public func HEAD(
        _ path: String, parameters: JSONValue? = nil, headers: HTTPHeaders? = nil,
        success: (@Sendable (DataTask) -> Void)? = nil, failure: Failure? = nil
    ) -> DataTask? {
        var headSuccess: Success?
        if let success {
            headSuccess = { task, _ in success(task) }
        }
        return resumed(dataTask(method: .head, path: path, parameters: parameters, headers: headers,
                                success: headSuccess, failure: failure))
    }

    /// Sends POST; `parameters` become the body (form-encoded, or JSON with a
    /// ``JSONRequestSerializer``).
    ///
    /// - Parameters:
    ///   - path: Resolved with ``url(for:)``.
    ///   - parameters: The body, encoded by ``requestSerializer``.
    ///   - headers: Set over the request serializer's headers.
    ///   - progress: Upload progress, on the session's delegate queue.
    ///   - success: On ``completionQueue`` with the response serializer's value.
    ///   - failure: On ``completionQueue``.
    /// - Returns: As ``GET(_:parameters:headers:progress:success:failure:)``.
    @discardableResult
    public func POST(
        _ path: String, parameters: JSONValue? = nil, headers: HTTPHeaders? = nil, progress: ProgressHandler? = nil,
        success: Success? = nil, failure: Failure? = nil
    ) -> DataTask? {
        resumed(dataTask(method: .post, path: path, parameters: parameters, headers: headers,
                         uploadProgress: progress, success: success, failure: failure))
    }

    /// Sends a `multipart/form-data` POST whose body is streamed from its parts
    /// (files are read while sending, never loaded whole).
    ///
    /// - Parameters:
    ///   - path: Resolved with ``url(for:)``.
    ///   - parameters: Form fields, before the parts `constructingBody` adds.
    ///   - headers: Set over the request serializer's headers.
    ///   - constructingBody: Runs once, synchronously, before this returns;
    ///     whatever it throws is reported through `failure`.
    ///   - progress: Upload progress, on the session's delegate queue.
    ///   - success: On ``completionQueue`` with the response serializer's value.
    ///   - failure: On ``completionQueue``, with a nil task when the request
    ///     could not be built.
    /// - Returns: The running upload task, or nil when the request could not be
    ///   built (`failure` is then called asynchronously with a nil task).
    @discardableResult
    public func POST(
        _ path: String, parameters: JSONValue? = nil, headers: HTTPHeaders? = nil,
        constructingBody: (inout MultipartFormData) throws -> Void, progress: ProgressHandler? = nil,
        success: Success? = nil, failure: Failure? = nil
    ) -> DataTask? {
        let request: Request
        do {
            request = try multipartFormRequest(
                method: .post, path: path, parameters: parameters, headers: headers,
                constructingBody: constructingBody)
        } catch {
            reportBuildFailure(error, to: failure)
            return nil
        }
        let delegate = TaskDelegate(uploadProgress: progress, downloadProgress: nil)
        return resumed(session.makeDataTask(request, delegate: delegate, completionHandler: nil,
                                            ending: ending(success: success, failure: failure)))
    }

    /// Sends PUT; `parameters` become the body.
    @discardableResult
    public func PUT(
        _ path: String, parameters: JSONValue? = nil, headers: HTTPHeaders? = nil,
        success: Success? = nil, failure: Failure? = nil
    ) -> DataTask? {
        resumed(dataTask(method: .put, path: path, parameters: parameters, headers: headers,
                         success: success, failure: failure))
    }

    /// Sends PATCH; `parameters` become the body.
    @discardableResult
    public func PATCH(
        _ path: String, parameters: JSONValue? = nil, headers: HTTPHeaders? = nil,
        success: Success? = nil, failure: Failure? = nil
    ) -> DataTask? {
        resumed(dataTask(method: .patch, path: path, parameters: parameters, headers: headers,
                         success: success, failure: failure))
    }

    /// Sends DELETE; `parameters` go into the query string.
    @discardableResult
    public func DELETE(
        _ path: String, parameters: JSONValue? = nil, headers: HTTPHeaders? = nil,
        success: Success? = nil, failure: Failure? = nil
    ) -> DataTask? {
        resumed(dataTask(method: .delete, path: path, parameters: parameters, headers: headers,
                         success: success, failure: failure))
    }
}

// MARK: - Delivering a completion

extension HTTPSessionManager {
    /// What a task of this manager delivers: its response, serialized by the
    /// manager's ``responseSerializer`` as it is when the task completes,
    /// goes to `success` or `failure` (on the completion queue). The task
    /// owns both closures and lets go of them once called.
    fileprivate func ending(success: Success?, failure: Failure?) -> DataTask.Ending {
        // The manager's state, not the manager: a pending task then keeps no
        // manager (and so no session) alive through its closures.
        let state = self.state
        var ending = DataTask.Ending()
        ending.serializer = { state.withLock { $0.responseSerializer } }
        if success != nil || failure != nil {
            ending.serialized = { task, result in
                switch result {
                case .success(let value): success?(task, value)
                case .failure(let error): failure?(task, error)
                }
            }
        }
        return ending
    }
}
