import Foundation
import TestSupport
import Testing
import Transfer

#if canImport(Glibc)
    import Glibc
#endif

/// URLSession's timeouts over loopback: idle (`timeoutIntervalForRequest`,
/// `Request.timeoutInterval`), total (`timeoutIntervalForResource`) and connect.
/// Outcomes only: no assertion on elapsed time.
@Suite("Timeouts: idle, total, connect", .serialized)
struct TimeoutTests {
    private func session(_ configure: (inout SessionConfiguration) -> Void) throws -> SessionManager {
        var configuration = SessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 0
        configure(&configuration)
        return try SessionManager(configuration: configuration)
    }

    private func failure(_ session: SessionManager, _ request: Request) async -> TransferError? {
        do {
            _ = try await session.data(for: request)
            return nil
        } catch {
            return error
        }
    }

    @Test("a server that sends the head and then nothing fails with timedOut, named the idle timeout")
    func idleTimeoutOnStall() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try session { $0.timeoutIntervalForRequest = 1 }
        defer { session.invalidateAndCancel() }

        let error = await failure(session, Request(url: server.url("/stall?size=100")))

        #expect(error?.code == .timedOut)
        #expect(error?.message.contains("idle timeout") == true, "\(String(describing: error))")
    }

    @Test("Request.timeoutInterval is the request's idle timeout, over the session's")
    func requestIdleTimeout() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try session { $0.timeoutIntervalForRequest = 600 }
        defer { session.invalidateAndCancel() }
        var request = Request(url: server.url("/stall-headers"))
        request.timeoutInterval = 0.5

        let error = await failure(session, request)

        #expect(error?.code == .timedOut)
        #expect(error?.message.contains("idle timeout") == true, "\(String(describing: error))")
    }

    @Test("a trickle of one byte every ~80 ms for longer than the idle timeout succeeds: idle is not total")
    func trickleOutlivesIdleTimeout() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try session { $0.timeoutIntervalForRequest = 1 }
        defer { session.invalidateAndCancel() }

        // 30 bytes at 12 bytes/s: the server paces them over 2.5 s, past the 1 s idle timeout.
        let (data, response) = try await session.data(for: Request(url: server.url("/slow?rate=12&size=30&seed=4")))

        #expect(response.statusCode == 200)
        #expect(data == TestServer.bytes(seed: 4, count: 30))
    }

    @Test("a total timeout ends the same trickle with timedOut, named the total timeout")
    func totalTimeoutOnTrickle() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try session {
            $0.timeoutIntervalForRequest = 1
            $0.timeoutIntervalForResource = 1
        }
        defer { session.invalidateAndCancel() }

        // 100 bytes at 12 bytes/s: over 8 s, never idle for 1 s.
        let error = await failure(session, Request(url: server.url("/slow?rate=12&size=100")))

        #expect(error?.code == .timedOut)
        #expect(error?.message.contains("total timeout") == true, "\(String(describing: error))")
    }

    @Test("libcurl's speed limit (curl's --speed-limit/--speed-time) ends a stalled body with timedOut")
    func lowSpeedLimit() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try session {
            $0.lowSpeedLimit = 1000
            $0.lowSpeedTime = 1
        }
        defer { session.invalidateAndCancel() }

        let error = await failure(session, Request(url: server.url("/slow?rate=12&size=100")))

        #expect(error?.code == .timedOut)
        #expect(error?.message.contains("speed limit") == true, "\(String(describing: error))")
    }

    @Test("a listener whose accept queue is full never completes the handshake: connect timeout, timedOut")
    func connectTimeout() async throws {
        // Backlog 0 takes one connection; fill it, then SYNs are dropped
        // (Linux drops them while the accept queue is full) and connect()
        // never completes. Nothing is ever accepted.
        let listener = try LoopbackListener.open(backlog: 0)
        defer { close(listener.fd) }
        var fillers: [Int32] = []
        defer { fillers.forEach { close($0) } }
        for _ in 0..<8 where !acceptQueueIsFull(listener.fd) {
            fillers.append(try connectNonBlocking(port: listener.port))
            _ = await Wait.poll(timeout: .seconds(2)) { acceptQueueIsFull(listener.fd) || isConnected(fillers.last!) }
        }
        try #require(acceptQueueIsFull(listener.fd), "could not fill the listener's accept queue")
        let session = try session { $0.connectTimeout = 0.5 }
        defer { session.invalidateAndCancel() }

        let error = await failure(session, Request(url: URL(string: "http://127.0.0.1:\(listener.port)/")!))

        #expect(error?.code == .timedOut)
        #expect(error?.message.contains("connect timeout") == true, "\(String(describing: error))")
    }

    /// Whether the listener's accept queue is over its backlog (TCP_INFO on a
    /// listening socket: tcpi_unacked is the queue, tcpi_sacked the backlog).
    private func acceptQueueIsFull(_ fd: Int32) -> Bool {
        var info = tcp_info()
        var length = socklen_t(MemoryLayout<tcp_info>.size)
        guard getsockopt(fd, Int32(IPPROTO_TCP), TCP_INFO, &info, &length) == 0 else { return false }
        return info.tcpi_unacked > info.tcpi_sacked
    }

    private func connectNonBlocking(port: UInt16) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw TestSupportError("socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 || errno == EINPROGRESS else {
            let error = errno
            close(fd)
            throw TestSupportError("connect: errno \(error)")
        }
        return fd
    }

    private func isConnected(_ fd: Int32) -> Bool {
        var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        return poll(&poller, 1, 0) == 1 && poller.revents & Int16(POLLOUT) != 0
    }
}
