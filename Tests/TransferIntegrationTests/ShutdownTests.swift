import Foundation
import Synchronization
import TestSupport
import Testing
import Transfer

/// `shutdown()`, `waitUntilInvalid()` and the invalidation race, over real
/// loopback sockets. Requests are held at the server's `/hold` gates so that
/// they are in flight when the session is invalidated: no clock decides.
@Suite("Session shutdown")
struct ShutdownTests {
    /// The request runs on the fast path (no hook, no delegate, no logger).
    private func heldRequest(_ server: TestServer, gate: String, size: Int = 4096) -> Request {
        Request(url: server.url("/hold/\(size)?gate=\(gate)&seed=7"))
    }

    @Test("a request in flight before finishTasksAndInvalidate() completes; one made after is refused")
    func inFlightRequestSurvivesFinishTasksAndInvalidate() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        let size = 4096
        let request = heldRequest(server, gate: "race", size: size)

        // Given a data(for:) call whose request has reached the server...
        let inFlight = Task { try await session.data(for: request) }
        try await Wait.until("the request held at the gate", timeout: defaultDeadline) {
            server.heldAtGate("race") == 1
        }
        // ...when the session is invalidated (gracefully)...
        session.finishTasksAndInvalidate()
        #expect(session.isInvalidated)
        #expect(!session.isInvalid, "a request is still running")

        // ...then a new request is refused with the typed error...
        await #expect(throws: TransferError.self) {
            do throws(TransferError) {
                _ = try await session.data(for: Request(url: server.url("/bytes/10")))
            } catch {
                #expect(error.code == .sessionInvalidated)
                throw error
            }
        }
        // ...and the one in flight runs to completion.
        server.openGate("race")
        let (data, response) = try await inFlight.value
        #expect(response.statusCode == 200)
        #expect(data == TestServer.bytes(seed: 7, count: size))
        await session.waitUntilInvalid()
        #expect(session.isInvalid)
    }

    /// The race of a Swift task that calls `data(for:)` after the batch was
    /// made: a batch over tasks (the session has a hook) starts each request
    /// from its own Swift task. With one request at a time, the second and
    /// third start after the invalidation whatever the interleaving: the first
    /// is held at the gate until then.
    @Test("a batch made before finishTasksAndInvalidate() runs every request, even those started after it")
    func batchMadeBeforeInvalidationRuns() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        var hooks = SessionHooks()
        hooks.taskDidComplete = { _, _, _ in }
        session.hooks = hooks
        let requests = (0..<3).map { Request(url: server.url("/hold/100?gate=batch&seed=\($0)")) }

        let results = session.results(for: requests, options: BatchOptions(maxConcurrentRequests: 1))
        session.finishTasksAndInvalidate()
        await #expect(throws: TransferError.self) {
            _ = try await session.data(for: Request(url: server.url("/bytes/10")))
        }
        server.openGate("batch")

        var statuses: [Int: Int] = [:]
        for await element in results {
            switch element.result {
            case .success(let (data, response)):
                statuses[element.index] = response.statusCode
                #expect(data == TestServer.bytes(seed: UInt64(element.index), count: 100))
            case .failure(let error):
                Issue.record("request \(element.index) failed: \(error)")
            }
        }
        #expect(statuses == [0: 200, 1: 200, 2: 200])
        await session.waitUntilInvalid()
    }

    @Test("a task created before finishTasksAndInvalidate() and resumed after it runs to completion")
    func taskCreatedBeforeInvalidationRuns() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        let finished = Latched<(Int, Data?, TransferError?)>()

        let task = session.dataTask(with: Request(url: server.url("/bytes/100?seed=3"))) { response, data, error in
            finished.set((response?.statusCode ?? 0, data, error))
        }
        session.finishTasksAndInvalidate()
        task.resume()

        let (status, data, error) = try await finished.value(timeout: defaultDeadline)
        #expect(error == nil)
        #expect(status == 200)
        #expect(data == TestServer.bytes(seed: 3, count: 100))
        await session.waitUntilInvalid()
    }

    @Test("shutdown() waits for the requests in flight, refuses new ones, then releases the connections")
    func shutdownIsGraceful() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        let size = 4096
        let folder = try TemporaryDirectory()
        let destination = folder.file("f")
        // A task and a fast-path request, both in flight.
        let viaTask = Task { try await session.download(for: heldRequest(server, gate: "g"), to: destination) }
        let viaFastPath = Task { try await session.data(for: heldRequest(server, gate: "g", size: size)) }
        try await Wait.until("both requests held", timeout: defaultDeadline) { server.heldAtGate("g") == 2 }

        let shutdown = Task { try await session.shutdown() }
        try await Wait.until("the session invalidated", timeout: defaultDeadline) { session.isInvalidated }
        await #expect(throws: TransferError.self) {
            _ = try await session.data(for: Request(url: server.url("/bytes/10")))
        }
        #expect(!session.isInvalid)

        server.openGate("g")
        try await shutdown.value
        // Returned only after both had completed, and with the connections closed.
        #expect(session.isInvalid)
        let (_, fastResponse) = try await viaFastPath.value
        #expect(fastResponse.statusCode == 200)
        let (file, taskResponse) = try await viaTask.value
        #expect(taskResponse.statusCode == 200)
        #expect(file == destination)
        try await Wait.until("the server sees the connections closed", timeout: defaultDeadline) {
            server.openConnections == 0
        }
        // A second shutdown returns at once.
        try await session.shutdown()
    }

    @Test("shutdown(cancellingTasks: true) cancels the requests in flight and returns")
    func shutdownCancelling() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        let inFlight = Task { try await session.data(for: heldRequest(server, gate: "never")) }
        try await Wait.until("the request held", timeout: defaultDeadline) { server.heldAtGate("never") == 1 }

        try await session.shutdown(cancellingTasks: true)

        #expect(session.isInvalid)
        do {
            _ = try await inFlight.value
            Issue.record("the held request succeeded")
        } catch let error as TransferError {
            #expect(error.code == .cancelled)
        }
    }

    @Test("many waiters: waitUntilInvalid() returns for each, and the hook still runs")
    func manyWaiters() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        let hookRan = Latched<Bool>()
        var hooks = SessionHooks()
        hooks.sessionDidBecomeInvalid = { _, _ in hookRan.set(true) }
        session.hooks = hooks
        let inFlight = Task { try await session.data(for: heldRequest(server, gate: "w")) }
        try await Wait.until("the request held", timeout: defaultDeadline) { server.heldAtGate("w") == 1 }

        let waiters = (0..<5).map { _ in Task { await session.waitUntilInvalid(); return session.isInvalid } }
        session.finishTasksAndInvalidate()
        server.openGate("w")
        for waiter in waiters { #expect(await waiter.value) }
        #expect(try await hookRan.value(timeout: defaultDeadline))
        _ = try await inFlight.value
    }
}

/// A value set once by a callback, awaited by the test.
final class Latched<Value: Sendable>: Sendable {
    private let stored = Locked<Value?>(nil)

    func set(_ value: Value) { stored.withLock { if $0 == nil { $0 = value } } }

    func value(timeout: Duration) async throws -> Value {
        try await Wait.until("the callback", timeout: timeout) { self.stored.withLock { $0 != nil } }
        return stored.withLock { $0! }
    }
}
