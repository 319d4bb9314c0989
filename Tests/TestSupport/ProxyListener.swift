import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The socket plumbing shared by the test proxies (``TestHTTPProxy``, ``TestSOCKS5Server``):
/// a listener on 127.0.0.1 at a free port, one thread per accepted connection, upstream
/// connections to loopback only, a byte relay between two sockets, and a `stop()` that
/// shuts every socket down and waits for the threads.
final class ProxyListener: Sendable {
    let port: UInt16
    private let listenFD: Int32
    private let sockets = Locked(Sockets())
    private let running = DispatchGroup()

    private struct Sockets: Sendable {
        var open: Set<Int32> = []
        var stopping = false
    }

    init() throws {
        let opened = try LoopbackListener.open(backlog: 128)
        _ = fcntl(opened.fd, F_SETFD, FD_CLOEXEC)
        listenFD = opened.fd
        port = opened.port
    }

    /// Accepts until `stop()`; `serve` runs on a thread of its own per connection and may
    /// block. The descriptor is closed after `serve` returns.
    func start(_ serve: @escaping @Sendable (Int32) -> Void) {
        running.enter()
        Thread.detachNewThread { [self] in
            while true {
                let fd = accept(listenFD, nil, nil)
                if fd < 0 {
                    if errno == EINTR || errno == ECONNABORTED { continue }
                    break
                }
                guard register(fd) else {
                    close(fd)
                    break
                }
                running.enter()
                Thread.detachNewThread { [self] in
                    serve(fd)
                    release(fd)
                    running.leave()
                }
            }
            close(listenFD)
            running.leave()
        }
    }

    /// Tracks `fd` so that `stop()` shuts it down; false (and untracked) once stopping.
    func register(_ fd: Int32) -> Bool {
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return sockets.withLock { state in
            if state.stopping { return false }
            state.open.insert(fd)
            return true
        }
    }

    /// Untracks and closes `fd` (unregistered first, so `stop()` never touches a reused number).
    func release(_ fd: Int32) {
        _ = sockets.withLock { $0.open.remove(fd) }
        close(fd)
    }

    /// Stops accepting, wakes every blocked socket call and waits (at most 5 s).
    @discardableResult
    func stop() -> Bool {
        let first = sockets.withLock { state -> Bool in
            if state.stopping { return false }
            state.stopping = true
            for fd in state.open { shutdown(fd, Int32(SHUT_RDWR)) }
            return true
        }
        if first { shutdown(listenFD, Int32(SHUT_RDWR)) }
        return running.wait(timeout: .now() + 5) == .success
    }

    // MARK: Upstream and relay

    /// A connection to 127.0.0.1:`port`, tracked; nil when refused or stopping.
    func connectLoopback(ipv4 address: String = "127.0.0.1", port: UInt16) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_port = port.bigEndian
        sin.sin_addr.s_addr = inet_addr(address)
        let connected = withUnsafePointer(to: &sin) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0, register(fd) else {
            close(fd)
            return nil
        }
        return fd
    }

    /// Copies bytes both ways until both directions ended (a half-close is passed on).
    static func relay(_ a: Int32, _ b: Int32) {
        var fds = [pollfd(fd: a, events: Int16(POLLIN), revents: 0), pollfd(fd: b, events: Int16(POLLIN), revents: 0)]
        var open = [true, true]
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while open[0] || open[1] {
            for i in 0..<2 { fds[i].events = open[i] ? Int16(POLLIN) : 0 }
            let ready = poll(&fds, 2, -1)
            if ready < 0 {
                if errno == EINTR { continue }
                return
            }
            for i in 0..<2 where open[i] && fds[i].revents != 0 {
                let from = fds[i].fd
                let to = fds[1 - i].fd
                let n = buffer.withUnsafeMutableBytes { recv(from, $0.baseAddress, $0.count, 0) }
                if n <= 0 {
                    open[i] = false
                    shutdown(to, Int32(SHUT_WR))
                    if n < 0 { return }
                    continue
                }
                guard buffer.withUnsafeBytes({ sendAll(to, UnsafeRawBufferPointer(rebasing: $0[0..<n])) }) else {
                    return
                }
            }
        }
    }

    static func sendAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = send(fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            offset += n
        }
        return true
    }

    static func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { sendAll(fd, $0) }
    }

    static func sendAll(_ fd: Int32, _ text: String) -> Bool {
        sendAll(fd, Array(text.utf8))
    }

    /// Exactly `count` bytes, or nil at end of stream or on error.
    static func readExactly(_ fd: Int32, _ count: Int) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = out.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + got, count - got, 0) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return nil }
            got += n
        }
        return out
    }
}
