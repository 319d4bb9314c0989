/// How ``SecurityPolicy`` pins servers (AFNetworking's `AFSSLPinningMode`).
public enum PinningMode: Sendable, Hashable, CaseIterable {
    /// No pinning: the chain is validated against the trust anchors.
    case none
    /// Some public key of the chain must equal a pinned one.
    case publicKey
    /// The pinned certificates are the trust anchors and the validated chain must contain one.
    case certificate

    var engineValue: ct_pinning_mode {
        switch self {
        case .none: CT_PINNING_NONE
        case .publicKey: CT_PINNING_PUBLIC_KEY
        case .certificate: CT_PINNING_CERTIFICATE
        }
    }
}

import CTransfer
