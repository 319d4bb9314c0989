import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// How a connection ends early.
enum ConnectionEnd: Error {
    /// Close now (client gone, socket error, or a deliberate abrupt close).
    case close
    /// Stop sending, drain what the client still sends (bounded), then close: the client
    /// gets to read the whole response even if it was still uploading.
    case linger
}

/// A parsed request head.
struct RequestHead {
    var method: String
    var target: String
    var path: String
    var query: [(name: String, value: String)]
    var version: String
    var headers: [(name: String, value: String)]

    func header(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    func query(_ name: String) -> String? {
        query.first { $0.name == name }?.value
    }

    var keepAlive: Bool {
        // ?close=1 on any route: answer with Connection: close and close afterwards.
        if query("close") == "1" { return false }
        let connection = header("connection")?.lowercased() ?? ""
        if version == "HTTP/1.0" {
            return connection.contains("keep-alive")
        }
        return !connection.contains("close")
    }
}

/// One accepted socket, served on its own thread. Not shared between threads.
final class Connection {
    static let maxHead = 64 * 1024
    static let maxLine = 8 * 1024
    static let readSize = 64 * 1024

    let fd: Int32
    let core: ServerCore
    let clientPort: UInt16
    /// Received and not yet consumed bytes: `input[inputStart...]`.
    var input: [UInt8] = []
    /// Where each read lands before it joins `input`.
    private var scratch = [UInt8](repeating: 0, count: Connection.readSize)
    var inputStart = 0

    init(fd: Int32, core: ServerCore) {
        self.fd = fd
        self.core = core
        clientPort = ServerCore.peerPort(of: fd)
    }

    func run() {
        do {
            while try serveOne() {}
        } catch ConnectionEnd.linger {
            lingeringClose()
        } catch {
            // ConnectionEnd.close or anything unexpected: the caller closes the socket.
        }
    }

    /// Serves one request; returns false when the connection should close quietly.
    private func serveOne() throws -> Bool {
        guard let head = try readHead() else { return false }
        core.record(
            RecordedRequest(
                method: head.method, target: head.target, path: head.path, headers: head.headers,
                clientPort: clientPort))
        return try route(head)
    }

    // MARK: Reading

    var buffered: Int { input.count - inputStart }

    /// Reads more bytes into `input`; returns false at end of stream.
    func fill() throws -> Bool {
        if inputStart > 0 && inputStart == input.count {
            input.removeAll(keepingCapacity: true)
            inputStart = 0
        } else if inputStart > 256 * 1024 {
            input.removeFirst(inputStart)
            inputStart = 0
        }
        // Into a buffer kept for the connection, then one copy. (Growing
        // `input` by a repeated zero element went element by element through
        // the generic iterator: 64 Ki steps per read, about a second per
        // request under ThreadSanitizer, which made batch tests crawl.)
        let n = scratch.withUnsafeMutableBytes { raw -> Int in
            while true {
                let r = recv(fd, raw.baseAddress!, raw.count, 0)
                if r < 0 && errno == EINTR { continue }
                return r
            }
        }
        if n < 0 { throw ConnectionEnd.close }
        if n > 0 { scratch.withUnsafeBufferPointer { input.append(contentsOf: $0[0..<n]) } }
        return n > 0
    }

    /// Reads a request head; nil when the client closed between requests.
    func readHead() throws -> RequestHead? {
        // Bytes after inputStart already searched; relative, because fill() may compact input.
        var checked = 0
        while true {
            if let end = findCRLFCRLF(from: inputStart + checked) {
                if end - inputStart > Connection.maxHead {
                    try respondAndClose(status: 431, body: "request head too large\n")
                }
                let bytes = Array(input[inputStart..<end])
                inputStart = end + 4
                guard let head = parseHead(bytes) else {
                    try respondAndClose(status: 400, body: "malformed request head\n")
                }
                return head
            }
            checked = max(0, buffered - 3)
            if buffered > Connection.maxHead {
                try respondAndClose(status: 431, body: "request head too large\n")
            }
            if try !fill() {
                if buffered == 0 { return nil }
                throw ConnectionEnd.close
            }
        }
    }

