import CTransfer

/// The engine's trust numbers (`ct_tls_reason`, `ct_chain_problem`) in Swift terms.
extension TrustEvaluation {
    /// The engine's reason code (`ct_tls_reason`), as carried by ``TransferError/tlsReason``.
    public var reasonCode: Int32 {
        switch self {
        case .valid: Int32(CT_TLS_OK.rawValue)
        case .chainInvalid: Int32(CT_TLS_CHAIN_INVALID.rawValue)
        case .hostnameMismatch: Int32(CT_TLS_HOSTNAME_MISMATCH.rawValue)
        case .noPinMatched: Int32(CT_TLS_NO_PIN_MATCHED.rawValue)
        case .policyInvalid: Int32(CT_TLS_POLICY_INVALID.rawValue)
        case .rejectedByChallengeHandler: Int32(CT_TLS_REJECTED_BY_DELEGATE.rawValue)
        }
    }
}

extension ChainFailure {
    /// A failure of the engine's kind `problem` (`ct_chain_problem`).
    init(problem: Int32, verifyError: Int32, message: String) {
        let kind: Kind =
            switch UInt32(bitPattern: problem) {
            case CT_CHAIN_EXPIRED.rawValue: .expired
            case CT_CHAIN_NOT_YET_VALID.rawValue: .notYetValid
            case CT_CHAIN_UNKNOWN_ISSUER.rawValue: .unknownIssuer
            case CT_CHAIN_SELF_SIGNED.rawValue: .selfSigned
            case CT_CHAIN_BAD_SIGNATURE.rawValue: .badSignature
            default: .other
            }
        self.init(kind: kind, verifyError: verifyError, message: message)
    }

    /// A failure whose kind follows from OpenSSL's `X509_V_ERR_*` code.
    init(verifyError: Int32, message: String) {
        self.init(problem: Int32(ct_chain_problem_from_verify_error(verifyError).rawValue),
                  verifyError: verifyError, message: message)
    }
}
