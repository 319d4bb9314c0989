import FoundationEssentials

/// How a download to a fixed destination behaves beyond the defaults.
///
/// ```swift
/// var options = DownloadOptions()
/// options.resumable = true                       // survives kill -9 and restarts
/// options.expectedSHA256 = "9f86d081884c7d65…"   // checked while the bytes stream
/// let task = session.downloadTask(with: request, to: file, options: options)
/// ```
public struct DownloadOptions: Sendable, Hashable {
    /// Keep `<destination>.part` and a journal `<destination>.part.journal`
    /// so that a later task for the same URL and destination — in this
    /// process or another one — continues where this one stopped (`Range` +
    /// `If-Range`). A failed or cancelled resumable task keeps both files;
    /// success removes the journal. A changed file on the server (another
    /// validator) or a server without ranges restarts from zero.
    public var resumable: Bool
    /// The expected SHA-256 of the whole body, in hex (64 digits). The engine
    /// hashes the bytes as they are written; on mismatch the task fails with
    /// ``TransferError/Code/checksumMismatch`` and nothing is placed at the
    /// destination. A resumed download instead hashes its whole part file
    /// once, when the body is complete, on the engine's file thread (never on
    /// the thread that drives the network).
    public var expectedSHA256: String?
    /// Receive limit in bytes per second (0: unlimited); change it later with
    /// ``TransferTask/setSpeedLimit(receive:send:)``.
    public var speedLimit: Int64
    /// How often the journal is brought up to date, in body bytes (0: 64 MiB)
    /// and in milliseconds (0: 1000), whichever comes first.
    public var journalIntervalBytes: Int64
    /// See ``journalIntervalBytes``.
    public var journalIntervalMilliseconds: Int64
    /// The largest file accepted, in bytes (curl's `--max-filesize`); 0: no
    /// limit. A larger announced length fails at once, a body that grows
    /// past it fails as it does, both with ``TransferError/Code/responseTooLarge``
    /// and nothing at the destination.
    public var maximumFileSize: Int64 = 0
    /// The fewest bytes a ``SegmentedDownload`` gives one connection (default
    /// 1 MiB; values below 1 count as 1). Below it the extra connections cost
    /// more round trips than they save, so a file shorter than
    /// `segments × minimumSegmentSize` is split into fewer ranges, and one
    /// shorter than `2 × minimumSegmentSize` is fetched over one connection.
    /// ``SegmentedDownload/segmentsUsed`` tells how many ran.
    public var minimumSegmentSize: Int64 = 1 << 20
    /// Whether the file is on disk before the task completes (the default):
    /// its pages are written back while it grows, and the file and its folder
    /// are synced (`fsync`) before it is placed. Set it to false for a file
    /// you read once and remove, a scratch copy: that spares the disk writes
    /// and the syncs, and a crash may then lose the file. A resumable download
    /// is always synced, since its journal must never claim bytes that are
    /// not on disk.
    public var synchronizesToDisk: Bool = true

    /// Download options; the defaults are a plain, non-resumable download.
    public init(resumable: Bool = false, expectedSHA256: String? = nil, speedLimit: Int64 = 0,
                journalIntervalBytes: Int64 = 0, journalIntervalMilliseconds: Int64 = 0)
    {
        self.resumable = resumable
        self.expectedSHA256 = expectedSHA256
        self.speedLimit = speedLimit
        self.journalIntervalBytes = journalIntervalBytes
        self.journalIntervalMilliseconds = journalIntervalMilliseconds
    }

    /// The 32 bytes of ``expectedSHA256``.
    ///
    /// - Throws: ``TransferError/Code/invalidRequest`` when it is not 64 hex digits.
    func expectedDigest() throws(TransferError) -> [UInt8]? {
        guard let hex = expectedSHA256 else { return nil }
        let digits = Array(hex.utf8)
        guard digits.count == 64 else {
            throw TransferError(.invalidRequest, "expectedSHA256 must be 64 hex digits, got \(digits.count)")
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        for index in stride(from: 0, to: 64, by: 2) {
            guard let high = Self.nibble(digits[index]), let low = Self.nibble(digits[index + 1]) else {
                throw TransferError(.invalidRequest, "expectedSHA256 is not hexadecimal: \(hex.debugDescription)")
            }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
