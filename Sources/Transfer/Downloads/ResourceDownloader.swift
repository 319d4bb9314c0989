import Dispatch
import FoundationEssentials

/// Fetches many resources through one ``SessionManager``: the engine of
/// AFNetworking's `AFImageDownloader`, without the images.
///
/// - **Coalescing:** requests with the same key (method, URL and the
///   varying header fields of the request as sent, the session's additional
///   headers included, see ``ResourceKey``) join one transfer while it is
///   queued or running; every caller gets the result. Requests with a body
///   are never joined.
/// - **Credentials are never shared:** a request that says who is asking —
///   its ``Request/credential``, a user or password in its URL, an
///   `Authorization`, `Proxy-Authorization` or `Cookie` header (its own or
///   the session's), cookies the session's store would send, an interceptor
///   (whose adapter may add any of these), or a session with a 401 challenge
///   hook — is neither joined with another request nor answered from or
///   stored in the cache, unless the caller names a `sharingKey`: requests
///   under one sharing key share one transfer and one cache entry whatever
///   they carry, so a key for a private resource must name its user.
/// - **A cap on active downloads** (``maximumActiveDownloads``); the others
///   wait in a queue served first-in first-out or last-in first-out
///   (``Prioritization``).
/// - **Cancellation per receipt:** ``cancel(_:)`` ends one caller's wait
///   with ``TransferError/Code/cancelled``; the transfer goes on for the
///   others, and is cancelled (or leaves the queue) with the last receipt.
/// - **A cache:** an optional ``AutoPurgingCache`` answers requests whose
///   cache policy allows it without a transfer, and keeps every value decoded.
/// - **Decoding:** a closure or a ``ResponseSerializer`` turns the body into
///   `Value` off the engine thread; a failure reaches every caller as a
///   ``TransferError`` and nothing is cached.
///
/// ```swift
/// let avatars = ResourceDownloader(session: session, cache: AutoPurgingCache<Data>())
/// let receipt = avatars.download(request) { result in
///     if case .success(let resource) = result { serve(resource.value) }
/// }
/// let body = try await avatars.value(for: request)
/// ```
///
/// The downloader uses the session's public data-task API only, so the
/// session's configuration, security policy and hooks apply to its transfers.
/// Every method is safe to call from any thread.
public final class ResourceDownloader<Value: Sendable>: Sendable {
    /// The order in which queued downloads start.
    public enum Prioritization: Sendable, Hashable {
        /// The oldest queued download starts first.
        case fifo
        /// The newest queued download starts first (a scrolling list wants
        /// what is on screen now).
        case lifo
    }

    /// Turns a response body into a value. Any error thrown becomes a
    /// ``TransferError`` (a `TransferError` is passed through; others are
    /// wrapped as ``TransferError/Code/serializationFailed`` with the
    /// original as ``TransferError/underlyingError``).
    public typealias Decoder = @Sendable (Data, HTTPResponse) throws -> Value

    /// Receives the outcome of one request.
    public typealias CompletionHandler = @Sendable (Result<Resource, TransferError>) -> Void

    /// A downloaded (or cached) value.
    public struct Resource: Sendable {
        /// The decoded value.
        public var value: Value
        /// The response it came with; nil when it came from the cache.
        public var response: HTTPResponse?
        /// Whether the cache answered, without a transfer.
        public var isFromCache: Bool { response == nil }
    }

    /// One caller's claim on a download: pass it to ``cancel(_:)``.
    public struct Receipt: Sendable, Hashable {
        /// The identifier given to ``download(_:receiptID:sharingKey:completionHandler:)``, or a new one.
        public let receiptID: UUID
        /// The request this receipt waits for.
        public let request: Request
        let key: String
    }

    /// The session whose data tasks carry the transfers.
    public let session: SessionManager
    /// Where values are looked up and stored; nil: no caching.
    public let cache: AutoPurgingCache<Value>?
    /// Downloads running at once at most (at least 1).
    public let maximumActiveDownloads: Int
    /// The order in which queued downloads start.
    public let prioritization: Prioritization
    /// Where completion handlers run (a private serial queue by default).
    public let completionQueue: DispatchQueue
    /// Header fields that keep requests for one URL apart, when no cache says
    /// otherwise (with a cache, its ``AutoPurgingCache/varyingHeaderFields``).
    public let varyingHeaderFields: [String]

