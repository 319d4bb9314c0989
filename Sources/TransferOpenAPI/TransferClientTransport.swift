import Foundation
import HTTPTypes
import OpenAPIRuntime
import Transfer
import TransferHTTPTypes

/// A swift-openapi-runtime `ClientTransport` on a Transfer ``SessionManager``,
/// so that clients made by swift-openapi-generator (or written by hand
/// against `ClientTransport`) run on Transfer's engine.
///
/// ```swift
/// let session = try SessionManager()
/// let client = Client(serverURL: try Servers.Server1.url(),
///                     transport: TransferClientTransport(session: session))
/// ```
///
/// What `send(_:body:baseURL:operationID:)` does:
/// - The URL is `baseURL` followed by the request's path and query (a
///   trailing `/` of `baseURL` is dropped; a query of `baseURL` is kept and
///   the request's is appended to it).
/// - A request body of known length up to ``Configuration/bufferedRequestBodyLimit``
///   is collected and sent from memory (it can be sent again after a
///   redirect or an authentication challenge). A longer body, or one of
///   unknown length, is streamed: read from the `HTTPBody` as the engine
///   sends it, with at most ``Configuration/requestBodyBufferSize`` bytes
///   read ahead (and the engine's own 256 KiB), never whole; unknown length
///   goes out chunked. A streamed body whose `iterationBehavior` is
///   `.single` cannot be sent twice: a redirect that keeps the method
///   (307/308) or a challenge answered by ``Request/credential`` then fails.
/// - The response head is returned as soon as it has arrived; its body is
///   an `HTTPBody` (`iterationBehavior` `.single`) that streams the chunks
///   with backpressure, through ``SessionManager/stream(for:bufferSize:)``:
///   when the consumer falls ``Configuration/responseBufferSize`` bytes
///   behind, the engine stops reading the socket until it catches up.
///   Dropping the body unread, or leaving its loop early, cancels the transfer.
///   `HEAD`, 1xx, 204 and 304 responses have no body (nil).
/// - Every status is a response: a 404 or a 500 is returned, not thrown
///   (the generated client maps it to its `undocumented` or declared case).
/// - Cancelling the calling Swift task, while waiting for the head or while
///   reading the body, cancels the transfer (its connection is closed) and
///   throws `CancellationError`.
/// - Every other failure throws the ``TransferError`` (the runtime wraps it
///   in a `ClientError` whose `underlyingError` is that ``TransferError``).
///
/// Like ``SessionManager/stream(for:bufferSize:)``, each request goes over
/// HTTP/1.1 on a connection of its own while its body streams; connections
/// are reused from the session's pool as usual.
public struct TransferClientTransport: ClientTransport {
    /// Settings of the transport; the session's own (timeouts, TLS, proxies,
    /// pool, headers, interceptors...) apply as for any of its requests.
    public struct Configuration: Sendable {
        /// The high-water mark of the response body buffer, in bytes
        /// (default ``SessionManager/defaultStreamBufferSize``, 1 MiB).
        public var responseBufferSize: Int
        /// A request body of known length up to this many bytes is collected
        /// in memory and sent as data; a longer one, or one of unknown length,
        /// is streamed (default 1 MiB; 0 streams every body).
        public var bufferedRequestBodyLimit: Int
        /// How many bytes of a streamed request body are read ahead of the
        /// engine at most (default 256 KiB).
        public var requestBodyBufferSize: Int
        /// The idle timeout of each request (``Request/timeoutInterval``):
        /// 0, the default, uses the session's.
        public var timeoutInterval: TimeInterval

        /// Settings with the given values (the defaults as documented on each).
        public init(
            responseBufferSize: Int = SessionManager.defaultStreamBufferSize,
            bufferedRequestBodyLimit: Int = 1 << 20,
            requestBodyBufferSize: Int = 256 << 10,
            timeoutInterval: TimeInterval = 0
        ) {
            self.responseBufferSize = max(1, responseBufferSize)
            self.bufferedRequestBodyLimit = max(0, bufferedRequestBodyLimit)
            self.requestBodyBufferSize = max(1, requestBodyBufferSize)
            self.timeoutInterval = timeoutInterval
        }
    }

    /// The session the requests are sent on.
    public let session: SessionManager
    /// The transport's settings.
    public var configuration: Configuration

    /// A transport sending on `session`.
    public init(session: SessionManager, configuration: Configuration = Configuration()) {
        self.session = session
        self.configuration = configuration
    }