    private func findCRLFCRLF(from start: Int) -> Int? {
        var i = max(start, inputStart)
        while i + 3 < input.count {
            if input[i] == 13 && input[i + 1] == 10 && input[i + 2] == 13 && input[i + 3] == 10 {
                return i
            }
            i += 1
        }
        return nil
    }

    private func parseHead(_ bytes: [UInt8]) -> RequestHead? {
        guard let text = String(validating: bytes, as: UTF8.self) else { return nil }
        var lines = text.components(separatedBy: "\r\n")
        // Tolerate empty lines before the request line (RFC 9112 2.2).
        while let first = lines.first, first.isEmpty { lines.removeFirst() }
        guard !lines.isEmpty else { return nil }
        let parts = lines.removeFirst().split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[2].hasPrefix("HTTP/1."), parts[1].hasPrefix("/") || parts[1] == "*"
        else { return nil }
        var headers: [(name: String, value: String)] = []
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { return nil }
            let name = String(line[..<colon])
            guard !name.isEmpty, !name.contains(" ") else { return nil }
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers.append((name, value))
        }
        let target = String(parts[1])
        let path: String
        var query: [(name: String, value: String)] = []
        if let mark = target.firstIndex(of: "?") {
            path = String(target[..<mark])
            for pair in target[target.index(after: mark)...].split(separator: "&") {
                let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let name = String(kv[0]).removingPercentEncoding ?? String(kv[0])
                let raw = kv.count > 1 ? String(kv[1]) : ""
                query.append((name, raw.removingPercentEncoding ?? raw))
            }
        } else {
            path = target
        }
        return RequestHead(
            method: String(parts[0]), target: target, path: path, query: query, version: String(parts[2]),
            headers: headers)
    }

    /// Reads the request body (Content-Length or chunked) and hands it to `sink` in pieces.
    func readBody(_ head: RequestHead, into sink: (UnsafeRawBufferPointer) -> Void) throws {
        if let encoding = head.header("transfer-encoding") {
            guard encoding.lowercased().hasSuffix("chunked") else {
                try respondAndClose(status: 501, body: "unsupported transfer-encoding\n")
            }
            try readChunkedBody(into: sink)
            return
        }
        guard let lengthText = head.header("content-length") else { return }
        guard let length = Int(lengthText), length >= 0 else {
            try respondAndClose(status: 400, body: "bad content-length\n")
        }
        try readExactly(length, into: sink)
    }

    private func readExactly(_ count: Int, into sink: (UnsafeRawBufferPointer) -> Void) throws {
        var remaining = count
        while remaining > 0 {
            if buffered == 0 {
                guard try fill() else { throw ConnectionEnd.close }
            }
            let n = min(remaining, buffered)
            input.withUnsafeBytes { raw in
                sink(UnsafeRawBufferPointer(rebasing: raw[inputStart..<(inputStart + n)]))
            }
            inputStart += n
            remaining -= n
        }
    }

    /// One CRLF-terminated line, bounded by `maxLine`.
    private func readLine() throws -> String {
        var checked = 0
        while true {
            var i = inputStart + checked
            while i + 1 < input.count {
                if input[i] == 13 && input[i + 1] == 10 {
                    let line = String(decoding: input[inputStart..<i], as: UTF8.self)
                    inputStart = i + 2
                    return line
                }
                i += 1
            }
            checked = max(0, buffered - 1)
            if buffered > Connection.maxLine {
                try respondAndClose(status: 400, body: "line too long\n")
            }
            guard try fill() else { throw ConnectionEnd.close }
        }
    }

