import FoundationEssentials
import Glibc

/// Timing and wire facts of one task, in the shape of URLSessionTaskMetrics.
/// Times are seconds from the moment the task was handed to the engine; a
/// phase that did not happen (no TLS on plain HTTP) is 0, an unknown one -1.
public struct TaskMetrics: Sendable, Hashable, Codable {
    /// Waiting in the engine's queue before the transfer started.
    public var queueDuration: Double
    /// Until the host name was resolved (DNS).
    public var nameLookup: Double
    /// Until the TCP connection (or the proxy's) was made.
    public var connect: Double
    /// Until the TLS handshake finished (0 on plain HTTP).
    public var tlsHandshake: Double
    /// Until the request, body included, was sent.
    public var requestSent: Double
    /// Until the first response byte arrived (time to first byte).
    public var firstByte: Double
    /// Until the transfer ended.
    public var total: Double
    /// Time spent on redirect hops before the final request.
    public var redirectDuration: Double
    /// How many redirects were followed.
    public var redirectCount: Int
    /// "1.0", "1.1", "2", "3", or "" when no response came.
    public var httpVersion: String
    /// Whether the transfer used a connection kept from an earlier one.
    public var reusedConnection: Bool
    /// The server's IP address ("" when no connection was made).
    public var remoteAddress: String
    /// The server's port.
    public var remotePort: Int
    /// Our side's IP address.
    public var localAddress: String
    /// Our side's port.
    public var localPort: Int
    /// Bytes of request headers sent, all hops included.
    public var requestHeaderBytes: Int64
    /// Bytes of response headers received, all hops included.
    public var responseHeaderBytes: Int64
    /// Body bytes sent (uploads).
    public var bodyBytesSent: Int64
    /// Body bytes after decoding (what the sink received).
    public var bodyBytesReceived: Int64
    /// Attempts the task made, this one included (more than 1 after retries;
    /// see ``TransferTask/attemptMetrics`` for each one's metrics).
    public var attempts: Int = 1
    /// How the response was obtained (URLSessionTaskTransactionMetrics'
    /// `resourceFetchType`): from the network, from the session's
    /// ``ResponseCache`` without a request, or from the cache after the
    /// server answered a revalidation with 304.
    public var resourceFetchType: ResourceFetchType = .networkLoad

    /// Where a task's response came from (see ``TaskMetrics/resourceFetchType``).
    public enum ResourceFetchType: String, Sendable, Hashable, Codable {
        /// Sent to the server, answered in full.
        case networkLoad
        /// Served by the response cache; nothing was sent (phases stay unknown, -1).
        case localCache
        /// The cached body, after the server confirmed it with 304 Not Modified.
        case revalidated
    }

    /// Metrics of a task that has not run: every phase unknown (-1).
    public init() {
        queueDuration = 0; nameLookup = -1; connect = -1; tlsHandshake = -1; requestSent = -1
        firstByte = -1; total = -1; redirectDuration = 0; redirectCount = 0; httpVersion = ""
        reusedConnection = false; remoteAddress = ""; remotePort = 0; localAddress = ""; localPort = 0
        requestHeaderBytes = 0; responseHeaderBytes = 0; bodyBytesSent = 0; bodyBytesReceived = 0
    }
}
