import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// An in-process HTTP/1.1 server on 127.0.0.1 with a random port, for integration tests.
///
/// Written on POSIX sockets, one thread per connection, keep-alive, pipelining tolerated.
/// Its routes (see `TestServer+Routes.swift` and the table in its header comment) produce
/// deterministic bodies and the faults a client must survive: stalls, truncation, resets,
/// garbage, redirect chains and loops. Client misbehaviour never crashes the test process:
/// every buffer is bounded and every socket error ends only that connection.
///
/// ```swift
/// let server = try TestServer.start()
/// defer { server.stop() }
/// let url = server.url("/bytes/1048576?seed=7")
/// ```
///
/// The server stops on `stop()` or when the last reference goes away.
public final class TestServer: Sendable {
    /// The port the server listens on (chosen by the kernel).
    public let port: UInt16
    private let core: ServerCore

    /// Binds 127.0.0.1 port 0 and starts accepting.
    ///
    /// - Throws: `TestSupportError` when the socket cannot be set up.
    public init() throws {
        core = try ServerCore()
        port = core.port
        core.startAccepting()
    }

    /// Starts a server (same as `init()`).
    public static func start() throws -> TestServer {
        try TestServer()
    }

    /// Starts a server (same as `init()`), for `try await TestServer.start()` call sites.
    public static func start() async throws -> TestServer {
        try TestServer()
    }

    deinit {
        core.stop()
    }

    /// `http://127.0.0.1:<port>`.
    public var baseURL: URL {
        URL(string: "http://127.0.0.1:\(port)")!
    }

    /// The URL of `path` on this server; `path` starts with `/` and may carry a query.
    ///
    /// Characters not allowed in a URL are percent-encoded.
    public func url(_ path: String) -> URL {
        let base = "http://127.0.0.1:\(port)"
        if let url = URL(string: base + path) {
            return url
        }
        var allowed = CharacterSet.urlQueryAllowed
        allowed.insert(charactersIn: "/?&=")
        let encoded = path.addingPercentEncoding(withAllowedCharacters: allowed) ?? "/"
        return URL(string: base + encoded) ?? baseURL
    }

    /// Stops accepting, shuts every open connection down and waits (at most 5 s) for the
    /// connection threads to finish. Safe to call more than once and from any thread.
    ///
    /// - Returns: Whether every connection thread had finished before that bound.
    @discardableResult
    public func stop() -> Bool {
        core.stop()
    }

