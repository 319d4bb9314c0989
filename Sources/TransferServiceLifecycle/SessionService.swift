import ServiceLifecycle
import Transfer

/// A ``Transfer/SessionManager`` as a swift-service-lifecycle `Service`:
/// put it in a `ServiceGroup` and the group's graceful shutdown shuts the
/// session down gracefully.
///
/// ``run()`` does nothing until the group asks for a graceful shutdown (a
/// signal, or `triggerGracefulShutdown()`); then it calls
/// ``Transfer/SessionManager/shutdown(cancellingTasks:)``: the requests
/// running finish, new ones fail with `TransferError.Code.sessionInvalidated`,
/// and `run()` returns once the engine thread and its connections are
/// released. When the group cancels the service instead, the running requests
/// are cancelled, the session is still released, and `run()` throws
/// `CancellationError`.
///
/// ```swift
/// let session = try SessionManager()
/// let group = ServiceGroup(
///     services: [SessionService(session), myServer],   // the session outlives the server
///     gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// ```
///
/// Services shut down in reverse order: list the session before the
/// services that use it, so that they stop first.
public struct SessionService: Service {
    /// The session this service shuts down.
    public let session: SessionManager
    /// Whether the graceful shutdown cancels the running requests instead of
    /// waiting for them.
    public let cancelsRunningRequests: Bool

    /// A service for `session`.
    ///
    /// - Parameters:
    ///   - session: The session to shut down when the group shuts down.
    ///   - cancelsRunningRequests: Cancel the requests still running at
    ///     graceful shutdown (default false: they finish first).
    public init(_ session: SessionManager, cancelsRunningRequests: Bool = false) {
        self.session = session
        self.cancelsRunningRequests = cancelsRunningRequests
    }

    /// Waits for the group's graceful shutdown, then shuts the session down;
    /// see ``SessionService``.
    ///
    /// - Throws: `CancellationError` when the group cancelled the service
    ///   (the session is shut down all the same, its requests cancelled).
    public func run() async throws {
        do {
            try await gracefulShutdown()
        } catch {
            // Cancelled before any graceful shutdown: the session goes now.
            try? await session.shutdown(cancellingTasks: true)
            throw CancellationError()
        }
        do {
            try await session.shutdown(cancellingTasks: cancelsRunningRequests)
        } catch {
            // Cancelled while waiting for the running requests: they were
            // cancelled and the session released.
            throw CancellationError()
        }
    }
}
