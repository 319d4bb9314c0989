import CoreMetrics
import FoundationEssentials
import Synchronization
import Transfer

/// Records swift-metrics for every request of a session, named and
/// dimensioned after the OpenTelemetry HTTP client conventions
/// (docs/OBSERVABILITY.md lists every metric).
///
/// Install it as a ``Transfer/RequestInstrument``: it keeps requests on the
/// fast path of `data(for:)` and the batch API.
///
/// ```swift
/// let metrics = TransferMetrics()              // MetricsSystem.factory
/// var configuration = SessionConfiguration()
/// configuration.requestInstruments = [metrics]
/// let session = SessionManager(configuration: configuration)
/// ```
///
/// Per request: `http.client.requests` (counter), `http.client.request.duration`
/// and `http.client.request.time_to_first_byte` (timers), and
/// `http.client.request.body.size` / `http.client.response.body.size`
/// (recorders of bytes sent and received), each with `http.request.method`,
/// `http.response.status_code`, `http.response.status_class` (`2xx`) and,
/// on failure, `error.type` (the ``Transfer/TransferError/Code`` name).
/// `http.client.active_requests` (a meter) counts requests in flight.
/// `server.address` and `server.port` are added only with
/// ``Options/perHostDimensions``: hosts are unbounded cardinality.
///
/// Pool gauges come from ``recordPool(of:)``: call it periodically, or let
/// ``pollPool(of:every:)`` do it.
public final class TransferMetrics: RequestInstrument {
    /// What is recorded, beyond the defaults.
    public struct Options: Sendable, Hashable {
        /// Adds `server.address` and `server.port` to the per-request metrics
        /// and the active-request meter. Off by default: a client that talks
        /// to many hosts would make a time series per host.
        public var perHostDimensions: Bool
        /// Added to every metric as `transfer.session`, when set: tells the
        /// pools of several sessions apart.
        public var sessionLabel: String?

        /// Options; the defaults add no host and no session dimension.
        public init(perHostDimensions: Bool = false, sessionLabel: String? = nil) {
            self.perHostDimensions = perHostDimensions
            self.sessionLabel = sessionLabel
        }
    }

    /// The metric labels this integration uses.
    public enum Label {
        /// Counter: completed requests.
        public static let requests = "http.client.requests"
        /// Timer: from hand-over to the engine to the end of the request.
        public static let duration = "http.client.request.duration"
        /// Timer: until the first response byte.
        public static let timeToFirstByte = "http.client.request.time_to_first_byte"
        /// Recorder: request body bytes sent, per request.
        public static let requestBodySize = "http.client.request.body.size"
        /// Recorder: response body bytes received, per request.
        public static let responseBodySize = "http.client.response.body.size"
        /// Meter: requests in flight.
        public static let activeRequests = "http.client.active_requests"
        /// Gauge: open connections, with `http.connection.state` `active` or `idle`.
        public static let openConnections = "http.client.open_connections"
        /// Gauge: requests waiting for a connection.
        public static let queuedRequests = "http.client.queued_requests"
    }

    /// The dimension names this integration uses.
    public enum Dimension {
        /// The request method, `GET`.
        public static let method = "http.request.method"
        /// The final status code, `200`.
        public static let statusCode = "http.response.status_code"
        /// The status class, `2xx`.
        public static let statusClass = "http.response.status_class"
        /// The ``Transfer/TransferError/Code`` name of a failure, `timedOut`.
        public static let errorType = "error.type"
        /// The host (``Options/perHostDimensions`` only).
        public static let serverAddress = "server.address"
        /// The port (``Options/perHostDimensions`` only).
        public static let serverPort = "server.port"
        /// `active` or `idle`, on ``Label/openConnections``.
        public static let connectionState = "http.connection.state"
        /// ``Options/sessionLabel``, when set.
        public static let session = "transfer.session"
    }

    /// Where the metrics go.
    public let factory: any MetricsFactory
    /// What is recorded.
    public let options: Options
    private let sessionDimensions: [(String, String)]
    /// The metric objects made so far, by their dimension values: one lookup
    /// per request instead of six objects (and six factory lookups).
    private let cache = Mutex<Cache>(Cache())

    private struct Cache {
        var active: [StartKey: Meter] = [:]
        var completed: [EndKey: Handles] = [:]
    }

    /// The dimension values known at a request's start.
    fileprivate struct StartKey: Hashable {
        var method: String
        var host: String?
        var port: Int
    }

    /// The dimension values known at its end.
    private struct EndKey: Hashable {
        var start: StartKey
        var status: Int?
        var error: String?
    }

    /// The per-request metrics of one set of dimensions.
    private struct Handles {
        let requests: Counter
        let duration: CoreMetrics.Timer
        let timeToFirstByte: CoreMetrics.Timer
        let requestBodySize: Recorder
        let responseBodySize: Recorder
    }

    /// An integration recording through `factory` (default: the factory
    /// `MetricsSystem.bootstrap` installed; pass one explicitly to record
    /// elsewhere, as tests do).
    public init(factory: any MetricsFactory = MetricsSystem.factory, options: Options = Options()) {
        self.factory = factory
        self.options = options
        sessionDimensions = options.sessionLabel.map { [(Dimension.session, $0)] } ?? []
    }

