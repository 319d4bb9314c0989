import FoundationEssentials

/// A progress snapshot: a Sendable value, copied out of the engine.
public struct TransferProgress: Sendable, Hashable, CustomStringConvertible {
    /// Bytes done (for downloads, including a resumed offset).
    public var completedUnitCount: Int64
    /// Bytes expected, or -1 while unknown.
    public var totalUnitCount: Int64
    /// Seconds since the task started sending.
    public var elapsed: TimeInterval
    /// Bytes that were already on disk when a resumed download started.
    public var resumeOffset: Int64

    /// A progress value; a total of -1 means unknown.
    public init(completedUnitCount: Int64, totalUnitCount: Int64, elapsed: TimeInterval = 0, resumeOffset: Int64 = 0) {
        self.completedUnitCount = completedUnitCount
        self.totalUnitCount = totalUnitCount
        self.elapsed = elapsed
        self.resumeOffset = resumeOffset
    }

    /// 0...1, or nil while the total is unknown.
    public var fractionCompleted: Double? {
        guard totalUnitCount > 0 else { return nil }
        return min(1, Double(completedUnitCount) / Double(totalUnitCount))
    }

    /// Whether every expected byte was counted (false while the total is unknown).
    public var isFinished: Bool { totalUnitCount >= 0 && completedUnitCount >= totalUnitCount }

    /// Average rate of this attempt in bytes per second (0 before any time passed).
    public var bytesPerSecond: Double {
        elapsed > 0 ? Double(completedUnitCount - resumeOffset) / elapsed : 0
    }

    /// Seconds left at the average rate, nil when unknown.
    public var estimatedTimeRemaining: TimeInterval? {
        guard totalUnitCount > 0, bytesPerSecond > 0 else { return nil }
        return Double(totalUnitCount - completedUnitCount) / bytesPerSecond
    }

    public var description: String {
        if let fraction = fractionCompleted {
            return "\(completedUnitCount)/\(totalUnitCount) (\(Int(fraction * 100))%)"
        }
        return "\(completedUnitCount)/?"
    }
}