    private let decoder: Decoder
    private let state = Protected(State())

    private struct Waiter {
        let receiptID: UUID
        let deliver: @Sendable (Result<Resource, TransferError>) -> Void
    }

    /// The requests that share one transfer.
    private struct Entry {
        let serial: UInt64
        let request: Request
        /// Where the value is cached; nil: it is not (the request shares nothing).
        let cacheIdentifier: String?
        var waiters: [Waiter]
        /// Set when the transfer starts; nil while queued.
        var task: Task<Void, Never>?
    }

    private struct State {
        var entries: [String: Entry] = [:]
        /// Keys of queued entries, oldest first.
        var queued: [String] = []
        var active = 0
        var nextSerial: UInt64 = 0
    }

    /// A downloader that decodes bodies with `decoder`.
    ///
    /// - Parameters:
    ///   - session: Carries the transfers; the downloader does not own it.
    ///   - cache: Where values are kept; nil for none.
    ///   - prioritization: FIFO (the default) or LIFO.
    ///   - maximumActiveDownloads: Transfers at once (default 4, as
    ///     AFNetworking's); values below 1 count as 1.
    ///   - completionQueue: Where completion handlers run; nil for a private
    ///     serial queue.
    ///   - decoder: Runs once per transfer, off the engine thread, for
    ///     responses with a 2xx status only: any other status fails with
    ///     ``TransferError/Code/unacceptableStatusCode`` before it runs.
    public init(
        session: SessionManager, cache: AutoPurgingCache<Value>? = nil, prioritization: Prioritization = .fifo,
        maximumActiveDownloads: Int = 4, completionQueue: DispatchQueue? = nil,
        decoder: @escaping Decoder
    ) {
        self.session = session
        self.cache = cache
        self.prioritization = prioritization
        self.maximumActiveDownloads = max(1, maximumActiveDownloads)
        self.completionQueue = completionQueue ?? DispatchQueue(label: "transfer.resource-downloader.completion")
        self.varyingHeaderFields = cache?.varyingHeaderFields ?? ResourceKey.defaultVaryingHeaderFields
        let validation = HTTPResponseSerializer()
        self.decoder = { data, response in
            try validation.validate(response: response, data: data)
            return try decoder(data, response)
        }
    }

    /// A downloader that decodes bodies with `serializer`, whose own status
    /// and content-type validation applies.
    public init<Serializer: ResponseSerializer>(
        session: SessionManager, serializer: Serializer, cache: AutoPurgingCache<Value>? = nil,
        prioritization: Prioritization = .fifo, maximumActiveDownloads: Int = 4,
        completionQueue: DispatchQueue? = nil
    ) where Serializer.SerializedObject == Value {
        self.session = session
        self.cache = cache
        self.prioritization = prioritization
        self.maximumActiveDownloads = max(1, maximumActiveDownloads)
        self.completionQueue = completionQueue ?? DispatchQueue(label: "transfer.resource-downloader.completion")
        self.varyingHeaderFields = cache?.varyingHeaderFields ?? ResourceKey.defaultVaryingHeaderFields
        self.decoder = { data, response in
            try serializer.serialize(response: response, data: data, error: nil)
        }
    }

    /// Downloads running now.
    public var activeDownloadCount: Int { state.withLock { $0.active } }
    /// Downloads waiting for a free slot.
    public var queuedDownloadCount: Int { state.withLock { $0.queued.count } }

    // MARK: Completion-handler API

