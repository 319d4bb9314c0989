import Dispatch
import FoundationEssentials
import Glibc
import Transfer

/// `-w/--write-out FORMAT`: curl's format, printed once per transfer as it
/// ends (after its body), with curl's variable names. The values are those
/// of the transfer's `--metrics` line (the same ``TaskMetrics``), formatted
/// as curl formats them: `http_code` with three digits, times in seconds
/// with six decimals, sizes and speeds as integers.
///
/// Besides `%{variable}`: `%header{name}` (a response header), `%{json}`
/// (every variable as one JSON object), `%{stdout}` / `%{stderr}` (where
/// the rest goes), `%%`, and the escapes `\n`, `\r`, `\t` and `\\`.
struct WriteOutFormat: Sendable {
    enum Piece: Sendable, Equatable {
        case text([UInt8])
        case variable(String)
        case header(String)
        case json
        case stream(Int32)
    }

    let pieces: [Piece]

    /// Variables a transfer has; `%{name}` of any other is a usage error.
    static let variables: Set<String> = [
        "content_type", "errormsg", "exitcode", "filename_effective", "http_code", "http_version", "local_ip",
        "local_port", "method", "num_connects", "num_headers", "num_redirects", "redirect_url", "referer",
        "remote_ip", "remote_port", "response_code", "scheme", "size_download", "size_header", "size_request",
        "size_upload", "speed_download", "speed_upload", "time_appconnect", "time_connect", "time_namelookup",
        "time_pretransfer", "time_redirect", "time_starttransfer", "time_total", "url", "url_effective", "urlnum",
        "curl_version",
    ]

    /// `FORMAT`, `@FILE` or `@-` (stdin), as curl reads `-w`.
    init(argument: String) throws(Failure) {
        var format = argument
        if argument.hasPrefix("@") {
            format = String(decoding: try CurlPlan.read(String(argument.dropFirst()), flag: "-w"), as: UTF8.self)
        }
        pieces = try Self.parse(format)
    }

    static func parse(_ format: String) throws(Failure) -> [Piece] {
        var pieces: [Piece] = []
        var text: [UInt8] = []
        let bytes = Array(format.utf8)
        func flush() {
            if !text.isEmpty { pieces.append(.text(text)) }
            text = []
        }
        /// The name in `{...}` starting at `start` (the brace), and the index after `}`.
        func braced(_ start: Int) -> (String, Int)? {
            guard start < bytes.count, bytes[start] == UInt8(ascii: "{"),
                let end = bytes[start...].firstIndex(of: UInt8(ascii: "}"))
            else { return nil }
            return (String(decoding: bytes[(start + 1)..<end], as: UTF8.self), end + 1)
        }
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                if index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "%") {
                    text.append(byte)
                    index += 2
                    continue
                }
                if let (name, next) = braced(index + 1) {
                    flush()
                    switch name {
                    case "stdout": pieces.append(.stream(STDOUT_FILENO))
                    case "stderr": pieces.append(.stream(STDERR_FILENO))
                    case "json": pieces.append(.json)
                    default:
                        guard variables.contains(name) else {
                            throw Failure(.usage, "-w: %{\(name)} is not a variable transfer has")
                        }
                        pieces.append(.variable(name))
                    }
                    index = next
                    continue
                }
                let headerWord = Array("header".utf8)
                if bytes.count > index + 1 + headerWord.count,
                    Array(bytes[(index + 1)..<(index + 1 + headerWord.count)]) == headerWord,
                    let (name, next) = braced(index + 1 + headerWord.count)
                {
                    flush()
                    pieces.append(.header(name))
                    index = next
                    continue
                }
            } else if byte == UInt8(ascii: "\\"), index + 1 < bytes.count {
                let escaped: UInt8?
                switch bytes[index + 1] {
                case UInt8(ascii: "n"): escaped = 0x0A
                case UInt8(ascii: "r"): escaped = 0x0D
                case UInt8(ascii: "t"): escaped = 0x09
                case UInt8(ascii: "\\"): escaped = 0x5C
                default: escaped = nil
                }
                if let escaped {
                    text.append(escaped)
                    index += 2
                    continue
                }
            }
            text.append(byte)
            index += 1
        }
        flush()
        return pieces
    }

    /// The bytes for one transfer, in order, each with the descriptor it goes to.
    func render(_ values: WriteOutValues) -> [(Int32, [UInt8])] {
        var out: [(Int32, [UInt8])] = []
        var fd = STDOUT_FILENO
        var buffer: [UInt8] = []
        for piece in pieces {
            switch piece {
            case .text(let bytes): buffer += bytes
            case .variable(let name): buffer += Array(values.text(name).utf8)
            case .header(let name): buffer += Array((values.response?.headers[name] ?? "").utf8)
            case .json: values.appendJSON(to: &buffer)
            case .stream(let next):
                if !buffer.isEmpty { out.append((fd, buffer)) }
                buffer = []
                fd = next
            }
        }
        if !buffer.isEmpty { out.append((fd, buffer)) }
        return out
    }
}

