import CTransfer
import Dispatch
import FoundationEssentials
import Glibc
import Synchronization

/// What a line of libcurl's trace is (`ct_debug_kind`).
enum TraceLineKind: Sendable {
    /// A response header line.
    case headerIn
    /// A request header line.
    case headerOut
    /// Anything else: curl's notes.
    case text

    init(_ kind: Int32) {
        switch kind {
        case Int32(CT_DEBUG_HEADER_IN.rawValue): self = .headerIn
        case Int32(CT_DEBUG_HEADER_OUT.rawValue): self = .headerOut
        default: self = .text
        }
    }
}

/// What a response's disposition tells the engine (`ct_disposition`).
enum EngineDisposition: Sendable {
    /// Go on as the transfer was submitted.
    case allow
    /// Stop the transfer (it finishes as cancelled).
    case cancel
    /// Write the body to a file at `path` from now on (become-download).
    case becomeFile(path: String)
}

struct ProgressSnapshot: Sendable {
    var sent: Int64
    var expectedToSend: Int64
    var received: Int64
    var expectedToReceive: Int64
    var elapsed: Double
}

/// A finished transfer, copied out of `ct_result`.
struct Outcome: Sendable {
    var code: ct_code
    var curlCode: Int32
    var systemErrno: Int32
    var tlsReason: Int32
    var verifyError: Int32
    var httpStatus: Int
    var bytesOnDisk: Int64
    var resumeOffset: Int64
    var effectiveURL: String?
    var redirectURL: String?
    var etag: String?
    var lastModified: String?
    var filePath: String?
    var body: Data?
    var metrics: TaskMetrics
    var message: String

    var succeeded: Bool { code == CT_OK }
}

/// Owns one `ct_loop` (one engine thread). Thread-safe: every method only
/// queues a command; the loop thread does the work.
final class Engine: Sendable {
    /// The loop pointer is set once in init and freed once in deinit; the C
    /// API it is passed to is safe from any thread.
    private nonisolated(unsafe) let loop: OpaquePointer
    /// Events for the session's delegate queue, flushed after each loop pass.
    let mailbox: Mailbox
    /// What the end of each loop pass hands over: fast-path finishes, then
    /// the mailbox (see ``EnginePass``).
    let pass: EnginePass

    init(configuration: SessionConfiguration, delegateQueue: DispatchQueue,
         cookieStore: CookieStore? = nil) throws(TransferError)
    {
        mailbox = Mailbox(queue: delegateQueue)
        pass = EnginePass(mailbox: mailbox)
        var config = ct_loop_config()
        ct_loop_config_init(&config)
        config.callbacks = Engine.callbacks
        // The loop holds the pass (and its mailbox) until its thread ends:
        // on_loop_end releases it. deinit may run on the loop thread itself
        // (the last reference dropped in a completion), and then
        // ct_loop_destroy returns before the loop's last on_batch_end.
        config.batch_ctx = Unmanaged.passRetained(pass).toOpaque()
        config.max_connections_per_host = Int64(configuration.maxConnectionsPerHost)
        config.max_total_connections = Int64(configuration.maxTotalConnections)
        config.max_idle_connections = Int64(max(0, configuration.maxIdleConnections))
        config.multiplex = configuration.httpVersion == .http1_1 || configuration.httpVersion == .http1_0 ? 0 : 1
        config.max_total_recv_speed = configuration.maxTotalReceiveSpeed
        config.max_total_send_speed = configuration.maxTotalSendSpeed
        if let cookieStore {
            // The loop retains the jar; a store whose jar could not be made cannot start a session.
            guard let jar = cookieStore.jar else {
                Unmanaged.passUnretained(mailbox).release()
                throw TransferError(.internalError, "cannot start the transfer engine: the cookie store has no jar")
            }
            config.cookie_jar = jar.pointer
        }
        var created: OpaquePointer?
        let code: ct_code = configuration.caFile.withOptionalCString { caFile in
            config.ca_file = caFile
            return ct_loop_create(&config, &created)
        }
        guard code == CT_OK, let created else {
            // No thread ran, so on_loop_end will not release it.
            Unmanaged.passUnretained(pass).release()
            if code == CT_E_TOO_MANY_OPEN_FILES {
                throw TransferError(.tooManyOpenFiles, "cannot start the transfer engine: " + Engine.openFileLimitText)
            }
            throw TransferError(
                code == CT_E_INVALID_REQUEST ? .invalidRequest : .internalError,
                "cannot start the transfer engine: \(String(cString: ct_code_name(code)))"
                    + (configuration.caFile.map { " (CA file \($0))" } ?? ""))
        }
        loop = created
    }