    /// Downloads `request`, or joins the transfer already queued or running
    /// for the same key, or answers from the cache.
    ///
    /// - Parameters:
    ///   - request: The request; its ``Request/cachePolicy`` decides whether
    ///     the cache is consulted (`.reloadIgnoringLocalCacheData` skips it).
    ///     A request that carries credentials of any kind (see the type's
    ///     documentation) is never joined or cached without a `sharingKey`.
    ///   - receiptID: Names this caller (AFNetworking's receipt ID); a new one by default.
    ///   - sharingKey: The caller's key for this request: requests under the
    ///     same key join one transfer and share one cache entry (stored under
    ///     this identifier), credentials or not. nil (the default): the key is
    ///     built from the request as sent, and a request with credentials
    ///     shares nothing.
    ///   - completionHandler: Runs once on ``completionQueue``: the value, or a
    ///     ``TransferError`` (the transfer's, a validation or decoding
    ///     failure, or ``TransferError/Code/cancelled`` after ``cancel(_:)``).
    /// - Returns: The receipt to cancel this caller's wait, or nil when the
    ///   cache answered at once (the handler is already queued).
    @discardableResult
    public func download(
        _ request: Request, receiptID: UUID = UUID(), sharingKey: String? = nil,
        completionHandler: @escaping CompletionHandler
    ) -> Receipt? {
        let queue = completionQueue
        return submit(request, receiptID: receiptID, sharingKey: sharingKey) { result in
            queue.async { completionHandler(result) }
        }
    }

    /// Ends the wait of `receipt`'s caller, whose handler gets
    /// ``TransferError/Code/cancelled``. The transfer goes on while other
    /// receipts wait for it; with the last one it leaves the queue or is
    /// cancelled. Does nothing when the caller already has its result.
    public func cancel(_ receipt: Receipt) {
        let (waiter, task) = state.withLock { state -> (Waiter?, Task<Void, Never>?) in
            guard var entry = state.entries[receipt.key],
                let index = entry.waiters.firstIndex(where: { $0.receiptID == receipt.receiptID })
            else { return (nil, nil) }
            let waiter = entry.waiters.remove(at: index)
            guard entry.waiters.isEmpty else {
                state.entries[receipt.key] = entry
                return (waiter, nil)
            }
            state.entries[receipt.key] = nil
            // A running transfer keeps its slot until it has really ended, so
            // the cap holds; a queued one just leaves the queue.
            if entry.task == nil { state.queued.removeAll { $0 == receipt.key } }
            return (waiter, entry.task)
        }
        task?.cancel()
        let url = receipt.request.url
        waiter?.deliver(.failure(TransferError(.cancelled, "the download was cancelled for this receipt", url: url)))
    }

    // MARK: async API