    /// Shuts down every open connection (idle keep-alive ones included), as a server does when
    /// its keep-alive timeout passes, and goes on accepting new ones. Each connection thread
    /// then closes its descriptor: wait for `openConnections == 0`.
    public func closeOpenConnections() {
        core.state.withLock { state in
            for fd in state.connections { shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    /// Opens gate `name`: every `/hold` response waiting at it (now or later) sends the rest
    /// of its body. Gates are never closed again.
    public func openGate(_ name: String) {
        core.state.withLock { _ = $0.openGates.insert(name) }
    }

    /// `/hold` responses that have sent their first part and are waiting at gate `name`.
    public func heldAtGate(_ name: String) -> Int {
        core.state.withLock { $0.held[name] ?? 0 }
    }

    /// `/hold` responses that passed gate `name` and have sent the first bytes after it
    /// (up to 64 KiB): from then on the client has data to read.
    public func sentPastGate(_ name: String) -> Int {
        core.state.withLock { $0.passed[name] ?? 0 }
    }

    /// Requests `/flaky` served under `key` so far.
    public func hits(_ key: String) -> Int {
        core.state.withLock { $0.hits[key] ?? 0 }
    }

    /// Requests whose head was received, on all connections, since the start.
    public var requestCount: Int { core.state.withLock { $0.requestCount } }

    /// Connections accepted since the start.
    public var acceptedConnections: Int { core.state.withLock { $0.accepted } }

    /// Connections currently open (accepted and not yet closed by either side).
    public var openConnections: Int { core.state.withLock { $0.connections.count } }

    /// The most recent requests (at most 10 000), oldest first.
    public var requests: [RecordedRequest] { core.state.withLock { $0.records } }

    /// Waits until `openConnections == count` or `timeout` passes.
    ///
    /// - Returns: Whether the count was reached.
        public func waitForOpenConnections(_ count: Int, timeout: Duration = .seconds(5)) -> Bool {
        Wait.poll(timeout: timeout) { openConnections == count }
    }

    /// The hex SHA-256 of the body of `/bytes/<count>?seed=<seed>`.
    public static func sha256(seed: UInt64, count: Int) -> String {
        DeterministicBytes.sha256(seed: seed, count: count)
    }

    /// Bytes `offset..<offset+count` of the body of `/bytes/N?seed=<seed>` (any `N` past them).
    public static func bytes(seed: UInt64, offset: Int = 0, count: Int) -> Data {
        DeterministicBytes.data(seed: seed, offset: offset, count: count)
    }
}

/// A request head the server received.
public struct RecordedRequest: Sendable {
    public var method: String
    /// The request target as sent, e.g. `/bytes/10?seed=1`.
    public var target: String
    /// The path part of `target`.
    public var path: String
    /// Header fields in arrival order, names as sent.
    public var headers: [(name: String, value: String)]
    /// The local port of the client's connection, to tell connections apart.
    public var clientPort: UInt16

    /// The first value of header `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }
}

/// The listener and the registry of connections; shared by the accept and connection threads.
final class ServerCore: Sendable {
    struct State: Sendable {
        var stopping = false
        var connections: Set<Int32> = []
        var accepted = 0
        var refused = 0
        var requestCount = 0
        var records: [RecordedRequest] = []
        /// Gates opened by the test (`openGate`); `/hold` responses wait on them.
        var openGates: Set<String> = []
        /// `/hold` responses waiting at each gate right now.
        var held: [String: Int] = [:]
        /// `/hold` responses that passed each gate and handed the first bytes after it to the
        /// kernel.
        var passed: [String: Int] = [:]
        /// Requests seen per `/flaky` key (TestServer+Routes).
        var hits: [String: Int] = [:]
    }

    static let maxRecords = 10_000
    /// Connections served at once; more are closed on accept, so a runaway client cannot
    /// exhaust the test process's threads.
    static let maxConnections = 1_000

    let listenFD: Int32
    let port: UInt16
    let state = Locked(State())
    /// Entered by the accept thread and by every connection thread; `stop()` waits on it.
    private let running = DispatchGroup()

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestSupportError.posix("socket") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 512) == 0 else {
            let error = TestSupportError.posix("bind/listen 127.0.0.1:0")
            close(fd)
            throw error
        }
        guard let port = ServerCore.localPort(of: fd) else {
            let error = TestSupportError.posix("getsockname")
            close(fd)
            throw error
        }
        listenFD = fd
        self.port = port
    }

    static func localPort(of fd: Int32) -> UInt16? {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let result = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return result == 0 ? UInt16(bigEndian: address.sin_port) : nil
    }

    static func peerPort(of fd: Int32) -> UInt16 {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let result = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
        }
        return result == 0 ? UInt16(bigEndian: address.sin_port) : 0
    }

    func startAccepting() {
        running.enter()
        Thread.detachNewThread { [self] in
            acceptLoop()
            // Only this thread closes the listener, after accept() can no longer use it.
            close(listenFD)
            running.leave()
        }
    }

    private func acceptLoop() {
        while true {
            let fd = accept(listenFD, nil, nil)
            if fd < 0 {
                let code = errno
                if state.withLock({ $0.stopping }) { return }
                switch code {
                case EINTR, ECONNABORTED, EPROTO:
                    continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    // Out of descriptors: back off instead of spinning; the test will see it.
                    _ = poll(nil, 0, 10)
                    continue
                default:
                    return
                }
            }
            let registered = state.withLock { state -> Bool? in
                if state.stopping { return false }
                if state.connections.count >= ServerCore.maxConnections {
                    state.refused += 1
                    return nil
                }
                state.connections.insert(fd)
                state.accepted += 1
                return true
            }
            guard let registered else {
                close(fd)
                continue
            }
            guard registered else {
                close(fd)
                return
            }
            // accept4 is not imported by Glibc; no subprocess should inherit test sockets.
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            running.enter()
            Thread.detachNewThread { [self] in
                let connection = Connection(fd: fd, core: self)
                connection.run()
                // Unregister before close: stop() only shuts down descriptors still in the set,
                // so it can never touch a number the kernel has already handed out again.
                _ = state.withLock { $0.connections.remove(fd) }
                close(fd)
                running.leave()
            }
        }
    }

    func record(_ request: RecordedRequest) {
        state.withLock { state in
            state.requestCount += 1
            if state.records.count >= ServerCore.maxRecords {
                state.records.removeFirst(state.records.count / 2)
            }
            state.records.append(request)
        }
    }

    var isStopping: Bool { state.withLock { $0.stopping } }

    @discardableResult
    func stop() -> Bool {
        let first = state.withLock { state -> Bool in
            if state.stopping { return false }
            state.stopping = true
            // Wake every blocked recv/send/poll; each thread then closes its own descriptor.
            for fd in state.connections {
                shutdown(fd, Int32(SHUT_RDWR))
            }
            return true
        }
        if first {
            // Linux wakes a thread blocked in accept() when the listener is shut down.
            shutdown(listenFD, Int32(SHUT_RDWR))
        }
        return running.wait(timeout: .now() + 5) == .success
    }
}
