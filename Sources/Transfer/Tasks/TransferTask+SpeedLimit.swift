import FoundationEssentials
import Glibc

/// A bandwidth limit in bytes per second for each direction (0: unlimited).
struct SpeedLimit: Sendable, Hashable {
    var receive: Int64
    var send: Int64
}

extension TransferTask {
    /// Limits this task's bandwidth, now and for the rest of its life; safe
    /// from any thread, before or while the task runs.
    ///
    /// The session's shared limit (``SessionManager/setTotalSpeedLimit(receive:send:)``)
    /// still applies: the lower of the two wins.
    ///
    /// - Parameters:
    ///   - receive: Bytes per second downloaded at most; 0 removes the limit.
    ///   - send: Bytes per second uploaded at most; 0 removes the limit.
    public func setSpeedLimit(receive: Int64, send: Int64 = 0) {
        let limit = SpeedLimit(receive: max(0, receive), send: max(0, send))
        let id: UInt64? = core.withLock { core in
            core.speedLimit = limit
            return core.life.engineID
        }
        if let id { session.transfers.setSpeedLimit(id, receive: limit.receive, send: limit.send) }
    }
}

extension SessionManager {
    /// Limits the bandwidth of all this manager's transfers together, now
    /// and for later ones; safe from any thread while transfers run. The
    /// engine shares the budget among the running transfers; a task's own
    /// lower limit wins.
    ///
    /// - Parameters:
    ///   - receive: Bytes per second for all downloads together; 0: unlimited.
    ///   - send: Bytes per second for all uploads together; 0: unlimited.
    public func setTotalSpeedLimit(receive: Int64, send: Int64 = 0) {
        engine.setTotalSpeedLimit(receive: max(0, receive), send: max(0, send))
    }
}
