import CTransfer
import FoundationEssentials
import Glibc

// The one place that builds the engine's request spec (`ct_transfer_spec`)
// from Swift requests, session settings and task options. Everything outside
// Bridging/ describes a transfer through ``TransferSpec``'s Swift terms.

/// A transfer's engine flags (`CT_FLAG_*`).
struct TransferFlags: OptionSet {
    let rawValue: UInt32

    /// HEAD: do not read a body.
    static var noBody: Self { Self(rawValue: UInt32(CT_FLAG_NO_BODY)) }
    /// libcurl follows redirects itself.
    static var followRedirects: Self { Self(rawValue: UInt32(CT_FLAG_FOLLOW_REDIRECTS)) }
    /// A failed file transfer keeps its part file (and journal).
    static var keepPartial: Self { Self(rawValue: UInt32(CT_FLAG_KEEP_PARTIAL)) }
    /// Hold the transfer at the first body byte until a disposition comes.
    static var awaitDisposition: Self { Self(rawValue: UInt32(CT_FLAG_AWAIT_DISPOSITION)) }
    /// Do not ask for compressed bodies.
    static var noDecompress: Self { Self(rawValue: UInt32(CT_FLAG_NO_DECOMPRESS)) }
    /// A segment whose range the server ignores fails.
    static var failOnRangeIgnored: Self { Self(rawValue: UInt32(CT_FLAG_FAIL_ON_RANGE_IGNORED)) }
    /// Do not preallocate the part file.
    static var noPreallocate: Self { Self(rawValue: UInt32(CT_FLAG_NO_PREALLOCATE)) }
    /// libcurl's verbose trace, redacted, to `onDebug`.
    static var trace: Self { Self(rawValue: UInt32(CT_FLAG_TRACE)) }
    /// Send cookies from the jar and store what the response sets.
    static var cookies: Self { Self(rawValue: UInt32(CT_FLAG_COOKIES)) }
    /// Send cookies from the jar, store none.
    static var cookiesReadOnly: Self { Self(rawValue: UInt32(CT_FLAG_COOKIES_READ_ONLY)) }
    /// No progress callbacks.
    static var noProgress: Self { Self(rawValue: UInt32(CT_FLAG_NO_PROGRESS)) }
    /// A streamed body whose consumer paces it (`onData` may hold the transfer).
    static var consumerPaced: Self { Self(rawValue: UInt32(CT_FLAG_CONSUMER_PACED)) }
    static var noMetrics: Self { Self(rawValue: UInt32(CT_FLAG_NO_METRICS)) }
    static var startPaused: Self { Self(rawValue: UInt32(CT_FLAG_START_PAUSED)) }
    static var noProxy: Self { Self(rawValue: UInt32(CT_FLAG_NO_PROXY)) }
    static var noSync: Self { Self(rawValue: UInt32(CT_FLAG_NO_SYNC)) }
}

/// The HTTP authentication schemes a credential may answer (`CT_AUTH_*`).
struct EngineAuthSchemes: OptionSet, Sendable {
    let rawValue: UInt32

    static var basic: Self { Self(rawValue: UInt32(CT_AUTH_BASIC)) }
    static var digest: Self { Self(rawValue: UInt32(CT_AUTH_DIGEST)) }
}

/// One transfer as the engine takes it: a `ct_transfer_spec`, filled in
/// Swift terms. The strings and buffers it points to live in the
/// ``CStrings`` given to the setters; the engine copies all of them during
/// submit. (A single stored property: an array of these is an array of
/// `ct_transfer_spec`, which ``Engine/submitBatch(_:targets:)`` relies on.)
struct TransferSpec {
    var raw: ct_transfer_spec

    /// The engine's defaults: GET, memory sink, no limits.
    init() {
        raw = ct_transfer_spec()
        ct_transfer_spec_init(&raw)
    }

    /// Where the response body goes.
    enum Sink {
        /// Kept in C, handed over once at finish.
        case memory
        /// Written to a part file (see ``TransferSpec/setFileSink(path:partPath:strings:)``).
        case file
        /// Counted, not kept.
        case discard
        /// Each chunk to the target's `onData`.
        case stream
    }

    var sink: Sink {
        get {
            switch raw.sink_kind {
            case CT_SINK_FILE: .file
            case CT_SINK_DISCARD: .discard
            case CT_SINK_STREAM: .stream
            default: .memory
            }
        }
        set {
            switch newValue {
            case .memory: raw.sink_kind = CT_SINK_MEMORY
            case .file: raw.sink_kind = CT_SINK_FILE
            case .discard: raw.sink_kind = CT_SINK_DISCARD
            case .stream: raw.sink_kind = CT_SINK_STREAM
            }
        }
    }

