import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// An HTTP proxy of our own on 127.0.0.1 at a free port, for the proxy tests: `CONNECT`
/// tunnels and absolute-form forwarding of plain http requests, optional Basic proxy
/// authentication, and a refusal mode. It records what it saw.
///
/// - `CONNECT host:port`: answers `200 Connection established` and relays bytes. Only
///   loopback targets are reached: `127.0.0.1`, `localhost` and names in `hosts`; any
///   other gets 502. With `refuseConnect` every CONNECT gets 403.
/// - `GET http://host:port/path`: sent upstream in origin form without the `Proxy-*`
///   headers and with `Connection: close`; the response is relayed, then the proxy closes.
/// - With `credentials` set, a request without `Proxy-Authorization: Basic <user:password>`
///   (or with other credentials) gets one `407` with `Proxy-Authenticate: Basic
///   realm="TestHTTPProxy"` and the connection is closed.
///
/// The proxy stops on `stop()` or when the last reference goes away.
public final class TestHTTPProxy: Sendable {
    /// One request the proxy received.
    public struct Record: Sendable, Equatable {
        public var method: String
        /// The request target: `host:port` for CONNECT, an absolute URL otherwise.
        public var target: String
        /// The request line as received.
        public var requestLine: String
        /// Whether a `Proxy-Authorization` header came with it.
        public var hadProxyAuthorization: Bool
        /// The status the proxy answered itself (407, 403, 502), or 0 when it passed the
        /// request on.
        public var refusedWith: Int
    }

    public let port: UInt16
    private let listener: ProxyListener
    private let records = Locked<[Record]>([])
    private let expectedAuthorization: String?
    private let refuseConnect: Bool
    private let hosts: [String: String]

    /// Starts the proxy.
    ///
    /// - Parameters:
    ///   - credentials: The user and password the proxy demands (nil: none).
    ///   - refuseConnect: Answer every CONNECT with 403.
    ///   - hosts: Extra names mapped to loopback IPv4 addresses.
    /// - Throws: `TestSupportError` when the socket cannot be set up.
    public init(credentials: (user: String, password: String)? = nil, refuseConnect: Bool = false,
                hosts: [String: String] = [:]) throws
    {
        listener = try ProxyListener()
        port = listener.port
        expectedAuthorization = credentials.map {
            "Basic " + Data("\($0.user):\($0.password)".utf8).base64EncodedString()
        }
        self.refuseConnect = refuseConnect
        self.hosts = hosts.merging(["localhost": "127.0.0.1", "127.0.0.1": "127.0.0.1"]) { a, _ in a }
        listener.start { [self] fd in serve(fd) }
    }

    deinit { listener.stop() }

    /// Stops accepting and closes every connection (waits at most 5 s for the threads).
    @discardableResult
    public func stop() -> Bool { listener.stop() }

    /// What the proxy received, oldest first.
    public var requests: [Record] { records.withLock { $0 } }

    /// `http://127.0.0.1:<port>`.
    public var url: String { "http://127.0.0.1:\(port)" }

    // MARK: Serving

    private func serve(_ client: Int32) {
        guard let (head, leftover) = Self.readHead(client) else { return }
        var lines = head.components(separatedBy: "\r\n")
        let requestLine = lines.removeFirst()
        let parts = requestLine.split(separator: " ")
        guard parts.count == 3 else {
            _ = ProxyListener.sendAll(client, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        }
        let method = String(parts[0])
        let target = String(parts[1])
        var headers: [(String, String)] = []
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        let authorization = headers.first { $0.0.lowercased() == "proxy-authorization" }?.1
        var record = Record(method: method, target: target, requestLine: requestLine,
                            hadProxyAuthorization: authorization != nil, refusedWith: 0)
        func refuse(_ status: Int, _ reason: String, _ extra: String = "") {
            record.refusedWith = status
            records.withLock { $0.append(record) }
            let body = "\(status) \(reason)\n"
            _ = ProxyListener.sendAll(
                client, "HTTP/1.1 \(status) \(reason)\r\n\(extra)Content-Type: text/plain\r\n"
                    + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)")
        }

        if let expectedAuthorization, authorization != expectedAuthorization {
            refuse(407, "Proxy Authentication Required", "Proxy-Authenticate: Basic realm=\"TestHTTPProxy\"\r\n")
            return
        }
        if method == "CONNECT" {
            if refuseConnect { return refuse(403, "Forbidden") }
            guard let (address, port) = resolve(authority: target), let upstream = listener.connectLoopback(ipv4: address, port: port)
            else { return refuse(502, "Bad Gateway") }
            defer { listener.release(upstream) }
            records.withLock { $0.append(record) }
            guard ProxyListener.sendAll(client, "HTTP/1.1 200 Connection established\r\n\r\n"),
                leftover.isEmpty || ProxyListener.sendAll(upstream, leftover)
            else { return }
            ProxyListener.relay(client, upstream)
            return
        }
        // Absolute form: http://authority/path
        guard target.lowercased().hasPrefix("http://") else { return refuse(400, "Bad Request") }
        let afterScheme = target.dropFirst("http://".count)
        let slash = afterScheme.firstIndex(of: "/") ?? afterScheme.endIndex
        let authority = String(afterScheme[..<slash])
        let path = slash == afterScheme.endIndex ? "/" : String(afterScheme[slash...])
        guard let (address, port) = resolve(authority: authority.contains(":") ? authority : authority + ":80"),
            let upstream = listener.connectLoopback(ipv4: address, port: port)
        else { return refuse(502, "Bad Gateway") }
        defer { listener.release(upstream) }
        records.withLock { $0.append(record) }
        var forwarded = "\(method) \(path) \(parts[2])\r\n"
        for (name, value) in headers {
            let lower = name.lowercased()
            if lower.hasPrefix("proxy-") || lower == "connection" { continue }
            forwarded += "\(name): \(value)\r\n"
        }
        forwarded += "Connection: close\r\n\r\n"
        guard ProxyListener.sendAll(upstream, forwarded), leftover.isEmpty || ProxyListener.sendAll(upstream, leftover)
        else { return }
        ProxyListener.relay(client, upstream)
    }

    /// `host:port` to a loopback IPv4 address and a port, or nil.
    private func resolve(authority: String) -> (String, UInt16)? {
        var host = authority
        var portText = ""
        if let colon = authority.lastIndex(of: ":") {
            host = String(authority[..<colon])
            portText = String(authority[authority.index(after: colon)...])
        }
        guard let port = UInt16(portText), let address = hosts[host.lowercased()] else { return nil }
        return (address, port)
    }

    /// The request head (without the final CRLFCRLF) and the bytes read past it.
    static func readHead(_ fd: Int32) -> (String, [UInt8])? {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        let terminator: [UInt8] = [13, 10, 13, 10]
        while bytes.count < 64 * 1024 {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return nil }
            bytes += chunk[0..<n]
            if let end = find(terminator, in: bytes) {
                guard let head = String(validating: bytes[0..<end], as: UTF8.self) else { return nil }
                return (head, Array(bytes[(end + 4)...]))
            }
        }
        return nil
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for i in 0...(haystack.count - needle.count) where haystack[i] == needle[0] {
            if Array(haystack[i..<(i + needle.count)]) == needle { return i }
        }
        return nil
    }
}