    /// Starts observing `request` (it is left unchanged).
    public func requestWillStart(_ request: inout Request) -> (any RequestObserver)? {
        var key = StartKey(method: request.method.rawValue, host: nil, port: 0)
        if options.perHostDimensions {
            key.host = request.url.host ?? ""
            key.port = Self.port(of: request.url)
        }
        let active = cache.withLock { cache in
            if let meter = cache.active[key] { return meter }
            let meter = Meter(label: Label.activeRequests, dimensions: dimensions(key), factory: factory)
            cache.active[key] = meter
            return meter
        }
        active.increment()
        return Observer(metrics: self, key: key, active: active)
    }

    /// The dimensions of a request's start, in order.
    private func dimensions(_ key: StartKey) -> [(String, String)] {
        var dimensions = sessionDimensions
        dimensions.append((Dimension.method, key.method))
        if let host = key.host {
            dimensions.append((Dimension.serverAddress, host))
            dimensions.append((Dimension.serverPort, String(key.port)))
        }
        return dimensions
    }

    /// The port a URL connects to (its scheme's default when none is written).
    static func port(of url: URL) -> Int {
        if let port = url.port { return port }
        return url.scheme?.lowercased() == "https" ? 443 : 80
    }

    /// `2xx` for 200...299, and so on.
    static func statusClass(_ status: Int) -> String { "\(status / 100)xx" }

    fileprivate func record(_ completion: CompletedRequest, key start: StartKey) {
        let key = EndKey(start: start, status: completion.response?.statusCode, error: completion.error?.code.name)
        let handles = cache.withLock { cache in
            if let handles = cache.completed[key] { return handles }
            let handles = makeHandles(key)
            cache.completed[key] = handles
            return handles
        }
        handles.requests.increment()
        guard let metrics = completion.metrics else { return }
        if metrics.total >= 0 { handles.duration.recordNanoseconds(Int64(metrics.total * 1e9)) }
        if metrics.firstByte > 0 { handles.timeToFirstByte.recordNanoseconds(Int64(metrics.firstByte * 1e9)) }
        handles.requestBodySize.record(metrics.bodyBytesSent)
        handles.responseBodySize.record(metrics.bodyBytesReceived)
    }

    private func makeHandles(_ key: EndKey) -> Handles {
        var dimensions = self.dimensions(key.start)
        if let status = key.status {
            dimensions.append((Dimension.statusCode, String(status)))
            dimensions.append((Dimension.statusClass, Self.statusClass(status)))
        }
        if let error = key.error { dimensions.append((Dimension.errorType, error)) }
        return Handles(
            requests: Counter(label: Label.requests, dimensions: dimensions, factory: factory),
            duration: CoreMetrics.Timer(label: Label.duration, dimensions: dimensions, factory: factory),
            timeToFirstByte: CoreMetrics.Timer(label: Label.timeToFirstByte, dimensions: dimensions, factory: factory),
            requestBodySize: Recorder(label: Label.requestBodySize, dimensions: dimensions, factory: factory),
            responseBodySize: Recorder(label: Label.responseBodySize, dimensions: dimensions, factory: factory))
    }

    /// Records the pool gauges of `session` now: `http.client.open_connections`
    /// with `http.connection.state` `active` and `idle`, and
    /// `http.client.queued_requests`. Per session (see ``Options/sessionLabel``);
    /// the engine does not count connections per host.
    public func recordPool(of session: SessionManager) {
        record(pool: session.connectionPoolStatistics)
    }

    /// Records `pool` as the pool gauges (see ``recordPool(of:)``).
    public func record(pool: ConnectionPoolStatistics) {
        var active = sessionDimensions
        active.append((Dimension.connectionState, "active"))
        var idle = sessionDimensions
        idle.append((Dimension.connectionState, "idle"))
        Gauge(label: Label.openConnections, dimensions: active, factory: factory).record(pool.connectionsInUse)
        Gauge(label: Label.openConnections, dimensions: idle, factory: factory).record(pool.idleConnections)
        Gauge(label: Label.queuedRequests, dimensions: sessionDimensions, factory: factory)
            .record(pool.queuedTransfers)
    }

    /// Records the pool gauges of `session` every `interval` until the
    /// calling task is cancelled (run it in a task group or a service).
    public func pollPool(of session: SessionManager, every interval: Duration = .seconds(10)) async {
        while !Task.isCancelled {
            recordPool(of: session)
            do { try await Task.sleep(for: interval) } catch { return }
        }
    }

    /// One request's metrics: the dimension values fixed at its start, and
    /// its place in the active-request meter.
    private final class Observer: RequestObserver {
        let metrics: TransferMetrics
        let key: StartKey
        let active: Meter
        /// Completion is recorded once.
        private let done = Atomic<Bool>(false)

        init(metrics: TransferMetrics, key: StartKey, active: Meter) {
            self.metrics = metrics
            self.key = key
            self.active = active
        }

        func requestDidComplete(_ completion: CompletedRequest) {
            guard !done.exchange(true, ordering: .relaxed) else { return }
            active.decrement()
            metrics.record(completion, key: key)
        }
    }
}