    var flags: TransferFlags {
        get { TransferFlags(rawValue: raw.flags) }
        set { raw.flags = newValue.rawValue }
    }

    /// The most body bytes kept (or written); 0: no limit.
    var maxBodySize: Int64 {
        get { raw.max_body_size }
        set { raw.max_body_size = newValue }
    }

    /// Bytes per second; 0: unlimited.
    var maxReceiveSpeed: Int64 {
        get { raw.max_recv_speed }
        set { raw.max_recv_speed = newValue }
    }

    /// Bytes per second; 0: unlimited.
    var maxSendSpeed: Int64 {
        get { raw.max_send_speed }
        set { raw.max_send_speed = newValue }
    }

    /// Continue the part file at this offset (with `Range`).
    var resumeOffset: Int64 {
        get { raw.resume_offset }
        set { raw.resume_offset = newValue }
    }

    /// The engine writes this transfer's byte counts into `block`.
    mutating func count(into block: CounterBlock) {
        raw.counters = block.pointer
    }

    /// A segment: bytes `start...end` at the same offsets of the part file.
    mutating func setRange(start: Int64, end: Int64) {
        raw.range_start = start
        raw.range_end = end
    }

    /// The file sink's paths: the body goes to `partPath` and is renamed to
    /// `path` on success (nil: the part file is the result).
    mutating func setFileSink(path: String?, partPath: String, strings: CStrings) {
        raw.sink_kind = CT_SINK_FILE
        raw.sink_path = UnsafePointer(strings.make(path))
        raw.sink_part_path = UnsafePointer(strings.make(partPath))
    }

    /// The `If-Range` validator of a resumed transfer (nil: none).
    mutating func setIfRange(_ validator: String?, strings: CStrings) {
        raw.if_range = UnsafePointer(strings.make(validator))
    }

    /// Keeps a crash-safe resume journal at `path` (0 intervals: the engine's defaults).
    mutating func setJournal(path: String, intervalBytes: Int64, intervalMilliseconds: Int64, strings: CStrings) {
        raw.journal_path = UnsafePointer(strings.make(path))
        raw.journal_interval_bytes = intervalBytes
        raw.journal_interval_ms = intervalMilliseconds
    }

    /// The SHA-256 (32 bytes) the whole body must have.
    mutating func setExpectedSHA256(_ digest: [UInt8], strings: CStrings) {
        raw.expected_sha256 = strings.make(bytes: digest)
    }

    /// A user and password for `schemes`.
    mutating func setCredential(_ credential: Credential, schemes: EngineAuthSchemes, strings: CStrings) {
        raw.user_password = UnsafePointer(strings.make("\(credential.user):\(credential.password)"))
        raw.auth_schemes = schemes.rawValue
    }

    /// A body in memory, which the engine borrows until the transfer finishes:
    /// the caller keeps `body` alive until then.
    mutating func setBody(_ body: LentBody) {
        raw.body_kind = CT_BODY_MEMORY
        raw.body_data = UnsafeRawPointer(body.bytes)
        raw.body_length = Int64(body.count)
    }

    /// A body read from a file, from `offset`, `length` bytes (-1: to the end).
    mutating func setBody(file path: String, offset: Int64, length: Int64, strings: CStrings) {
        raw.body_kind = CT_BODY_FILE
        raw.body_path = UnsafePointer(strings.make(path))
        raw.body_offset = offset
        raw.body_length = length
    }

    /// A body the engine pulls through the target's `onRead` (-1: length unknown).
    mutating func setPulledBody(length: Int64) {
        raw.body_kind = CT_BODY_PULL
        raw.body_length = length
    }
}

/// A private copy of an upload body for the engine to read (borrowed from
/// submit until the transfer's finish); freed when the last owner lets go.
final class LentBody: @unchecked Sendable {
    // @unchecked Sendable: immutable after init; the bytes are only read.
    let bytes: UnsafeMutableRawPointer
    let count: Int

    init(copying data: Data) {
        bytes = UnsafeMutableRawPointer.allocate(byteCount: max(data.count, 1), alignment: 16)
        count = data.count
        data.withUnsafeBytes { raw in
            if let base = raw.baseAddress { bytes.copyMemory(from: base, byteCount: raw.count) }
        }
    }

    deinit { bytes.deallocate() }
}