/// What `-w` knows of one finished transfer.
struct WriteOutValues {
    var index: Int
    var url: String
    var method: String
    var response: HTTPResponse?
    var metrics: TaskMetrics?
    var bytesReceived: Int64
    var bytesSent: Int64
    var failure: Failure?
    /// The file the body went to ("" for stdout and --discard).
    var filename: String
    var referer: String?

    private var m: TaskMetrics { metrics ?? TaskMetrics() }

    /// A phase time, 0 when it did not happen or is unknown (curl never prints anything else).
    private func seconds(_ value: Double) -> Double { value.isFinite && value > 0 ? value : 0 }

    private var times: [(String, Double)] {
        let connect = seconds(m.connect)
        let appconnect = seconds(m.tlsHandshake)
        let first = seconds(m.firstByte)
        // curl's pretransfer is when the request is about to go: after
        // connect (and TLS), before the first byte.
        var pretransfer = max(connect, appconnect)
        if m.requestSent > 0, first == 0 || m.requestSent <= first { pretransfer = max(pretransfer, m.requestSent) }
        return [("time_appconnect", appconnect), ("time_connect", connect),
                ("time_namelookup", seconds(m.nameLookup)), ("time_pretransfer", pretransfer),
                ("time_redirect", seconds(m.redirectDuration)), ("time_starttransfer", first),
                ("time_total", seconds(m.total))]
    }

    private var status: Int { response?.statusCode ?? 0 }

    /// curl's http_version: "1", "1.1", "2", "3"; "0" without a response.
    private var httpVersion: String {
        switch m.httpVersion {
        case "": return "0"
        case "1.0": return "1"
        default: return m.httpVersion
        }
    }

    private func speed(_ bytes: Int64) -> Int64 {
        let total = seconds(m.total)
        return total > 0 ? Int64((Double(bytes) / total).rounded(.down)) : 0
    }

    private var strings: [(String, String?)] {
        [("content_type", response?.headers["Content-Type"]),
         ("errormsg", failure.map { "\($0.status.className): \($0.detail)" }),
         ("filename_effective", filename.isEmpty ? nil : filename),
         ("http_version", httpVersion), ("local_ip", m.localAddress.isEmpty ? nil : m.localAddress),
         ("method", method), ("redirect_url", nil), ("referer", referer),
         ("remote_ip", m.remoteAddress.isEmpty ? nil : m.remoteAddress),
         ("scheme", (response?.url ?? URL(string: url))?.scheme?.uppercased()),
         ("url", url), ("url_effective", response?.url.absoluteString ?? url),
         ("curl_version", TransferVersion.libcurl)]
    }

    private var integers: [(String, Int64)] {
        [("exitcode", Int64(failure?.status.rawValue ?? 0)), ("http_code", Int64(status)),
         ("local_port", Int64(m.localPort)), ("num_connects", m.httpVersion.isEmpty || m.reusedConnection ? 0 : 1),
         ("num_headers", Int64(response?.headers.count ?? 0)), ("num_redirects", Int64(m.redirectCount)),
         ("remote_port", Int64(m.remotePort)), ("response_code", Int64(status)),
         ("size_download", bytesReceived), ("size_header", m.responseHeaderBytes),
         ("size_request", m.requestHeaderBytes), ("size_upload", bytesSent),
         ("speed_download", speed(bytesReceived)), ("speed_upload", speed(bytesSent)), ("urlnum", Int64(index))]
    }

    /// `%{name}` as curl prints it.
    func text(_ name: String) -> String {
        switch name {
        case "http_code", "response_code": return Describe.zeroPadded(status, width: 3)
        default: break
        }
        if let time = times.first(where: { $0.0 == name }) {
            var bytes: [UInt8] = []
            MetricsFormat.appendSeconds(time.1, to: &bytes)
            return String(decoding: bytes, as: UTF8.self)
        }
        if let integer = integers.first(where: { $0.0 == name }) { return String(integer.1) }
        if let string = strings.first(where: { $0.0 == name }) { return string.1 ?? "" }
        return ""
    }

    /// `%{json}`: every variable, keys sorted, curl_version last (as curl).
    func appendJSON(to out: inout [UInt8]) {
        var fields: [(String, (inout [UInt8]) -> Void)] = []
        for (name, value) in strings where name != "curl_version" {
            fields.append((name, { out in
                if let value {
                    MetricsFormat.appendString(value, to: &out)
                } else {
                    MetricsFormat.append("null", to: &out)
                }
            }))
        }
        for (name, value) in integers { fields.append((name, { MetricsFormat.appendInteger(value, to: &$0) })) }
        for (name, value) in times { fields.append((name, { MetricsFormat.appendSeconds(value, to: &$0) })) }
        fields.sort { $0.0 < $1.0 }
        fields.append(("curl_version", { MetricsFormat.appendString(TransferVersion.libcurl, to: &$0) }))
        out.append(UInt8(ascii: "{"))
        for (offset, field) in fields.enumerated() {
            if offset > 0 { out.append(UInt8(ascii: ",")) }
            MetricsFormat.appendString(field.0, to: &out)
            out.append(UInt8(ascii: ":"))
            field.1(&out)
        }
        out.append(UInt8(ascii: "}"))
    }
}
