import Foundation

/// Timing and wire facts of one task, in the shape of URLSessionTaskMetrics.
/// Times are seconds from the moment the task was handed to the engine; a
/// phase that did not happen (no TLS on plain HTTP) is 0, an unknown one -1.
public struct TaskMetrics: Sendable, Hashable, Codable {
    /// Waiting in the engine's queue before the transfer started.
    public var queueDuration: Double
    public var nameLookup: Double
    public var connect: Double
    public var tlsHandshake: Double
    public var requestSent: Double
    public var firstByte: Double
    public var total: Double
    public var redirectDuration: Double
    public var redirectCount: Int
    /// "1.0", "1.1", "2", "3", or "" when no response came.
    public var httpVersion: String
    public var reusedConnection: Bool
    public var remoteAddress: String
    public var remotePort: Int
    public var localAddress: String
    public var localPort: Int
    public var requestHeaderBytes: Int64
    public var responseHeaderBytes: Int64
    public var bodyBytesSent: Int64
    /// Body bytes after decoding (what the sink received).
    public var bodyBytesReceived: Int64
    /// Attempts the task made, this one included (more than 1 after retries;
    /// see ``TransferTask/attemptMetrics`` for each one's metrics).
    public var attempts: Int = 1

    public init() {
        queueDuration = 0; nameLookup = -1; connect = -1; tlsHandshake = -1; requestSent = -1
        firstByte = -1; total = -1; redirectDuration = 0; redirectCount = 0; httpVersion = ""
        reusedConnection = false; remoteAddress = ""; remotePort = 0; localAddress = ""; localPort = 0
        requestHeaderBytes = 0; responseHeaderBytes = 0; bodyBytesSent = 0; bodyBytesReceived = 0
    }
}
