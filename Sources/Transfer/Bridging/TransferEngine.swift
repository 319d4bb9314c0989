import CTransfer

/// What the task layer asks of the engine for one transfer: the seam between
/// tasks and ``Engine``. `Engine` is the one implementation that ships; a
/// test gives a session its own (``SessionManager/init(configuration:transferEngine:)``)
/// and drives one task event by event, with no socket and no clock
/// (TaskFlowTests).
///
/// Every command queues and returns at once; see ``Engine`` for the codes.
protocol TransferEngine: AnyObject, Sendable {
    /// Submits a transfer whose events go to `target`; on success the
    /// target's ``EngineTarget/engineDidFinish(_:)`` runs exactly once.
    func submit(_ spec: inout TransferSpec, target: EngineTarget) -> Result<UInt64, TransferError>
    @discardableResult func cancel(_ id: UInt64, keepPartial: Bool) -> ct_code
    @discardableResult func pause(_ id: UInt64) -> ct_code
    @discardableResult func resume(_ id: UInt64) -> ct_code
    @discardableResult func setDisposition(_ id: UInt64, _ disposition: EngineDisposition) -> ct_code
    /// False when the wake-up was lost: the caller must fail the task.
    @discardableResult func consumerReady(_ id: UInt64) -> Bool
    @discardableResult func bodyReady(_ id: UInt64) -> ct_code
    @discardableResult func setSpeedLimit(_ id: UInt64, receive: Int64, send: Int64) -> ct_code
}

extension TransferEngine {
    /// Cancels `id`; its part file is removed (see ``cancel(_:keepPartial:)``).
    @discardableResult func cancel(_ id: UInt64) -> ct_code { cancel(id, keepPartial: false) }
}

extension Engine: TransferEngine {}
