import FoundationEssentials

/// How a ``SessionManager`` connects: timeouts, headers, limits, TLS anchors.
public struct SessionConfiguration: Sendable, Hashable {
    /// Which HTTP version to ask for.
    public enum HTTPVersion: Sendable, Hashable {
        /// HTTP/2 over TLS when ALPN agrees, HTTP/1.1 otherwise.
        case automatic
        /// HTTP/1.1 only, also over TLS.
        case http1_1
        /// Prefer HTTP/2 (over TLS; cleartext stays HTTP/1.1).
        case http2
        /// HTTP/1.0 only (no keep-alive unless the server offers it).
        case http1_0
        /// HTTP/2 from the first byte, without ALPN or an Upgrade, also over
        /// cleartext http (curl's `--http2-prior-knowledge`); a server that
        /// does not speak HTTP/2 fails the task.
        case http2PriorKnowledge
    }

    /// The idle timeout, as URLSession's `timeoutIntervalForRequest`:
    /// seconds a transfer may go without a byte sent or received (request
    /// body, response head or body), counted from its start, connecting
    /// included, while the engine runs it; time it is paused by a rate limit
    /// or a slow stream consumer does not count. When it passes the task fails
    /// with ``TransferError/Code/timedOut`` and a message that names it. A
    /// trickle of bytes keeps a transfer alive however long it takes.
    /// ``Request/timeoutInterval`` overrides it per request; 0 disables.
    /// Checked once a second: it fires up to about a second late.
    /// For this and the other time settings: `.infinity` (or anything over
    /// about 31 years) means no limit, a negative value is taken as 0, and NaN
    /// fails each task with ``TransferError/Code/invalidRequest``.
    public var timeoutIntervalForRequest: TimeInterval = 60
    /// The total timeout, as URLSession's `timeoutIntervalForResource`: seconds
    /// the whole transfer (each hop of a task: a redirect or authentication
    /// retry that Swift makes starts it again) may take; 0 or `.infinity`: no limit.
    /// ``TransferError/Code/timedOut``.
    public var timeoutIntervalForResource: TimeInterval = 0
    /// Seconds to establish a connection (TCP + TLS, and a proxy's tunnel);
    /// ``TransferError/Code/timedOut`` when it passes (a refused connection
    /// is ``TransferError/Code/cannotConnect`` at once). 0: 30 s;
    /// `.infinity`: no limit of our own (the kernel's SYN retries still end it).
    public var connectTimeout: TimeInterval = 30
    /// curl's `--speed-limit`/`--speed-time` (CURLOPT_LOW_SPEED_LIMIT/TIME):
    /// a transfer slower than `lowSpeedLimit` bytes per second, averaged by
    /// libcurl, for `lowSpeedTime` seconds (whole seconds, rounded up) fails
    /// with ``TransferError/Code/timedOut``. 0 in either: off.
    public var lowSpeedLimit: Int64 = 0
    /// See ``lowSpeedLimit``: the seconds a transfer may stay below it.
    public var lowSpeedTime: TimeInterval = 0
    /// Headers added to every request unless the request sets them.
    public var httpAdditionalHeaders: HTTPHeaders = [:]
    /// Connections open at once to one host (0: unlimited). HTTP/1 requests
    /// beyond it wait in the engine and start in the order they were made.
    public var maxConnectionsPerHost: Int = 6
    /// Connections open at once in all (0: unlimited by this setting).
    ///
    /// Whatever it says, the session's running tasks hold no more descriptors than its
    /// share of the open-file limit: with spare = `RLIMIT_NOFILE − descriptors open when
    /// the session starts − 16` (16 left for the rest of the process), `spare − idle`
    /// (see ``maxIdleConnections``), at least 1. A task counts one descriptor for its
    /// socket and one more for each file it has open: a data task one, a download or a file
    /// upload two. Tasks beyond it wait in the engine's queue for a connection instead of
    /// failing with ``TransferError/Code/tooManyOpenFiles``.
    public var maxTotalConnections: Int = 0
    /// Idle connections kept open for reuse, over all hosts (libcurl's
    /// `CURLMOPT_MAXCONNECTS`; 0: 256). When a connection falls idle beyond it, the oldest
    /// idle one is closed, so a task to a host whose connection was closed opens a new one.
    ///
    /// The session keeps no more than a third of its spare descriptors idle (see
    /// ``maxTotalConnections``), at least 1, whatever this says.
    public var maxIdleConnections: Int = 0
    /// The HTTP version to ask for (default `.automatic`).
    public var httpVersion: HTTPVersion = .automatic
    /// curl's connection options: address family, Unix domain socket, TLS
    /// versions, the path as given, netrc (see ``TransportOptions``).
    public var transport = TransportOptions()
    /// PEM bundle of trust anchors, loaded once for the session (nil: system store).
    public var caFile: String?
    /// Follow 3xx redirects (default true); when false a task completes with
    /// the 3xx response.
    public var followRedirects = true
    /// The most redirects one task follows; one more fails it with
    /// ``TransferError/Code/tooManyRedirects``.
    public var maxRedirects = 16
    /// Bandwidth shared by all transfers of the session, bytes/s (0: unlimited).
    public var maxTotalReceiveSpeed: Int64 = 0
    /// Upload bandwidth shared by all transfers of the session, bytes/s (0: unlimited).
    public var maxTotalSendSpeed: Int64 = 0
    /// Client certificate for mutual TLS (PEM files).
    public var clientCertificatePath: String?
    /// The private key of ``clientCertificatePath`` (PEM file).
    public var clientKeyPath: String?
    /// Ask for gzip/deflate/br bodies and decode them transparently.
    public var acceptsCompressedResponses = true
    /// The most bytes a body received in memory (data tasks without a
    /// data-chunk hook, or with one and ``accumulatesStreamedBody``) may
    /// have, counted after decoding; a larger `Content-Length` or body fails
    /// with ``TransferError/Code/responseTooLarge`` before the excess is
    /// stored. 0: no limit. Bodies only streamed through a hook or a
    /// ``ResponseBodyStream`` are not limited (they are not kept). Downloads
    /// to files use ``DownloadOptions/maximumFileSize``.
    public var maximumResponseBodySize: Int64 = 64 * 1024 * 1024
    /// Whether a body that the `dataTaskDidReceiveData` hook (or a delegate
    /// with ``SessionDelegate/wantsDataChunks``) receives in chunks is also
    /// kept for the task's completion handler (default false).
    ///
    /// False: the chunks are the only copy, memory stays flat however large
    /// the body, the completion handler (and `data(for:)`) gets empty
    /// `Data()`, and the will-cache hook is not called. True: the body is also
    /// collected, as before, bounded by ``maximumResponseBodySize`` (over it
    /// the task fails with ``TransferError/Code/responseTooLarge``).
    /// ``SessionManager/stream(for:bufferSize:)`` never keeps the body.
    public var accumulatesStreamedBody = false
    /// With compressed responses, the most decoded bytes per byte received
    /// once the body passed 1 MiB; more fails with
    /// ``TransferError/Code/responseTooLarge``. It applies to every task,
    /// files included (a bomb fills a disk as well as memory). Served text
    /// reaches 5-50:1, a deflate bomb 158:1 to 1030:1 (Apache POI refuses
    /// zip entries past 100:1 too). 0: no limit.
    public var maximumDecompressionRatio: Int64 = 100
    /// Name overrides with the meaning of curl's `--resolve`: entries
    /// `"HOST:PORT:ADDR[,ADDR...]"` send connections for HOST on PORT to ADDR
    /// without asking DNS (IPv6 addresses in brackets). TLS still checks the
    /// certificate against HOST. Every transfer of the session uses them; a
    /// malformed entry fails the task with ``TransferError/Code/invalidRequest``.
    public var resolve: [String] = []
    /// The proxy: by default the environment's (`http_proxy`, `https_proxy`, `all_proxy`,
    /// `no_proxy`, as curl reads them; see ``ProxySetting/environment``), `.none` for none,
    /// or `.through(ProxyConfiguration)`.
    /// An invalid proxy fails each task with ``TransferError/Code/invalidRequest``; a proxy
    /// that refuses or cannot be resolved, with ``TransferError/Code/proxyFailure``.
    public var proxy: ProxySetting = .environment
    /// Seconds a TLS handshake waits for the server-trust challenge hook
    /// (``SessionHooks/sessionDidReceiveChallenge``), which runs on the
    /// delegate queue. The handshake runs on the engine thread, so while it
    /// waits every transfer of the session waits too; this bounds that
    /// stall. With no answer in time the server is refused (fail closed): the
    /// task fails with ``TransferError/Code/serverTrustRejected`` and
    /// ``TransferError/trustFailureReason`` `.challengeTimedOut`; an answer
    /// that comes later is ignored. Values below 1 ms count as 1 ms.
    public var serverTrustChallengeTimeout: TimeInterval = 5
    /// Adapts every request before each attempt and decides on retries
    /// (``RetryPolicy``, ``AuthenticationInterceptor``, ``Interceptor``); runs
    /// before a request's own ``Request/interceptor``. nil: no retry.
    public var interceptor: (any RequestInterceptor)? {
        get { interceptorReference?.value }
        set { interceptorReference = newValue.map(InterceptorReference.init) }
    }
    private var interceptorReference: InterceptorReference?
    /// Whether ``interceptor`` is set, without copying it out of its box.
    var hasInterceptor: Bool { interceptorReference != nil }