    deinit {
        // Finishes every transfer (as cancelled): before returning, or, when
        // the last reference is dropped on the loop thread, right after.
        // After ``stop()`` it only frees what the stop left.
        ct_loop_destroy(loop)
    }

    /// Set by the first ``stop()``.
    private let stopped = Atomic<Bool>(false)

    /// Ends the loop thread and closes its connections now, before the
    /// engine is freed: every transfer still running finishes as cancelled,
    /// and later commands fail with `CT_E_SHUTDOWN` (submits with
    /// ``TransferError/Code/sessionInvalidated``). Blocks until the thread
    /// has ended; call it off the loop thread (from it, it does nothing).
    /// Only the first call acts.
    func stop() {
        guard stopped.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        ct_loop_stop(loop)
    }

    /// Submits a transfer whose engine events go to `target`. On success
    /// the target's ``EngineTarget/engineDidFinish(_:)`` runs exactly once.
    func submit(_ spec: inout TransferSpec, target: EngineTarget) -> Result<UInt64, TransferError> {
        let box = Unmanaged.passRetained(target)
        var id: UInt64 = 0
        let code = ct_loop_submit(loop, &spec.raw, box.toOpaque(), &id)
        guard code == CT_OK else {
            // Nothing was queued: no callback will run, the box is ours again.
            box.release()
            return .failure(TransferError(Engine.errorCode(for: code),
                                          "cannot start the transfer: \(String(cString: ct_code_name(code)))"))
        }
        return .success(id)
    }

    /// Submits `specs.count` transfers in one engine command (one lock, one
    /// wake-up). All or nothing: on success every target's finish runs
    /// exactly once and `ids[i]` names `targets[i]`'s transfer.
    /// Generic over the target class, so that an array of a subclass is
    /// not converted (a new array per window) to pass it. `contexts` and
    /// `ids` are the caller's buffers, kept from one call to the next (no
    /// allocation per window): on success `ids[i]` names `targets[i]`'s
    /// transfer, and the error is nil.
    func submitBatch<Target: EngineTarget>(_ specs: [TransferSpec], targets: [Target],
                                           contexts: inout [UnsafeMutableRawPointer?], ids: inout [UInt64])
        -> TransferError?
    {
        precondition(specs.count == targets.count, "Engine.submitBatch: one target per spec")
        contexts.removeAll(keepingCapacity: true)
        ids.removeAll(keepingCapacity: true)
        if specs.isEmpty { return nil }
        for target in targets { contexts.append(Unmanaged.passRetained(target).toOpaque()) }
        ids.append(contentsOf: repeatElement(0, count: specs.count))
        // TransferSpec's one stored property is its ct_transfer_spec: same layout.
        let code = specs.withUnsafeBufferPointer { wrapped in
            wrapped.withMemoryRebound(to: ct_transfer_spec.self) { specBuffer in
                contexts.withUnsafeBufferPointer { contextBuffer in
                    ids.withUnsafeMutableBufferPointer { idBuffer in
                        ct_loop_submit_batch(loop, specBuffer.baseAddress!,
                                             UnsafeRawPointer(contextBuffer.baseAddress!)
                                                 .assumingMemoryBound(to: UnsafeMutableRawPointer?.self),
                                             specs.count, idBuffer.baseAddress!)
                    }
                }
            }
        }
        guard code == CT_OK else {
            // Nothing was queued: every context is ours again.
            for context in contexts { Unmanaged<Target>.fromOpaque(context!).release() }
            return TransferError(Engine.errorCode(for: code),
                                 "cannot start the transfers: \(String(cString: ct_code_name(code)))")
        }
        return nil
    }

    // The commands below queue and return at once. Their code is returned
    // (discardable) and is CT_OK, or one of:
    // - CT_E_NOT_FOUND: an id this engine never issued (a caller bug);
    // - CT_E_SHUTDOWN: the engine is stopping and every transfer is already
    //   finishing as cancelled, so the command has nothing left to do;
    // - CT_E_NO_MEMORY: the command is lost; the transfer runs on as if it
    //   had not been sent (callers that must not lose it check the code).
    // A command on a transfer that has finished meanwhile is a no-op.

