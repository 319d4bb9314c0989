import Dispatch
import FoundationEssentials

/// Receives the lifecycle of every task of a session, on its own queue: the
/// Linux spelling of Alamofire's `EventMonitor` and OkHttp's `EventListener`.
///
/// A session has any number of monitors (``SessionConfiguration/eventMonitors``
/// and ``SessionManager/addEventMonitor(_:)``). Each one gets every event,
/// in the order the events happened for a task, on its ``queue``; hooks,
/// the ``SessionDelegate`` and notifications are unchanged by them. Every
/// method has an empty default, so a monitor implements only what it needs.
///
/// For a task the order is: created, (adapted), resumed, (redirect, retry),
/// response head, (name lookup, connect, TLS), completed; a cancelled task
/// reports `cancelled` before its completion (with
/// ``TransferError/Code/cancelled``).
///
/// A session without monitors pays nothing for them: the lifecycle checks
/// one flag (``SessionManager/hasEventMonitors``) and allocates nothing.
public protocol EventMonitor: AnyObject, Sendable {
    /// Where this monitor's methods run. Must be serial for the events to
    /// arrive in order. Default: a private serial queue shared by the
    /// monitors that do not choose one (nothing services the main queue in
    /// a Linux server).
    var queue: DispatchQueue { get }

    /// The session created `task` (it is suspended until resumed).
    func taskDidCreate(_ task: TransferTask)
    /// A request adapter (interceptor) turned `request` into `result`
    /// before the task went out: a new request, or the error that fails it.
    func task(_ task: TransferTask, didAdaptRequest request: Request, result: Result<Request, TransferError>)
    /// The task was resumed: started (about to be sent), or continued
    /// after ``TransferTask/suspend()``.
    func taskDidResume(_ task: TransferTask)
    /// Name lookup finished `seconds` after the task was handed to the
    /// engine. From the metrics at completion; not sent for a reused
    /// connection.
    func task(_ task: TransferTask, didFinishNameLookupIn seconds: TimeInterval)
    /// The TCP connection was up `seconds` after the start (see above).
    func task(_ task: TransferTask, didConnectIn seconds: TimeInterval)
    /// The TLS handshake finished `seconds` after the start; https only.
    func task(_ task: TransferTask, didFinishTLSHandshakeIn seconds: TimeInterval)
    /// The final response head arrived (after any redirect followed).
    func task(_ task: TransferTask, didReceiveResponse response: HTTPResponse)
    /// The task follows a redirect (`statusCode` 301, 302, 303, 307 or 308)
    /// from `from` to `to`, whether the engine or a redirect hook follows it.
    func task(_ task: TransferTask, willRedirectFrom from: URL, to: URL, statusCode: Int)
    /// The task is about to be retried: `attempt` is the retry about to be
    /// made (1 for the first), after `error`.
    func task(_ task: TransferTask, willRetry attempt: Int, after error: TransferError)
    /// The task completed: `metrics` when the engine ran it, `error` when it
    /// failed (``TransferError/Code/cancelled`` for a cancel).
    func task(_ task: TransferTask, didCompleteWith metrics: TaskMetrics?, error: TransferError?)
    /// The task was cancelled (its completion follows).
    func taskDidCancel(_ task: TransferTask)

    /// What this monitor wants (default ``EventMonitorInterests/all``). A
    /// monitor that wants only ``EventMonitorInterests/completion`` gets
    /// ``requestDidComplete(_:)`` and nothing else, and leaves requests on
    /// the fast path of ``SessionManager/data(for:)`` and the batch API:
    /// observing completions with their metrics then costs one hop per loop
    /// pass, not a task per request.
    var interests: EventMonitorInterests { get }

    /// A request completed, whatever path it took: a task, or the fast path
    /// (which makes no task). Sent to every monitor, whatever its
    /// ``interests``; after the task's own completion events, if it had a task.
    func requestDidComplete(_ completion: CompletedRequest)
}

/// The events an ``EventMonitor`` wants.
public struct EventMonitorInterests: OptionSet, Sendable {
    public let rawValue: Int
    /// Creates a set from its raw value.
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// ``EventMonitor/requestDidComplete(_:)``, for every request.
    public static let completion = EventMonitorInterests(rawValue: 1 << 0)
    /// The per-task events (created, resumed, response, redirect, retry,
    /// completed, cancelled): every request then goes through a task.
    public static let taskLifecycle = EventMonitorInterests(rawValue: 1 << 1)
    /// Everything.
    public static let all: EventMonitorInterests = [.completion, .taskLifecycle]
}

/// One completed request, as ``EventMonitor/requestDidComplete(_:)`` gets it.
public struct CompletedRequest: Sendable {
    /// The request as the caller made it.
    public var request: Request
    /// The final response head, when one arrived.
    public var response: HTTPResponse?
    /// The engine's timings and counts, when the engine ran the request.
    public var metrics: TaskMetrics?
    /// Why it failed, or nil.
    public var error: TransferError?
    /// The task's identifier; nil for a request of the fast path.
    public var taskIdentifier: Int?

    /// Creates a record (for tests of your own monitors).
    public init(request: Request, response: HTTPResponse?, metrics: TaskMetrics?, error: TransferError?,
                taskIdentifier: Int?)
    {
        self.request = request
        self.response = response
        self.metrics = metrics
        self.error = error
        self.taskIdentifier = taskIdentifier
    }
}

/// The serial queue of monitors that do not choose one.
private let defaultEventMonitorQueue = DispatchQueue(label: "transfer.eventMonitor")

extension EventMonitor {
    public var queue: DispatchQueue { defaultEventMonitorQueue }

    public func taskDidCreate(_ task: TransferTask) {}
    public func task(_ task: TransferTask, didAdaptRequest request: Request, result: Result<Request, TransferError>) {}
    public func taskDidResume(_ task: TransferTask) {}
    public func task(_ task: TransferTask, didFinishNameLookupIn seconds: TimeInterval) {}
    public func task(_ task: TransferTask, didConnectIn seconds: TimeInterval) {}
    public func task(_ task: TransferTask, didFinishTLSHandshakeIn seconds: TimeInterval) {}
    public func task(_ task: TransferTask, didReceiveResponse response: HTTPResponse) {}
    public func task(_ task: TransferTask, willRedirectFrom from: URL, to: URL, statusCode: Int) {}
    public func task(_ task: TransferTask, willRetry attempt: Int, after error: TransferError) {}
    public func task(_ task: TransferTask, didCompleteWith metrics: TaskMetrics?, error: TransferError?) {}
    public func taskDidCancel(_ task: TransferTask) {}
    public var interests: EventMonitorInterests { .all }
    public func requestDidComplete(_ completion: CompletedRequest) {}
}