    /// ``download(_:receiptID:sharingKey:completionHandler:)`` for async callers.
    /// Cancelling the Swift task cancels this caller's receipt only.
    ///
    /// - Parameters:
    ///   - request: The request (see ``download(_:receiptID:sharingKey:completionHandler:)``).
    ///   - sharingKey: The caller's key, or nil to key on the request as sent
    ///     (requests with credentials then share nothing).
    /// - Throws: ``TransferError``, ``TransferError/Code/cancelled`` when the task is cancelled.
    public func resource(for request: Request, sharingKey: String? = nil) async throws(TransferError) -> Resource {
        // Holds the receipt for the cancellation handler, and whether it ran
        // before the receipt existed (then the submitting side cancels).
        let claim = Protected<(receipt: Receipt?, cancelled: Bool)>((nil, false))
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<Resource, TransferError>, Never>)
                in
                let receipt = submit(request, receiptID: UUID(), sharingKey: sharingKey) {
                    continuation.resume(returning: $0)
                }
                let cancelNow = claim.withLock { claim -> Bool in
                    claim.receipt = receipt
                    return claim.cancelled
                }
                if cancelNow, let receipt { cancel(receipt) }
            }
        } onCancel: {
            let receipt = claim.withLock { claim -> Receipt? in
                claim.cancelled = true
                return claim.receipt
            }
            if let receipt { cancel(receipt) }
        }
        return try result.get()
    }

    /// The decoded value of ``resource(for:sharingKey:)``.
    public func value(for request: Request, sharingKey: String? = nil) async throws(TransferError) -> Value {
        try await resource(for: request, sharingKey: sharingKey).value
    }

    // MARK: Internals

    /// The key `request` is joined and cached under, or nil when it shares
    /// nothing: it has a body, or it says who is asking and the caller named
    /// no sharing key: one user's private body must never reach another.
    private func sharedKey(for request: Request, sharingKey: String?) -> String? {
        guard request.body == nil else { return nil }
        if let sharingKey { return sharingKey }
        guard !session.sendsIdentity(with: request) else { return nil }
        // As sent: the session's additional headers take part in the key too.
        var sent = request
        sent.headers = session.headersAsSent(request)
        return ResourceKey.string(for: sent, varyingHeaderFields: varyingHeaderFields)
    }

    private func submit(
        _ request: Request, receiptID: UUID, sharingKey: String?,
        deliver: @escaping @Sendable (Result<Resource, TransferError>) -> Void
    ) -> Receipt? {
        let shared = sharedKey(for: request, sharingKey: sharingKey)
        if let cache, let shared, request.cachePolicy != .reloadIgnoringLocalCacheData,
            let value = cache.value(withIdentifier: shared)
        {
            deliver(.success(Resource(value: value, response: nil)))
            return nil
        }
        // A request that shares nothing gets a key of its own.
        let key = shared ?? "unique " + UUID().uuidString
        let waiter = Waiter(receiptID: receiptID, deliver: deliver)
        state.withLock { state in
            if state.entries[key] != nil {
                state.entries[key]?.waiters.append(waiter)
                return
            }
            state.nextSerial += 1
            state.entries[key] = Entry(
                serial: state.nextSerial, request: request, cacheIdentifier: shared, waiters: [waiter])
            state.queued.append(key)
            startQueued(&state)
        }
        return Receipt(receiptID: receiptID, request: request, key: key)
    }

    /// Under the lock: starts queued entries while there are free slots.
    private func startQueued(_ state: inout State) {
        while state.active < maximumActiveDownloads, !state.queued.isEmpty {
            let key = prioritization == .fifo ? state.queued.removeFirst() : state.queued.removeLast()
            guard let entry = state.entries[key] else { continue }
            state.active += 1
            let serial = entry.serial
            let request = entry.request
            let cacheIdentifier = entry.cacheIdentifier
            // The task only starts running after the lock is released.
            state.entries[key]?.task = Task {
                await self.run(request, key: key, serial: serial, cacheIdentifier: cacheIdentifier)
            }
        }
    }

    private func run(_ request: Request, key: String, serial: UInt64, cacheIdentifier: String?) async {
        let result: Result<Resource, TransferError>
        do throws(TransferError) {
            let (data, response) = try await session.data(for: request)
            result = .success(Resource(value: try decode(data, response, url: request.url), response: response))
        } catch {
            result = .failure(error)
        }
        if case .success(let resource) = result, let cacheIdentifier {
            // Before the entry goes away, so that a request arriving now finds the value.
            cache?.add(resource.value, withIdentifier: cacheIdentifier)
        }
        let waiters = state.withLock { state -> [Waiter] in
            state.active -= 1
            var waiters: [Waiter] = []
            // A cancelled entry may already have been replaced by a new one for the same key.
            if let entry = state.entries[key], entry.serial == serial {
                waiters = entry.waiters
                state.entries[key] = nil
            }
            startQueued(&state)
            return waiters
        }
        for waiter in waiters { waiter.deliver(result) }
    }

    private func decode(_ data: Data, _ response: HTTPResponse, url: URL) throws(TransferError) -> Value {
        do {
            return try decoder(data, response)
        } catch let error as TransferError {
            throw error
        } catch {
            throw TransferError(
                .serializationFailed, "the downloaded resource could not be decoded: \(error)", url: url,
                underlying: error)
        }
    }
}

extension ResourceDownloader where Value == Data {
    /// A downloader of raw bodies, validated by ``HTTPResponseSerializer``
    /// (2xx statuses only).
    public convenience init(
        session: SessionManager, cache: AutoPurgingCache<Data>? = nil, prioritization: Prioritization = .fifo,
        maximumActiveDownloads: Int = 4, completionQueue: DispatchQueue? = nil
    ) {
        self.init(
            session: session, serializer: HTTPResponseSerializer(), cache: cache, prioritization: prioritization,
            maximumActiveDownloads: maximumActiveDownloads, completionQueue: completionQueue)
    }
}
