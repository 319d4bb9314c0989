import FoundationEssentials

/// Sees every request of a session from its creation to its completion, on
/// every path: ``SessionManager/data(for:)`` on the fast path, the batch
/// API, and tasks. The seam of the optional integrations (`TransferMetrics`,
/// `TransferTracing`; docs/OBSERVABILITY.md), and of your own.
///
/// Register instruments in ``SessionConfiguration/requestInstruments``. For
/// each request the session calls ``requestWillStart(_:)`` synchronously
/// where the request is made, before anything is sent: on the caller's
/// thread for `data(for:)` and for a task (so task-locals such as a
/// tracing context are current), and for a batch on whatever thread takes
/// the request from its sequence, through the instrument ``bound()``
/// returned on the caller's thread when the batch was made. The instrument
/// may change the request's headers (a `traceparent`), and returns an
/// observer for the rest of the request's life, or nil.
///
/// Unlike an ``EventMonitor`` that wants ``EventMonitorInterests/taskLifecycle``,
/// an instrument keeps requests on the fast path. Its calls are made inline,
/// not queued: the observer's methods may run on the engine's loop thread,
/// and must be quick and must not block (record a number, end a span).
public protocol RequestInstrument: AnyObject, Sendable {
    /// Caller's thread, when a batch is made: the instrument its requests
    /// use, carrying whatever it needs of the caller's context (task-locals
    /// are not current where a batch takes later requests). Default: `self`.
    func bound() -> any RequestInstrument

    /// A request is about to be sent: change `request` (add headers) and
    /// return an observer for it, or nil to leave it alone. Called once per
    /// request (a retry or a redirect is the same request).
    func requestWillStart(_ request: inout Request) -> (any RequestObserver)?
}

extension RequestInstrument {
    /// The instrument itself: it captures nothing of the caller's context.
    public func bound() -> any RequestInstrument { self }
}

/// What a ``RequestInstrument`` hears of one request after its start. The
/// methods may run on any thread, the engine's loop thread included, one at
/// a time for a request and in order; quick and non-blocking.
public protocol RequestObserver: AnyObject, Sendable {
    /// A redirect is followed (by the engine or by the task): the hop
    /// from `from` answered `statusCode` and the request goes on to `to`.
    func requestWillRedirect(from: URL, to: URL, statusCode: Int)
    /// The request is retried (tasks with a retry policy): `attempt` is
    /// the retry about to be made (1 for the first), after `error`.
    func requestWillRetry(attempt: Int, after error: TransferError)
    /// The request completed, successfully or not; the last call. On the
    /// fast path and for tasks alike it comes before the caller's `await`
    /// or completion handler returns.
    func requestDidComplete(_ completion: CompletedRequest)
}

extension RequestObserver {
    /// Ignores the redirect.
    public func requestWillRedirect(from: URL, to: URL, statusCode: Int) {}
    /// Ignores the retry.
    public func requestWillRetry(attempt: Int, after error: TransferError) {}
}

extension [any RequestInstrument] {
    /// Runs every instrument on `request`; the observers they return (none,
    /// without allocating, when there is no instrument).
    func start(_ request: inout Request) -> [any RequestObserver] {
        if isEmpty { return [] }
        var observers: [any RequestObserver] = []
        for instrument in self {
            if let observer = instrument.requestWillStart(&request) { observers.append(observer) }
        }
        return observers
    }
}

extension [any RequestObserver] {
    /// A followed redirect, to every observer; `from` and `location` as the
    /// engine reports them (the location resolved against `from`).
    func redirect(from: String, to location: String, statusCode: Int) {
        guard !isEmpty, let fromURL = URL(string: from),
            let toURL = URL(string: location, relativeTo: fromURL)?.absoluteURL
        else { return }
        for observer in self { observer.requestWillRedirect(from: fromURL, to: toURL, statusCode: statusCode) }
    }
}

/// The connection pool of a session's engine at a glance (see
/// ``SessionManager/connectionPoolStatistics``): what pool gauges report.
/// Each count is read on its own, without a lock, so the three may come
/// from slightly different instants.
public struct ConnectionPoolStatistics: Sendable, Hashable {
    /// Connections open: in use by a transfer, or idle in the pool.
    public var openConnections: Int
    /// Requests in the engine: submitted and not finished, waiting or running.
    public var activeTransfers: Int
    /// Of ``activeTransfers``, those waiting for a connection because the
    /// session's connection budget (its share of the open-file limit) is spent,
    /// or because their host has ``SessionConfiguration/maxConnectionsPerHost``
    /// HTTP/1 transfers running (they start in the order they came).
    public var queuedTransfers: Int

    /// Connections carrying a transfer now: the running transfers, at most
    /// the open connections (an HTTP/2 connection carries several).
    public var connectionsInUse: Int {
        min(openConnections, max(0, activeTransfers - queuedTransfers))
    }

    /// Open connections that carry no transfer: kept alive for reuse.
    public var idleConnections: Int { max(0, openConnections - connectionsInUse) }

    /// Creates statistics from counts (for tests of your own gauges).
    public init(openConnections: Int, activeTransfers: Int, queuedTransfers: Int) {
        self.openConnections = openConnections
        self.activeTransfers = activeTransfers
        self.queuedTransfers = queuedTransfers
    }
}

extension SessionManager {
    /// The engine's connection pool now: open, idle and in-use connections
    /// and requests waiting for a connection. Cheap (three relaxed atomic
    /// reads); poll it for gauges.
    public var connectionPoolStatistics: ConnectionPoolStatistics { engine.poolStatistics }
}
