import Foundation
import Logging
import ServiceLifecycle
import TestSupport
import Testing
import Transfer
import TransferServiceLifecycle

/// `SessionService` in a real `ServiceGroup`, over loopback sockets: the
/// request in flight is held at the server's gate, so nothing depends on time.
@Suite("SessionService in a ServiceGroup")
struct SessionServiceTests {
    private let deadline: Duration = .seconds(60)

    @Test("graceful shutdown lets the request in flight finish, refuses new ones, and ends the group")
    func gracefulShutdown() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        let size = 4096
        let held = Request(url: server.url("/hold/\(size)?gate=svc&seed=9"))

        let inFlight = Task { try await session.data(for: held) }
        try await Wait.until("the request held at the gate", timeout: deadline) { server.heldAtGate("svc") == 1 }

        let group = ServiceGroup(services: [SessionService(session)], logger: Logger(label: "test.group"))
        let running = Task { try await group.run() }
        await group.triggerGracefulShutdown()

        // The session is invalidated: a new request is refused with the typed error.
        try await Wait.until("the session invalidated", timeout: deadline) { session.isInvalidated }
        do {
            _ = try await session.data(for: Request(url: server.url("/bytes/10")))
            Issue.record("a request made after the graceful shutdown was sent")
        } catch {
            #expect(error.code == .sessionInvalidated)
        }
        #expect(!session.isInvalid, "the held request is still running")

        // The request in flight finishes, then the group's run returns.
        server.openGate("svc")
        let (data, response) = try await inFlight.value
        #expect(response.statusCode == 200)
        #expect(data == TestServer.bytes(seed: 9, count: size))
        try await running.value
        #expect(session.isInvalid)
    }

    @Test("cancelling the group cancels the request in flight and still shuts the session down")
    func cancellation() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        let inFlight = Task { try await session.data(for: Request(url: server.url("/hold/4096?gate=never"))) }
        try await Wait.until("the request held at the gate", timeout: deadline) { server.heldAtGate("never") == 1 }

        let group = ServiceGroup(services: [SessionService(session)], logger: Logger(label: "test.group"))
        let running = Task { try await group.run() }
        running.cancel()
        _ = try? await running.value

        do {
            _ = try await inFlight.value
            Issue.record("the held request succeeded")
        } catch let error as TransferError {
            #expect(error.code == .cancelled)
        }
        try await Wait.until("the session invalid", timeout: deadline) { session.isInvalid }
    }
}
