import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// An HTTP proxy that misbehaves in one chosen way, on 127.0.0.1 at a free port, for the
/// proxy fault tests. Each accepted connection's request head is recorded (``requests``:
/// the request lines), then:
///
/// - ``Fault/dieDuringConnect``: sends the first half of `HTTP/1.1 200 Connection
///   established` and resets the connection (RST, not FIN).
/// - ``Fault/dieInTunnel(afterBytes:)``: answers 200 to CONNECT, relays to the loopback
///   target, and after `afterBytes` bytes have gone from the target to the client waits for
///   ``openGate()`` (at most 10 s), then resets both connections. (A reset throws away what
///   the client has not read yet; the gate lets the test say when it has read some body.)
/// - ``Fault/alwaysDemandsAuthentication``: answers every request, with or without
///   `Proxy-Authorization`, with 407 and `Proxy-Authenticate: Basic`, keeping the
///   connection open for the next attempt (a loop, if the client let it be one).
/// - ``Fault/garbageAfterConnect``: answers 200 to CONNECT, then sends 4 KiB of bytes
///   that are neither TLS nor HTTP and waits for the client to hang up.
public final class FaultyHTTPProxy: Sendable {
    public enum Fault: Sendable {
        case dieDuringConnect
        case dieInTunnel(afterBytes: Int)
        case alwaysDemandsAuthentication
        case garbageAfterConnect
    }

    public let port: UInt16
    private let listener: ProxyListener
    private let fault: Fault
    private let records = Locked<[String]>([])
    private let resets = Locked(0)
    private let gate = DispatchSemaphore(value: 0)

    /// Starts the proxy.
    ///
    /// - Throws: `TestSupportError` when the socket cannot be set up.
    public init(_ fault: Fault) throws {
        listener = try ProxyListener()
        port = listener.port
        self.fault = fault
        listener.start { [self] fd in serve(fd) }
    }

    deinit { listener.stop() }

    /// Stops accepting and closes every connection (waits at most 5 s for the threads).
    @discardableResult
    public func stop() -> Bool { listener.stop() }

    /// Every request line received, oldest first (one per attempt, also on one connection).
    public var requests: [String] { records.withLock { $0 } }

    /// Lets one waiting ``Fault/dieInTunnel(afterBytes:)`` connection reset.
    public func openGate() { gate.signal() }

    /// How many connections the proxy reset on purpose.
    public var resetCount: Int { resets.withLock { $0 } }

    private func serve(_ client: Int32) {
        var leftover: [UInt8] = []
        while true {
            guard let (head, rest) = Self.readHead(client, buffered: leftover) else { return }
            leftover = rest
            let requestLine = head.components(separatedBy: "\r\n").first ?? ""
            records.withLock { $0.append(requestLine) }
            let parts = requestLine.split(separator: " ")
            let target = parts.count == 3 ? String(parts[1]) : ""
            switch fault {
            case .alwaysDemandsAuthentication:
                let body = "407 Proxy Authentication Required\n"
                guard ProxyListener.sendAll(
                    client, "HTTP/1.1 407 Proxy Authentication Required\r\n"
                        + "Proxy-Authenticate: Basic realm=\"FaultyHTTPProxy\"\r\n"
                        + "Content-Type: text/plain\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
                else { return }
                continue  // the same connection may carry the next attempt
            case .dieDuringConnect:
                _ = ProxyListener.sendAll(client, "HTTP/1.1 200 Conn")
                resetOnClose(client)
                resets.withLock { $0 += 1 }
                return
            case .garbageAfterConnect:
                guard ProxyListener.sendAll(client, "HTTP/1.1 200 Connection established\r\n\r\n") else { return }
                var garbage = [UInt8](repeating: 0, count: 4096)
                for i in garbage.indices { garbage[i] = UInt8(truncatingIfNeeded: i &* 131 &+ 7) | 0x80 }
                guard ProxyListener.sendAll(client, garbage) else { return }
                Self.drainUntilClosed(client)
                return
            case .dieInTunnel(let limit):
                guard let (address, port) = Self.loopback(target),
                    let upstream = listener.connectLoopback(ipv4: address, port: port)
                else {
                    _ = ProxyListener.sendAll(client, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                    return
                }
                defer { listener.release(upstream) }
                guard ProxyListener.sendAll(client, "HTTP/1.1 200 Connection established\r\n\r\n"),
                    leftover.isEmpty || ProxyListener.sendAll(upstream, leftover)
                else { return }
                if relay(client, upstream, downstreamLimit: limit) {
                    _ = gate.wait(timeout: .now() + 10)
                    resetOnClose(client)
                    resetOnClose(upstream)
                    resets.withLock { $0 += 1 }
                }
                return
            }
        }
    }

    /// Makes the next close(2) of `fd` send RST (SO_LINGER with a zero timeout).
    private func resetOnClose(_ fd: Int32) {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
    }

    /// Relays both ways; returns true when `downstreamLimit` bytes went upstream → client
    /// (the rest of the last read is dropped), false when a side ended first.
    private func relay(_ client: Int32, _ upstream: Int32, downstreamLimit: Int) -> Bool {
        var fds = [pollfd(fd: client, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: upstream, events: Int16(POLLIN), revents: 0)]
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var downstream = 0
        while true {
            let ready = poll(&fds, 2, -1)
            if ready < 0 {
                if errno == EINTR { continue }
                return false
            }
            for i in 0..<2 where fds[i].revents != 0 {
                let n = buffer.withUnsafeMutableBytes { recv(fds[i].fd, $0.baseAddress, $0.count, 0) }
                if n <= 0 { return false }
                var count = n
                if i == 1 { count = min(n, downstreamLimit - downstream) }
                let sent = buffer.withUnsafeBytes {
                    ProxyListener.sendAll(fds[1 - i].fd, UnsafeRawBufferPointer(rebasing: $0[0..<count]))
                }
                guard sent else { return false }
                if i == 1 {
                    downstream += count
                    if downstream >= downstreamLimit { return true }
                }
            }
        }
    }

    private static func drainUntilClosed(_ fd: Int32) {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
        }
    }

    /// `127.0.0.1:port` or `localhost:port` to an address and a port; nil for other hosts.
    private static func loopback(_ authority: String) -> (String, UInt16)? {
        guard let colon = authority.lastIndex(of: ":"),
            let port = UInt16(authority[authority.index(after: colon)...])
        else { return nil }
        let host = authority[..<colon].lowercased()
        guard host == "127.0.0.1" || host == "localhost" else { return nil }
        return ("127.0.0.1", port)
    }

    /// The next request head (without CRLFCRLF) and the bytes read past it; a request body
    /// announced by Content-Length is skipped.
    static func readHead(_ fd: Int32, buffered: [UInt8]) -> (String, [UInt8])? {
        var bytes = buffered
        var chunk = [UInt8](repeating: 0, count: 4096)
        let terminator: [UInt8] = [13, 10, 13, 10]
        while bytes.count < 64 * 1024 {
            if let end = find(terminator, in: bytes) {
                guard let head = String(validating: bytes[0..<end], as: UTF8.self) else { return nil }
                return (head, Array(bytes[(end + 4)...]))
            }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return nil }
            bytes += chunk[0..<n]
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