    /// Sends `request` with `body` to `baseURL` joined with the request's
    /// path; see ``TransferClientTransport`` for what happens to bodies,
    /// statuses, cancellation and errors.
    ///
    /// - Throws: `CancellationError` when the calling task is cancelled,
    ///   ``TransferError`` for any other failure (an invalid URL is
    ///   ``TransferError/Code/invalidRequest``), or the error the request
    ///   body's sequence threw while it was collected.
    public func send(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String
    ) async throws -> (HTTPTypes.HTTPResponse, HTTPBody?) {
        try Task.checkCancellation()
        let url = try Self.url(baseURL: baseURL, path: request.path)
        var outgoing = Request(url: url, method: Transfer.HTTPMethod(request.method),
                               headers: Transfer.HTTPHeaders(request.headerFields),
                               timeoutInterval: configuration.timeoutInterval)
        var upload: RequestBodyPipe?
        if let body {
            if case .known(let length) = body.length, length <= Int64(configuration.bufferedRequestBodyLimit) {
                outgoing.body = .data(try await Data(collecting: body, upTo: Int(length)))
            } else {
                let pipe = RequestBodyPipe(body: body, capacity: configuration.requestBodyBufferSize)
                upload = pipe
                let length: Int64? = if case .known(let length) = body.length { length } else { nil }
                outgoing.body = .stream(BodyStreamProvider(source: { pipe.makeSource() }), length: length)
            }
        }
        let cleanup = UploadCleanup(upload)
        let head: TransferResponse
        let chunks: ResponseBodyStream
        do {
            let answer = try await session.stream(for: outgoing, bufferSize: configuration.responseBufferSize)
            head = answer.0
            chunks = answer.1
        } catch {
            cleanup.run()
            throw Self.mapped(error)
        }
        let response = HTTPTypes.HTTPResponse(head)
        let status = head.statusCode
        if request.method == .head || (100..<200).contains(status) || status == 204 || status == 304 {
            // No body: wait for the transfer's end (at once), so that its
            // connection goes back to the pool instead of being cancelled.
            var iterator = chunks.makeAsyncIterator()
            while (try? await iterator.next()) != nil {}
            cleanup.run()
            return (response, nil)
        }
        var length = HTTPBody.Length.unknown
        let encoding = head.headers["Content-Encoding"]?.trimmingCharacters(in: .whitespaces).lowercased()
        if head.expectedContentLength >= 0, encoding == nil || encoding == "identity" || encoding == "" {
            length = .known(head.expectedContentLength)
        }
        let sequence = ResponseChunks(stream: chunks, cleanup: cleanup)
        return (response, HTTPBody(sequence, length: length, iterationBehavior: .single))
    }

    /// `baseURL` followed by `path` (which may carry a query): a trailing `/`
    /// of the base is dropped, a base query comes first.
    static func url(baseURL: URL, path: String?) throws(TransferError) -> URL {
        var base = baseURL.absoluteString
        if let hash = base.firstIndex(of: "#") { base = String(base[..<hash]) }
        var baseQuery: Substring?
        if let mark = base.firstIndex(of: "?") {
            baseQuery = base[base.index(after: mark)...]
            base = String(base[..<mark])
        }
        while base.hasSuffix("/") { base.removeLast() }
        var requestPath = Substring(path ?? "")
        if let hash = requestPath.firstIndex(of: "#") { requestPath = requestPath[..<hash] }
        var requestQuery: Substring?
        if let mark = requestPath.firstIndex(of: "?") {
            requestQuery = requestPath[requestPath.index(after: mark)...]
            requestPath = requestPath[..<mark]
        }
        var string = base
        if !requestPath.isEmpty && !requestPath.hasPrefix("/") { string += "/" }
        string += requestPath
        let query = [baseQuery, requestQuery].compactMap { $0 }.filter { !$0.isEmpty }.joined(separator: "&")
        if !query.isEmpty { string += "?" + query }
        guard let url = URL(string: string), let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https", url.host?.isEmpty == false
        else {
            throw TransferError(.invalidRequest, "not an http(s) URL: \(string.debugDescription)", url: baseURL)
        }
        return url
    }

    /// A cancelled transfer of a cancelled Swift task is `CancellationError`;
    /// anything else as it is.
    static func mapped(_ error: any Error) -> any Error {
        if let error = error as? TransferError, error.code == .cancelled, Task.isCancelled {
            return CancellationError()
        }
        return error
    }
}

/// The response body's chunks as `HTTPBody` wants them; the end of the body
/// (or its failure, or the sequence going away) also ends the request body's
/// producer.
struct ResponseChunks: AsyncSequence, Sendable {
    typealias Element = ArraySlice<UInt8>
    let stream: ResponseBodyStream
    let cleanup: UploadCleanup

    func makeAsyncIterator() -> Iterator {
        Iterator(base: stream.makeAsyncIterator(), cleanup: cleanup)
    }

    struct Iterator: AsyncIteratorProtocol {
        var base: ResponseBodyStream.AsyncIterator
        let cleanup: UploadCleanup

        mutating func next() async throws -> ArraySlice<UInt8>? {
            do {
                guard let chunk = try await base.next() else {
                    cleanup.run()
                    return nil
                }
                return ArraySlice(chunk)
            } catch {
                cleanup.run()
                throw TransferClientTransport.mapped(error)
            }
        }
    }
}

/// Stops the request body's producer once the exchange is over (or when the
/// last holder goes away).
final class UploadCleanup: Sendable {
    let pipe: RequestBodyPipe?
    init(_ pipe: RequestBodyPipe?) { self.pipe = pipe }
    func run() { pipe?.cancel() }
    deinit { pipe?.cancel() }
}
