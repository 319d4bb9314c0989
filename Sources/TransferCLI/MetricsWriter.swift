import Dispatch
import FoundationEssentials
import Glibc
import Transfer

/// `--metrics FILE|-`: one JSON object per finished transfer, one per line,
/// with the fields of docs/CLI.md in a fixed order.
///
/// Lines are formatted by ``MetricsFormat`` into one buffer and written in
/// batches: when the runner has taken in every completion so far (see
/// ``flush()``), when the buffer passes ``batchBytes``, and at the end of the
/// run, also on its failure and interruption paths. A reader therefore sees
/// each line as soon as the run has nothing else finished to report, in the
/// order the transfers finished, and no line is lost when the run fails.
final class MetricsWriter: Sendable {
    private let fd: Int32
    private let ownsFile: Bool
    /// Each line is written as it is added: the metrics share stdout with
    /// bodies or headers, whose order with the lines must stay as it happened.
    private let writeThrough: Bool
    /// Lines formatted and not yet written. Locked: transfers finish on
    /// several threads, and a second Ctrl-C flushes from the signal queue.
    private let pending = Protected<[UInt8]>([])

    /// A batch is written once it reaches this size (about 150 lines).
    static let batchBytes = 64 * 1024

    /// Opens `path` for appending (several runs can share one file of JSON
    /// lines, as scripts/demo.sh does), or stdout for `-`.
    ///
    /// - Parameter sharesStdout: whether the run writes anything else to
    ///   stdout (bodies, status lines, headers); with `-` each line is then
    ///   written at once, as before, so lines and other output never reorder.
    init(path: String, sharesStdout: Bool = false) throws(Failure) {
        if path == "-" {
            fd = STDOUT_FILENO
            ownsFile = false
            writeThrough = sharesStdout
        } else {
            let opened = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
            guard opened >= 0 else {
                throw Failure(.localFile, "cannot open --metrics \(path): \(String(cString: strerror(errno)))")
            }
            fd = opened
            ownsFile = true
            writeThrough = false
        }
        pending.withLock { $0.reserveCapacity(Self.batchBytes + 4096) }
    }

    deinit {
        flush()
        if ownsFile { close(fd) }
    }

    struct Record {
        var url: String
        var status: Int?
        var metrics: TaskMetrics?
        var bytesReceived: Int64
        var bytesSent: Int64
        var failure: Failure?
    }

    /// Formats `record` into the pending batch; writes the batch when it is
    /// full (or at once in write-through mode).
    func write(_ record: Record) {
        pending.withLock { buffer in
            MetricsFormat.appendLine(record, to: &buffer)
            if writeThrough || buffer.count >= Self.batchBytes { writeOut(&buffer) }
        }
    }

    /// Writes every pending line. Write errors are ignored, as they always
    /// were: metrics never change a run's outcome.
    func flush() {
        pending.withLock { buffer in
            if !buffer.isEmpty { writeOut(&buffer) }
        }
    }

    /// Caller holds `pending`'s lock: batches go out whole and in order.
    private func writeOut(_ buffer: inout [UInt8]) {
        if fd == STDOUT_FILENO {
            Terminal.writeStdout(buffer)
        } else {
            _ = Terminal.writeAll(fd, buffer)
        }
        buffer.removeAll(keepingCapacity: true)
    }

    /// The line of `record` without its newline (tests compare it).
    static func encode(_ record: Record) -> String {
        var bytes: [UInt8] = []
        MetricsFormat.appendLine(record, to: &bytes)
        return String(decoding: bytes.dropLast(), as: UTF8.self)
    }
}
