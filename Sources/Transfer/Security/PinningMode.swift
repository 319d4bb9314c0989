/// How ``SecurityPolicy`` pins servers (AFNetworking's `AFSSLPinningMode`).
public enum PinningMode: Sendable, Hashable, CaseIterable {
    /// No pinning: the chain is validated against the trust anchors.
    case none
    /// Some public key of the chain must equal a pinned one.
    case publicKey
    /// The pinned certificates are the trust anchors and the validated chain must contain one.
    case certificate
}
