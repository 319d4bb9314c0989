import Foundation
import Transfer

/// `--metrics FILE|-`: one JSON object per finished transfer, one per line,
/// with the fields of docs/CLI.md in a fixed order.
final class MetricsWriter: Sendable {
    private let fd: Int32
    private let ownsFile: Bool
    private let lock = Locked(())

    /// Opens `path` for appending (several runs can share one file of JSON
    /// lines, as scripts/demo.sh does), or stdout for `-`.
    init(path: String) throws(Failure) {
        if path == "-" {
            fd = STDOUT_FILENO
            ownsFile = false
        } else {
            let opened = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
            guard opened >= 0 else {
                throw Failure(.localFile, "cannot open --metrics \(path): \(String(cString: strerror(errno)))")
            }
            fd = opened
            ownsFile = true
        }
    }

    deinit {
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

    func write(_ record: Record) {
        let line = Self.encode(record) + "\n"
        lock.withLock { _ in
            if fd == STDOUT_FILENO {
                Terminal.writeStdout(Array(line.utf8))
            } else {
                _ = Terminal.writeAll(fd, Array(line.utf8))
            }
        }
    }

    static func encode(_ record: Record) -> String {
        let m = record.metrics ?? TaskMetrics()
        func seconds(_ value: Double) -> String {
            // A phase that did not happen or is unknown is reported as 0 / null.
            value < 0 ? "null" : String(format: "%.6f", value)
        }
        var fields: [(String, String)] = [
            ("url", string(record.url)),
            ("status", record.status.map(String.init) ?? "null"),
            ("http_version", m.httpVersion.isEmpty ? "null" : string(m.httpVersion)),
            ("bytes_received", String(record.bytesReceived)),
            ("bytes_sent", String(record.bytesSent)),
            ("name_lookup", seconds(m.nameLookup)),
            ("connect", seconds(m.connect)),
            ("tls", seconds(m.tlsHandshake)),
            ("request_sent", seconds(m.requestSent)),
            ("first_byte", seconds(m.firstByte)),
            ("total", seconds(m.total)),
            ("redirect", seconds(m.redirectDuration)),
            ("redirects", String(m.redirectCount)),
            ("reused_connection", m.reusedConnection ? "true" : "false"),
            ("remote_address", m.remoteAddress.isEmpty ? "null" : string(m.remoteAddress)),
        ]
        // error_code is the exit-code class of docs/CLI.md (0 on success).
        if let failure = record.failure {
            fields.append(("error_code", String(failure.status.rawValue)))
            fields.append(("error_message", string(failure.status.className + ": " + failure.detail)))
        } else {
            fields.append(("error_code", "0"))
            fields.append(("error_message", "null"))
        }
        return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }

    /// A JSON string literal.
    static func string(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    out += String(format: "\\u%04x", scalar.value)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}