    @discardableResult
    func cancel(_ id: UInt64, keepPartial: Bool) -> ct_code {
        ct_loop_cancel(loop, id, keepPartial ? 1 : 0)
    }

    /// A streamed body that answered `CT_READ_PAUSE` has bytes (or its end)
    /// now. CT_E_NO_MEMORY loses the wake-up: the caller must fail the task.
    @discardableResult
    func bodyReady(_ id: UInt64) -> ct_code { ct_loop_body_ready(loop, id) }

    /// A stream consumer drained its buffer after `onData` answered true: the
    /// transfer may deliver again. Returns false when the wake-up was lost
    /// (CT_E_NO_MEMORY): the caller must fail the task.
    @discardableResult
    func consumerReady(_ id: UInt64) -> Bool { ct_loop_consumer_ready(loop, id) != CT_E_NO_MEMORY }

    @discardableResult
    func pause(_ id: UInt64) -> ct_code { ct_loop_pause(loop, id) }

    @discardableResult
    func resume(_ id: UInt64) -> ct_code { ct_loop_resume(loop, id) }

    @discardableResult
    func setDisposition(_ id: UInt64, _ disposition: EngineDisposition) -> ct_code {
        switch disposition {
        case .allow: ct_loop_set_disposition(loop, id, CT_DISPOSITION_ALLOW, nil)
        case .cancel: ct_loop_set_disposition(loop, id, CT_DISPOSITION_CANCEL, nil)
        case .becomeFile(let path):
            path.withCString { ct_loop_set_disposition(loop, id, CT_DISPOSITION_BECOME_FILE, $0) }
        }
    }

    @discardableResult
    func setSpeedLimit(_ id: UInt64, receive: Int64, send: Int64) -> ct_code {
        ct_loop_set_speed_limit(loop, id, receive, send)
    }

    @discardableResult
    func setTotalSpeedLimit(receive: Int64, send: Int64) -> ct_code {
        ct_loop_set_total_speed_limit(loop, receive, send)
    }

    /// Installs a trust policy (retained by the loop; nil removes it).
    @discardableResult
    func setTrustPolicy(_ policy: EngineTrustPolicy?) -> ct_code {
        ct_loop_set_trust_policy(loop, policy?.pointer)
    }

    var activeCount: Int64 { ct_loop_active_count(loop) }
    var wakeups: UInt64 { ct_loop_wakeups(loop) }

    /// The pool counters of the loop (relaxed reads, no lock).
    var poolStatistics: ConnectionPoolStatistics {
        var stats = ct_pool_stats()
        ct_loop_pool_stats(loop, &stats)
        return ConnectionPoolStatistics(openConnections: Int(stats.open_connections),
                                        activeTransfers: Int(stats.active_transfers),
                                        queuedTransfers: Int(stats.queued_transfers))
    }

    /// "all N descriptors of the open-file limit (RLIMIT_NOFILE, ulimit -n) are in use", the words of
    /// the engine's own messages (ct_fdlimit.c).
    static var openFileLimitText: String {
        let limit = ct_open_file_limit()
        let bound = limit > 0 ? String(limit) : "unlimited"
        return "all \(bound) descriptors of the open-file limit (RLIMIT_NOFILE, ulimit -n) are in use"
    }

    static func errorCode(for code: ct_code) -> TransferError.Code {
        switch code {
        case CT_E_INVALID_REQUEST, CT_E_INVALID_ARGUMENT: return .invalidRequest
        case CT_E_CANNOT_CONNECT: return .cannotConnect
        case CT_E_TIMED_OUT: return .timedOut
        case CT_E_TLS: return .tlsFailure
        case CT_E_SERVER_TRUST: return .serverTrustRejected
        case CT_E_TOO_MANY_REDIRECTS: return .tooManyRedirects
        case CT_E_REDIRECT_REFUSED: return .redirectRefused
        case CT_E_TRUNCATED: return .truncatedResponse
        case CT_E_BAD_RESPONSE: return .badResponse
        case CT_E_CANCELLED: return .cancelled
        case CT_E_SINK_IO, CT_E_SOURCE_IO: return .fileError
        case CT_E_CHECKSUM: return .checksumMismatch
        case CT_E_SHUTDOWN: return .sessionInvalidated
        case CT_E_HTTP_STATUS: return .unacceptableStatusCode
        case CT_E_TRANSPORT: return .transport
        case CT_E_TOO_LARGE: return .responseTooLarge
        case CT_E_PROXY: return .proxyFailure
        case CT_E_EMPTY_REPLY: return .emptyResponse
        case CT_E_TOO_MANY_OPEN_FILES: return .tooManyOpenFiles
        case CT_E_INTERNAL, CT_E_NO_MEMORY, CT_E_SYSTEM, CT_E_UNSUPPORTED: return .internalError
        default: return .internalError
        }
    }
}