    private func readChunkedBody(into sink: (UnsafeRawBufferPointer) -> Void) throws {
        while true {
            let line = try readLine()
            let sizeText = line.split(separator: ";", maxSplits: 1).first.map(String.init) ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16), size >= 0 else {
                try respondAndClose(status: 400, body: "bad chunk size\n")
            }
            if size == 0 {
                // Trailer fields, then the empty line.
                while try !readLine().isEmpty {}
                return
            }
            try readExactly(size, into: sink)
            guard try readLine().isEmpty else {
                try respondAndClose(status: 400, body: "chunk not followed by CRLF\n")
            }
        }
    }

    // MARK: Writing

    func sendAll(_ raw: UnsafeRawBufferPointer) throws {
        guard var pointer = raw.baseAddress else { return }
        var remaining = raw.count
        while remaining > 0 {
            let n = send(fd, pointer, remaining, Int32(MSG_NOSIGNAL))
            if n < 0 {
                if errno == EINTR { continue }
                throw ConnectionEnd.close
            }
            pointer += n
            remaining -= n
        }
    }

    func sendAll(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try sendAll($0) }
    }

    func sendAll(_ data: Data) throws {
        try data.withUnsafeBytes { try sendAll($0) }
    }

    func sendAll(_ text: String) throws {
        try sendAll(Array(text.utf8))
    }

    /// Sends a status line and header fields (plus the blank line).
    func sendHead(status: Int, reason: String? = nil, headers: [(String, String)]) throws {
        var text = "HTTP/1.1 \(status) \(reason ?? Connection.reason(status))\r\n"
        for (name, value) in headers {
            text += "\(name): \(value)\r\n"
        }
        text += "\r\n"
        try sendAll(text)
    }

    /// Sends a complete small response and closes (used for protocol errors).
    func respondAndClose(status: Int, body: String) throws -> Never {
        try? sendHead(
            status: status,
            headers: [
                ("Content-Type", "text/plain"), ("Content-Length", "\(body.utf8.count)"), ("Connection", "close"),
            ])
        try? sendAll(body)
        throw ConnectionEnd.linger
    }

    /// Waits `milliseconds` unless the peer hangs up (or the server stops) first.
    ///
    /// - Returns: true when the peer is gone.
    func waitForHangup(milliseconds: Int32) -> Bool {
        // POLLRDHUP (0x2000): the peer closed its writing side. Data arriving does not wake us.
        var descriptor = pollfd(fd: fd, events: Int16(0x2000), revents: 0)
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: .milliseconds(Int(milliseconds)))
        while true {
            let left = clock.now.duration(to: deadline)
            if left <= .zero { return false }
            let ms = Int32(max(1, left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000))
            let r = poll(&descriptor, 1, ms)
            if r < 0 {
                if errno == EINTR { continue }
                return true
            }
            if r > 0 { return true }
        }
    }

    /// Blocks until the test opens gate `name`, counted in `held` while waiting.
    ///
    /// - Returns: true when the gate opened; false when the peer hung up or the server stops.
    func waitForGate(_ name: String) -> Bool {
        core.state.withLock { $0.held[name, default: 0] += 1 }
        defer { core.state.withLock { $0.held[name, default: 1] -= 1 } }
        while true {
            let (open, stopping) = core.state.withLock { ($0.openGates.contains(name), $0.stopping) }
            if open { return true }
            if stopping { return false }
            // The poll timeout only bounds how late the gate is noticed; the peer hanging up
            // wakes it at once.
            if waitForHangup(milliseconds: 5) { return false }
        }
    }

    /// Blocks until the peer closes or the server stops, discarding whatever arrives.
    func waitForHangup() {
        while true {
            inputStart = input.count
            guard (try? fill()) == true else { return }
            if core.isStopping { return }
        }
    }

    /// Half-closes, drains the client's remaining bytes for a bounded time, then returns so
    /// that the caller closes. Without the drain, unread input turns close() into a RST that
    /// can destroy the response before the client reads it.
    func lingeringClose() {
        shutdown(fd, Int32(SHUT_WR))
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var drained = 0
        var scratch = [UInt8](repeating: 0, count: 64 * 1024)
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: .seconds(5))
        while drained < 256 << 20 && clock.now < deadline {
            let n = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            drained += n
        }
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 200: "OK"
        case 201: "Created"
        case 204: "No Content"
        case 206: "Partial Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 303: "See Other"
        case 304: "Not Modified"
        case 307: "Temporary Redirect"
        case 308: "Permanent Redirect"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 413: "Content Too Large"
        case 416: "Range Not Satisfiable"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        default: "Status \(status)"
        }
    }
}