extension SessionManager {
    /// The session's settings and `request` (URL, method, headers, timeouts,
    /// HTTP version, client certificate, resolve list, proxy, cookies).
    ///
    /// - Parameter keepsOriginBoundHeaders: false for a hop to another origin
    ///   than the task's first: the session's `Authorization`, `Cookie` and
    ///   `Proxy-Authorization` headers are then left out (``RedirectPolicy``).
    /// - Throws: ``TransferError/Code/invalidRequest`` for a request or proxy that does not validate.
    /// - Parameter onFastPath: a request that skips the task layer
    ///   (``fastSpec(for:strings:discardsBody:collectsMetrics:)``). It took
    ///   that path because no redirect hook or delegate was set; one set
    ///   since is not asked about this request's redirects, so libcurl
    ///   follows them as configured (no look at the session's lock).
    func fillSpec(_ spec: inout TransferSpec, for request: Request, strings: CStrings,
                  keepsOriginBoundHeaders: Bool = true, onFastPath: Bool = false) throws(TransferError)
    {
        let sessionHeaders = keepsOriginBoundHeaders ? configuration.httpAdditionalHeaders
            : RedirectPolicy.removingOriginBoundHeaders(configuration.httpAdditionalHeaders)
        // Merged once, checked and sent as merged.
        let headers = sessionHeaders.merging(request.headers)
        try request.validate(sending: headers)
        spec.raw.url = UnsafePointer(strings.make(request.url.absoluteString))
        spec.raw.method = UnsafePointer(strings.make(request.method.rawValue))
        // One default User-Agent for every request of the library (the
        // command sets its own on each request): `Transfer/<version>`,
        // unless the session's or the request's headers set one (an empty
        // value sends none).
        let extra = !sessionSetsUserAgent && !request.headers.containsUserAgent
            ? HTTPRequestSerializer.userAgentLine : nil
        let count = headers.count + (extra == nil ? 0 : 1)
        if count > 0 {
            spec.raw.headers = UnsafePointer(strings.makeHeaderLines(headers, then: extra))
            spec.raw.header_count = count
        }
        var flags: TransferFlags = []
        if configuration.followRedirects && (onFastPath || !handlesRedirectsManually) {
            flags.insert(.followRedirects)
        }
        if request.method == .head { flags.insert(.noBody) }
        if !configuration.acceptsCompressedResponses { flags.insert(.noDecompress) }
        flags.formUnion(cookieFlags(for: request))   // Cookies/SessionManager+Cookies.swift
        spec.flags = flags
        spec.raw.max_redirects = Int64(configuration.maxRedirects)
        spec.raw.max_decode_ratio = max(0, configuration.maximumDecompressionRatio)
        // Every time setting goes through TimeLimit: infinity is "no limit",
        // NaN a typed error, never a trapping Int64(_:) (Core/TimeLimit.swift).
        switch try TimeLimit.limit(configuration.connectTimeout, setting: "connectTimeout") {
        case .off: spec.raw.connect_timeout_ms = 0   // the engine's default
        case .unlimited: spec.raw.connect_timeout_ms = TimeLimit.maximumMilliseconds
        case .milliseconds(let ms): spec.raw.connect_timeout_ms = ms
        }
        spec.raw.timeout_ms = try TimeLimit.engineMilliseconds(configuration.timeoutIntervalForResource,
                                                               setting: "timeoutIntervalForResource")
        // URLSession's request timeout is an idle timeout: no byte in either
        // direction for `idle` seconds (the engine's check, ct_timeout.c).
        let idle = try TimeLimit.limit(request.timeoutInterval, setting: "Request.timeoutInterval") == .off
            ? configuration.timeoutIntervalForRequest : request.timeoutInterval
        spec.raw.idle_timeout_ms = try TimeLimit.engineMilliseconds(idle, setting: "timeoutIntervalForRequest")
        let lowSpeedTime = try TimeLimit.engineMilliseconds(configuration.lowSpeedTime, setting: "lowSpeedTime")
        if configuration.lowSpeedLimit > 0 && lowSpeedTime > 0 {
            spec.raw.low_speed_limit = configuration.lowSpeedLimit
            spec.raw.low_speed_time_s = (lowSpeedTime + 999) / 1000
        }
        switch configuration.httpVersion {
        case .automatic: spec.raw.http_version = CT_HTTP_AUTO
        case .http1_1: spec.raw.http_version = CT_HTTP_1_1
        case .http2: spec.raw.http_version = CT_HTTP_2
        case .http1_0: spec.raw.http_version = CT_HTTP_1_0
        case .http2PriorKnowledge: spec.raw.http_version = CT_HTTP_2_PRIOR_KNOWLEDGE
        }
        configuration.transport.fill(&spec.raw, strings: strings)
        spec.raw.client_cert = UnsafePointer(strings.make(configuration.clientCertificatePath))
        spec.raw.client_key = UnsafePointer(strings.make(configuration.clientKeyPath))
        if !configuration.resolve.isEmpty {
            spec.raw.resolve = UnsafePointer(strings.makeArray(configuration.resolve))
            spec.raw.resolve_count = configuration.resolve.count
        }
        if goesDirect {
            spec.flags.insert(.noProxy)
        } else {
            try configuration.proxy.fill(&spec.raw, strings: strings)
        }
    }