/// The per-transfer context handed to C: whatever receives one transfer's
/// engine events, and the only type a C context is ever cast to. Retained
/// once at submit and released by the finish trampoline (exactly one finish
/// per transfer). Every method runs on the loop thread and must only copy
/// and hand over. Subclasses: a task's hop (``EngineRoute``), a fast-path
/// request (``FastRequest``), a segmented download's probe and segments.
class EngineTarget {
    /// The response head (once per hop; again after a followed redirect).
    func engineDidReceiveResponse(_ head: EngineResponseHead) {}
    /// Throttled byte counts (not for transfers submitted without progress).
    func engineDidProgress(_ progress: ProgressSnapshot) {}
    /// A body chunk of a streaming sink, valid during the call only.
    /// True: hold the transfer until ``Engine/consumerReady(_:)``.
    func engineDidReceiveData(_ chunk: UnsafeRawBufferPointer) -> Bool { false }
    /// Last of all; `result` is valid during the call only (its body is ours).
    func engineDidFinish(_ result: EngineResult) {}
    /// Pull source of a streamed body: fills `buffer`, returns the count, 0
    /// at the end, -1 on error, or ``readPaused`` when nothing is buffered
    /// (then ``Engine/bodyReady(_:)`` later). Must not block.
    func engineRead(into buffer: UnsafeMutableRawBufferPointer) -> Int { -1 }
    /// Starts a streamed body again (a redirect or authentication retry);
    /// false if impossible. Must not block.
    func engineRewind() -> Bool { false }
    /// One line of libcurl's redacted verbose trace (only for transfers
    /// submitted with tracing on). `line` is valid during the call only.
    func engineDidTrace(_ kind: TraceLineKind, line: UnsafeRawBufferPointer) {}
    /// libcurl is about to follow a redirect (every followed hop, traced or
    /// not): the hop's status, the URL it came from, its Location as sent.
    /// The strings are valid during the call only.
    func engineWillFollowRedirect(status: Int, from: UnsafePointer<CChar>, to location: UnsafePointer<CChar>) {}

    /// What ``engineRead(into:)`` answers when nothing is buffered yet (`CT_READ_PAUSE`).
    static var readPaused: Int { Int(CT_READ_PAUSE) }
}

extension Engine {
    /// The C callback table. Trampolines find the transfer's target and let
    /// it copy what C hands over (then hop to the session's queues).
    fileprivate static let callbacks: ct_callbacks = {
        var cb = ct_callbacks()
        cb.on_response = { ctx, head in
            guard let ctx else { return }
            Unmanaged<EngineTarget>.fromOpaque(ctx).takeUnretainedValue()
                .engineDidReceiveResponse(EngineResponseHead(pointer: head))
        }
        cb.on_progress = { ctx, progress in
            guard let ctx else { return }
            let p = progress.pointee
            Unmanaged<EngineTarget>.fromOpaque(ctx).takeUnretainedValue().engineDidProgress(
                ProgressSnapshot(sent: p.bytes_sent, expectedToSend: p.bytes_expected_to_send,
                                 received: p.bytes_received, expectedToReceive: p.bytes_expected_to_receive,
                                 elapsed: p.elapsed))
        }
        cb.on_data = { ctx, bytes, length in
            guard let ctx else { return CT_DATA_CONTINUE }
            let full = Unmanaged<EngineTarget>.fromOpaque(ctx).takeUnretainedValue()
                .engineDidReceiveData(UnsafeRawBufferPointer(start: bytes, count: length))
            return full ? CT_DATA_PAUSE : CT_DATA_CONTINUE
        }
        cb.on_finish = { ctx, result in
            guard let ctx else { return }
            // Balances the passRetained in submit().
            Unmanaged<EngineTarget>.fromOpaque(ctx).takeRetainedValue().engineDidFinish(EngineResult(pointer: result))
        }
        cb.on_read = { ctx, buffer, capacity in
            guard let ctx else { return -1 }
            return Int64(Unmanaged<EngineTarget>.fromOpaque(ctx).takeUnretainedValue()
                .engineRead(into: UnsafeMutableRawBufferPointer(start: buffer, count: capacity)))
        }
        cb.on_batch_end = { ctx in
            guard let ctx else { return }
            Unmanaged<EnginePass>.fromOpaque(ctx).takeUnretainedValue().end()
        }
        cb.on_loop_end = { ctx in
            guard let ctx else { return }
            // Balances the passRetained in init.
            Unmanaged<EnginePass>.fromOpaque(ctx).release()
        }
        cb.on_rewind = { ctx in
            guard let ctx else { return -1 }
            return Unmanaged<EngineTarget>.fromOpaque(ctx).takeUnretainedValue().engineRewind() ? 0 : -1
        }
        cb.on_debug = { ctx, kind, line, length in
            guard let ctx else { return }
            Unmanaged<EngineTarget>.fromOpaque(ctx).takeUnretainedValue()
                .engineDidTrace(TraceLineKind(kind), line: UnsafeRawBufferPointer(start: line, count: length))
        }
        cb.on_redirect = { ctx, status, from, location in
            guard let ctx else { return }
            Unmanaged<EngineTarget>.fromOpaque(ctx).takeUnretainedValue()
                .engineWillFollowRedirect(status: Int(status), from: from, to: location)
        }
        return cb
    }()
}

