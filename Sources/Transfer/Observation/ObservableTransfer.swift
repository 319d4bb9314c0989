import Dispatch

/// Something whose progress and state can be observed without KVO: tasks
/// conform, and so can test doubles. Bindings and monitors use only this.
public protocol ObservableTransfer: AnyObject, Sendable {
    /// The current state (lock-free read, may be stale by the time it is used).
    var state: TaskState { get }
    /// The current progress of one direction.
    func progress(_ direction: ProgressDirection) -> TransferProgress

    /// Calls `handler` on `queue` with each throttled progress report of
    /// `direction` (at most ~60 a second, plus a final one), until the task
    /// completes or the token is cancelled.
    @discardableResult
    func observeProgress(_ direction: ProgressDirection, on queue: DispatchQueue,
                         _ handler: @escaping @Sendable (TransferProgress) -> Void) -> ObservationToken

    /// Calls `handler` on `queue` with each state change, the last being
    /// `.completed`, after which the observation ends by itself.
    @discardableResult
    func observeState(on queue: DispatchQueue, _ handler: @escaping @Sendable (TaskState) -> Void) -> ObservationToken
}

/// Ends an observation when cancelled (idempotent; thread-safe).
public final class ObservationToken: Sendable, Hashable {
    private let onCancel: @Sendable () -> Void
    private let once = OnceFlag()

    /// A token that calls `onCancel` once when cancelled.
    public init(_ onCancel: @escaping @Sendable () -> Void) { self.onCancel = onCancel }

    /// Stops the observation; later calls do nothing.
    public func cancel() {
        if once.claim() { onCancel() }
    }

    public static func == (lhs: ObservationToken, rhs: ObservationToken) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}