    /// The spec of a fast-path request: the session's settings, a memory (or
    /// discarding) sink, no counters block, no progress, no disposition.
    func fastSpec(for request: Request, strings: CStrings, discardsBody: Bool, collectsMetrics: Bool)
        throws(TransferError) -> TransferSpec
    {
        var spec = TransferSpec()
        try fillSpec(&spec, for: request, strings: strings, onFastPath: true)
        spec.flags.insert(.noProgress)
        if !collectsMetrics { spec.flags.insert(.noMetrics) }
        if discardsBody {
            spec.sink = .discard
        } else {
            spec.sink = .memory
            spec.maxBodySize = max(0, configuration.maximumResponseBodySize)
        }
        return spec
    }
}

extension TransferTask {
    /// The spec of one hop of this task: the session's settings for
    /// `request`, the hop's credential, the task's counters, disposition,
    /// trace and speed limit, then what the subclass adds (``configure(_:strings:)``).
    ///
    /// - Throws: What ``SessionManager/fillSpec(_:for:strings:keepsOriginBoundHeaders:onFastPath:)``
    ///   and the subclass throw.
    func makeSpec(for request: Request, credential: (Credential, EngineAuthSchemes)?,
                  strings: CStrings) throws(TransferError) -> TransferSpec
    {
        var spec = TransferSpec()
        // The session's own Authorization/Cookie headers are for the
        // origin the task started at, not for where it was redirected.
        try session.fillSpec(&spec, for: request, strings: strings,
                             keepsOriginBoundHeaders: RedirectPolicy.isSameOrigin(originalRequest.url, request.url))
        if let (credential, schemes) = credential {
            spec.setCredential(credential, schemes: schemes, strings: strings)
        }
        spec.count(into: counterBlock)
        if wantsDisposition() { spec.flags.insert(.awaitDisposition) }
        if session.observation.tracesCurl(self) { spec.flags.insert(.trace) }
        try configure(&spec, strings: strings)
        if let limit = core.withLock({ $0.speedLimit }) {
            spec.maxReceiveSpeed = limit.receive
            spec.maxSendSpeed = limit.send
        }
        return spec
    }
}

extension ProxySetting {
    /// Fills the proxy fields of `spec` (strings live in `strings`) for a
    /// session that does not go direct (``goesDirect(environmentNamesProxy:)``).
    ///
    /// - Throws: ``TransferError/Code/invalidRequest`` when the proxy does not validate.
    func fill(_ spec: inout ct_transfer_spec, strings: CStrings) throws(TransferError) {
        switch self {
        case .environment, .none:
            break  // NULL: libcurl reads the environment (.none goes direct and never gets here)
        case .through(let proxy):
            try proxy.validate()
            spec.proxy = UnsafePointer(strings.make(proxy.curlURL))
            if let credentials = proxy.credentials {
                spec.proxy_user = UnsafePointer(strings.make(credentials.user))
                spec.proxy_password = UnsafePointer(strings.make(credentials.password))
            }
            if !proxy.bypass.isEmpty {
                let list = proxy.bypass.map { $0.trimmingBlanks() }.joined(separator: ",")
                spec.no_proxy = UnsafePointer(strings.make(list))
            }
            spec.proxy_ca_file = UnsafePointer(strings.make(proxy.caFile))
        }
    }

    /// Whether a session's requests go without a proxy and without libcurl
    /// reading the environment (`CT_FLAG_NO_PROXY`): `.none`, and
    /// `.environment` when no proxy variable was set as the session was made.
    func goesDirect(environmentNamesProxy: @autoclosure () -> Bool) -> Bool {
        switch self {
        case .none: return true
        case .environment: return !environmentNamesProxy()
        case .through: return false
        }
    }

    /// Whether a variable libcurl takes a proxy from (`http_proxy`,
    /// `https_proxy`, `HTTPS_PROXY`, `all_proxy`, `ALL_PROXY`) is set and
    /// not empty. Without one, `no_proxy` changes nothing either.
    static func environmentNamesProxy() -> Bool {
        for name in ["http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"] {
            if let value = getenv(name), value.pointee != 0 { return true }
        }
        return false
    }
}