extension Outcome {
    init(_ r: ct_result) {
        code = r.code
        curlCode = r.curl_code
        systemErrno = r.sys_errno
        tlsReason = r.tls_reason
        verifyError = r.verify_error
        httpStatus = r.http_status
        bytesOnDisk = r.bytes_on_disk
        resumeOffset = r.resume_offset
        effectiveURL = r.effective_url.map { String(cString: $0) }
        redirectURL = r.redirect_url.map { String(cString: $0) }
        etag = r.etag.map { String(cString: $0) }
        lastModified = r.last_modified.map { String(cString: $0) }
        filePath = r.file_path.map { String(cString: $0) }
        if let pointer = r.body, r.body_length > 0 {
            // Adopt the C buffer without copying; ct_buffer_free releases it.
            body = Data(bytesNoCopy: pointer, count: r.body_length, deallocator: .custom { pointer, _ in
                ct_buffer_free(pointer)
            })
        } else {
            body = nil
        }
        metrics = TaskMetrics(r.metrics)
        message = stringFromCCharArray(r.message)
    }

    /// The outcome of a task the response cache answered: success, no engine detail.
    init(cachedWith metrics: TaskMetrics, body: Data) {
        self.init(code: CT_OK, curlCode: 0, systemErrno: 0, tlsReason: 0, verifyError: 0, httpStatus: 0,
                  bytesOnDisk: 0, resumeOffset: 0, effectiveURL: nil, redirectURL: nil, etag: nil, lastModified: nil,
                  filePath: nil, body: body, metrics: metrics, message: "")
    }

    /// The public error for a failed outcome (nil on success).
    ///
    /// - Parameter sizeSetting: The setting that limited the body's size
    ///   for this transfer, named in a ``TransferError/Code/responseTooLarge``
    ///   message as the one to raise (as the timeout messages name theirs).
    func error(url: URL?, sizeSetting: String = "SessionConfiguration.maximumResponseBodySize") -> TransferError? {
        guard code != CT_OK else { return nil }
        var text = message.isEmpty ? String(cString: ct_code_name(code)) : message
        if code == CT_E_TOO_LARGE {
            // The engine's text says which limit: the size, or the decoding ratio.
            let setting = text.contains("decodes to") ? "SessionConfiguration.maximumDecompressionRatio" : sizeSetting
            text += " (\(setting)); raise it to accept larger responses"
        }
        var error = TransferError(Engine.errorCode(for: code), text, url: url)
        if curlCode != 0 { error.curlCode = curlCode }
        if systemErrno != 0 { error.systemErrno = systemErrno }
        if tlsReason != 0 { error.tlsReason = tlsReason }
        if verifyError != 0 { error.verifyError = verifyError }
        if httpStatus != 0 { error.httpStatus = httpStatus }
        return error
    }
}

extension Optional where Wrapped == String {
    /// Calls `body` with a C string for the value, or NULL for nil.
    func withOptionalCString<R>(_ body: (UnsafePointer<CChar>?) throws -> R) rethrows -> R {
        switch self {
        case .some(let string): return try string.withCString { try body($0) }
        case .none: return try body(nil)
        }
    }
}
