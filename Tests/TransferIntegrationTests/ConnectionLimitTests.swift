import Foundation
import TestSupport
import Testing
import Transfer

/// Issue 27 item 6(c): HTTP/1 requests over `maxConnectionsPerHost` waited in
/// libcurl's queue for the host, which is not first come first served (a new
/// request takes the connection that frees up; the waiting one it woke goes
/// to the back), so under a steady backlog some requests waited many times
/// longer than the queue was deep. They now wait in the engine, in order,
/// and the pool statistics count them as queued.
@Suite("Requests over the per-host connection limit")
struct ConnectionLimitTests {
    @Test("HTTP/1 requests over the per-host limit wait in the engine and reach the server in the order they were made")
    func requestsOverTheLimitWaitInOrder() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession { $0.maxConnectionsPerHost = 1 }
        defer { session.invalidateAndCancel() }
        let done = Completion<[String]>()
        let bodies = Locked<[Int: String]>([:])
        let waiting = 5

        // Given the host's only connection held at a gate by a first request
        let first = Task {
            let (data, _) = try await session.data(for: Request(url: server.url("/whoami?gate=limit&n=0")))
            bodies.withLock { $0[0] = String(decoding: data, as: UTF8.self) }
        }
        try await Wait.until("the first request at the gate", timeout: defaultDeadline) {
            server.heldAtGate("limit") == 1
        }

        // When more requests are made, each after the engine has the one before
        var rest: [Task<Void, any Error>] = []
        for n in 1...waiting {
            rest.append(Task {
                let (data, _) = try await session.data(for: Request(url: server.url("/whoami?n=\(n)")))
                bodies.withLock { $0[n] = String(decoding: data, as: UTF8.self) }
            })
            try await Wait.until("request \(n) queued in the engine", timeout: defaultDeadline) {
                session.connectionPoolStatistics.queuedTransfers == n
            }
        }
        let statisticsWhileHeld = session.connectionPoolStatistics
        server.openGate("limit")
        let all = Task {
            do {
                try await first.value
                for task in rest { try await task.value }
                done.fulfil(server.requests.map(\.target).filter { $0.hasPrefix("/whoami") })
            } catch {
                done.fulfil([])
            }
        }
        let targets = await done.wait(timeout: defaultDeadline)
        all.cancel()

        // Then they waited in the engine and reached the server one by one, in order
        #expect(statisticsWhileHeld.queuedTransfers == waiting)
        #expect(statisticsWhileHeld.activeTransfers == waiting + 1)
        #expect(targets == ["/whoami?gate=limit&n=0"] + (1...waiting).map { "/whoami?n=\($0)" })
        #expect(bodies.withLock { $0.count } == waiting + 1)
        try await Wait.until("the queue to empty", timeout: defaultDeadline) {
            session.connectionPoolStatistics.queuedTransfers == 0
        }
        #expect(server.acceptedConnections == 1)
    }

    @Test("a request cancelled while it waits for its host leaves the queue and the others still start")
    func cancelledWhileWaiting() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession { $0.maxConnectionsPerHost = 1 }
        defer { session.invalidateAndCancel() }
        let done = Completion<Bool>()

        // Given one request at the gate and two waiting behind it
        let first = Task { try await session.data(for: Request(url: server.url("/whoami?gate=cancel"))) }
        try await Wait.until("the first request at the gate", timeout: defaultDeadline) {
            server.heldAtGate("cancel") == 1
        }
        let cancelled = Task { try await session.data(for: Request(url: server.url("/whoami?n=1"))) }
        try await Wait.until("one queued", timeout: defaultDeadline) {
            session.connectionPoolStatistics.queuedTransfers == 1
        }
        let last = Task { try await session.data(for: Request(url: server.url("/whoami?n=2"))) }
        try await Wait.until("two queued", timeout: defaultDeadline) {
            session.connectionPoolStatistics.queuedTransfers == 2
        }

        // When the first of those is cancelled, then the gate opens
        cancelled.cancel()
        try await Wait.until("the cancelled one out of the queue", timeout: defaultDeadline) {
            session.connectionPoolStatistics.queuedTransfers == 1
        }
        server.openGate("cancel")
        let all = Task {
            let firstDone = (try? await first.value) != nil
            let lastDone = (try? await last.value) != nil
            done.fulfil(firstDone && lastDone)
        }
        let finished = await done.wait(timeout: defaultDeadline)
        all.cancel()
        let cancelledError = await cancelled.result.error as? TransferError

        // Then the others finish and the cancelled one never reached the server
        #expect(finished == true)
        #expect(cancelledError?.code == .cancelled)
        #expect(server.requests.map(\.target).filter { $0.hasPrefix("/whoami") } == [
            "/whoami?gate=cancel", "/whoami?n=2",
        ])
    }
}

extension Result {
    fileprivate var error: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
