import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A SOCKS5 server of our own (RFC 1928) on 127.0.0.1 at a free port: the no-auth and the
/// user/password (RFC 1929) methods, `CONNECT` by IPv4 address or by domain name, loopback
/// targets only. It records whether each CONNECT named an address or a host name.
public final class TestSOCKS5Server: Sendable {
    /// One CONNECT request.
    public struct Record: Sendable, Equatable {
        public enum Destination: Sendable, Equatable {
            case ipv4(String)
            case name(String)
            case ipv6
        }
        public var destination: Destination
        public var port: UInt16
        /// The reply code sent (0 succeeded).
        public var reply: UInt8
    }

    public let port: UInt16
    private let listener: ProxyListener
    private let records = Locked<[Record]>([])
    private let authFailures = Locked(0)
    private let credentials: (user: String, password: String)?
    private let hosts: [String: String]

    /// - Parameters:
    ///   - credentials: Demand the user/password method with these (nil: no authentication).
    ///   - hosts: Names the server resolves (to loopback IPv4 addresses); `localhost` is
    ///     always 127.0.0.1. Other names get reply 4 (host unreachable).
    /// - Throws: `TestSupportError` when the socket cannot be set up.
    public init(credentials: (user: String, password: String)? = nil, hosts: [String: String] = [:]) throws {
        listener = try ProxyListener()
        port = listener.port
        self.credentials = credentials
        self.hosts = hosts.merging(["localhost": "127.0.0.1"]) { a, _ in a }
        listener.start { [self] fd in serve(fd) }
    }

    deinit { listener.stop() }

    @discardableResult
    public func stop() -> Bool { listener.stop() }

    /// The CONNECT requests received, oldest first.
    public var requests: [Record] { records.withLock { $0 } }

    /// User/password negotiations refused.
    public var refusedLogins: Int { authFailures.withLock { $0 } }

    private func serve(_ client: Int32) {
        // Greeting: VER NMETHODS METHODS...
        guard let greeting = ProxyListener.readExactly(client, 2), greeting[0] == 5,
            let methods = ProxyListener.readExactly(client, Int(greeting[1]))
        else { return }
        let wanted: UInt8 = credentials == nil ? 0x00 : 0x02
        guard methods.contains(wanted) else {
            _ = ProxyListener.sendAll(client, [5, 0xFF])
            return
        }
        guard ProxyListener.sendAll(client, [5, wanted]) else { return }
        if let credentials {
            // VER(1) ULEN UNAME PLEN PASSWD
            guard let version = ProxyListener.readExactly(client, 2), version[0] == 1,
                let user = ProxyListener.readExactly(client, Int(version[1])),
                let plen = ProxyListener.readExactly(client, 1),
                let password = ProxyListener.readExactly(client, Int(plen[0]))
            else { return }
            let ok = String(decoding: user, as: UTF8.self) == credentials.user
                && String(decoding: password, as: UTF8.self) == credentials.password
            // Counted before the reply: the client learns of the refusal
            // only from it, so a test that reads the count after its
            // request failed sees it (TSan's timing showed the race).
            if !ok { authFailures.withLock { $0 += 1 } }
            _ = ProxyListener.sendAll(client, [1, ok ? 0 : 1])
            guard ok else { return }
        }
        // Request: VER CMD RSV ATYP DST.ADDR DST.PORT
        guard let request = ProxyListener.readExactly(client, 4), request[0] == 5 else { return }
        let destination: Record.Destination
        switch request[3] {
        case 1:
            guard let raw = ProxyListener.readExactly(client, 4) else { return }
            destination = .ipv4(raw.map(String.init).joined(separator: "."))
        case 3:
            guard let length = ProxyListener.readExactly(client, 1),
                let name = ProxyListener.readExactly(client, Int(length[0]))
            else { return }
            destination = .name(String(decoding: name, as: UTF8.self))
        case 4:
            guard ProxyListener.readExactly(client, 16) != nil else { return }
            destination = .ipv6
        default:
            return
        }
        guard let portBytes = ProxyListener.readExactly(client, 2) else { return }
        let port = UInt16(portBytes[0]) << 8 | UInt16(portBytes[1])
        var address: String?
        switch destination {
        case .ipv4(let text): address = text.hasPrefix("127.") ? text : nil
        case .name(let name): address = hosts[name.lowercased()]
        case .ipv6: address = nil
        }
        var reply: UInt8 = request[1] == 1 ? 4 : 7  // host unreachable / command not supported
        var upstream: Int32?
        if request[1] == 1, let address {
            upstream = listener.connectLoopback(ipv4: address, port: port)
            reply = upstream == nil ? 5 : 0  // connection refused / succeeded
        }
        records.withLock { $0.append(Record(destination: destination, port: port, reply: reply)) }
        guard ProxyListener.sendAll(client, [5, reply, 0, 1, 0, 0, 0, 0, 0, 0]), let upstream else {
            if let upstream { listener.release(upstream) }
            return
        }
        defer { listener.release(upstream) }
        ProxyListener.relay(client, upstream)
    }
}
