/// The outcome of ``SecurityPolicy/evaluate(serverTrust:forDomain:)``: trusted, or why not.
public enum TrustEvaluation: Sendable, Hashable, CustomStringConvertible {
    /// The chain satisfies the policy.
    case valid
    /// The chain does not validate against the anchors (expired, unknown issuer, ...).
    case chainInvalid(ChainFailure)
    /// The leaf does not name the domain.
    case hostnameMismatch(host: String)
    /// No pinned certificate or key (of the policy or of a per-host rule) is in the chain.
    case noPinMatched(reason: String)
    /// The policy itself is refused, e.g. validating the domain name while allowing invalid
    /// certificates without pins (as AFSecurityPolicy refuses it).
    case policyInvalid(reason: String)
    /// A server-trust challenge handler refused the server.
    case rejectedByChallengeHandler

    /// Whether the server is trusted.
    public var isValid: Bool { self == .valid }

    public var description: String {
        switch self {
        case .valid: "valid"
        case .chainInvalid(let failure): "chain invalid: \(failure.message)"
        case .hostnameMismatch(let host): "the certificate does not match \(host)"
        case .noPinMatched(let reason): "no pin matched: \(reason)"
        case .policyInvalid(let reason): "policy invalid: \(reason)"
        case .rejectedByChallengeHandler: "refused by the server-trust challenge handler"
        }
    }
}

/// Why OpenSSL refused a chain.
public struct ChainFailure: Sendable, Hashable {
    /// The kind of chain failure.
    public enum Kind: Sendable, Hashable {
        /// A certificate of the chain has expired.
        case expired
        /// A certificate of the chain is not valid yet.
        case notYetValid
        /// The issuer is not in the chain or the anchors (incomplete chain, foreign CA).
        case unknownIssuer
        /// A self-signed leaf, or a root that is not an anchor.
        case selfSigned
        /// A signature in the chain does not verify.
        case badSignature
        /// Any other OpenSSL verify error (``verifyError`` says which).
        case other
    }

    /// What kind of failure it was.
    public var kind: Kind
    /// OpenSSL's `X509_V_ERR_*` code.
    public var verifyError: Int32
    /// OpenSSL's text for it.
    public var message: String

    /// A chain failure, for tests.
    public init(kind: Kind, verifyError: Int32, message: String) {
        self.kind = kind
        self.verifyError = verifyError
        self.message = message
    }
}

/// Why the engine refused a server (``TransferError/tlsReason``).
public enum TrustFailureReason: Int32, Sendable, Hashable {
    /// The chain did not validate against the anchors.
    case chainInvalid = 1
    /// The certificate is not for the host name.
    case hostnameMismatch = 2
    /// No certificate or key of the chain is pinned.
    case noPinMatched = 3
    /// The policy cannot be applied (e.g. pinning with no pins).
    case policyInvalid = 4
    /// A challenge hook or the delegate refused the server.
    case rejectedByDelegate = 5
    /// The handshake failed before the chain could be evaluated.
    case handshake = 6
    /// The server-trust challenge hook gave no answer within
    /// ``SessionConfiguration/serverTrustChallengeTimeout``: the server is refused.
    case challengeTimedOut = 7
}

extension TransferError {
    /// ``tlsReason`` as a ``TrustFailureReason``; nil when trust was not the cause.
    public var trustFailureReason: TrustFailureReason? {
        tlsReason.flatMap(TrustFailureReason.init(rawValue:))
    }

    /// The refusal as a ``TrustEvaluation`` (nil when trust was not the cause).
    public var trustEvaluation: TrustEvaluation? {
        guard let reason = trustFailureReason else { return nil }
        return TrustEvaluation(reason: reason, verifyError: verifyError ?? 0, message: message,
                               host: url?.host ?? "")
    }
}

extension TrustEvaluation {
    /// Rebuilds an evaluation from the engine's numbers (`ct_result.tls_reason`, `verify_error`).
    init(reason: TrustFailureReason, verifyError: Int32, message: String, host: String) {
        switch reason {
        case .hostnameMismatch:
            self = .hostnameMismatch(host: host)
        case .noPinMatched:
            self = .noPinMatched(reason: message)
        case .rejectedByDelegate, .challengeTimedOut:
            self = .rejectedByChallengeHandler
        case .policyInvalid:
            self = .policyInvalid(reason: message)
        case .chainInvalid, .handshake:
            // The kind comes from OpenSSL's verify error (Bridging/TrustEvaluation+Engine.swift).
            self = .chainInvalid(ChainFailure(verifyError: verifyError, message: message))
        }
    }
}