    /// ``logger`` and ``eventMonitors`` (SessionConfiguration+Logging.swift).
    var observation = ObservationSettings()
    /// The cookies the session sends and stores. The default,
    /// ``CookieStore/perSession``, gives each session a fresh, empty store of
    /// its own (``SessionManager/cookieStore``); a store may also be shared by
    /// sessions; nil: no cookie is sent or stored.
    public var cookieStore: CookieStore? = CookieStore.perSession

    /// The HTTP response cache (URLSessionConfiguration's `urlCache`): GET
    /// responses are stored and reused under RFC 9111's rules for a private
    /// cache and each request's ``Request/cachePolicy``; the will-cache hook
    /// (``SessionHooks/dataTaskWillCacheResponse``) decides what is stored.
    /// Default nil: no cache, and requests pay nothing for it (a server
    /// library should opt in to serving stale-able data). A cache may be
    /// shared by sessions; ``SessionManager/reset()`` empties it.
    public var responseCache: ResponseCache?

    /// The defaults, as ``SessionConfiguration/default``.
    public init() {}

    /// The defaults of URLSessionConfiguration.default.
    public static var `default`: SessionConfiguration { SessionConfiguration() }
    /// No persistent state: cookies stay in the session's own in-memory store,
    /// no response cache (the default's ``responseCache`` is nil as well).
    public static var ephemeral: SessionConfiguration { SessionConfiguration() }
}
