import FoundationEssentials

/// Decides whether a server is trusted: AFNetworking's `AFSecurityPolicy`, evaluated by OpenSSL
/// in the engine's handshake (so a refused server never receives a request byte).
///
/// - `validatesDomainName` with `allowInvalidCertificates` and no pins is refused
///   (``TrustEvaluation/policyInvalid(reason:)``), as AFNetworking refuses it.
/// - ``PinningMode/none``: plain validation against the anchors and the domain, or nothing at all
///   when `allowInvalidCertificates`.
/// - ``PinningMode/certificate``: the pinned certificates are the only anchors — a pinned root,
///   intermediate, leaf or self-signed certificate ends the chain — and the validated chain must
///   contain one. (AFNetworking first also validates against the system anchors unless
///   `allowInvalidCertificates`; here a pinned certificate is trusted on its own, so a pinned
///   self-signed certificate works without allowing invalid certificates.)
/// - ``PinningMode/publicKey``: the chain is validated against the anchors unless
///   `allowInvalidCertificates`, and some key of the chain must equal a pinned key (keys of
///   `pinnedCertificates` and `pinnedPublicKeyHashes`).
/// - Beyond AFNetworking, ``pinPolicy`` adds per-host pin rules with backup pins, expiration
///   and report-only mode.
public struct SecurityPolicy: Sendable {
    /// What is pinned: nothing, the certificate, or its public key (AFSSLPinningMode).
    public var pinningMode: PinningMode
    /// Certificates to pin (AFNetworking's `pinnedCertificates`, DER).
    public var pinnedCertificates: Set<Certificate>
    /// Extra pinned keys as base64 SHA-256 of SubjectPublicKeyInfo (public-key mode).
    public var pinnedPublicKeyHashes: Set<String> = []
    /// Accept chains that do not validate (expired, self-signed, ...). Default false.
    public var allowInvalidCertificates = false
    /// Check that the leaf names the host. Default true.
    public var validatesDomainName = true
    /// Per-host pin rules, applied after the checks above.
    public var pinPolicy: PinPolicy?

    /// A policy with `pinningMode` and `pinnedCertificates`.
    public init(pinningMode: PinningMode = .none, pinnedCertificates: Set<Certificate> = []) {
        self.pinningMode = pinningMode
        self.pinnedCertificates = pinnedCertificates
    }

    /// No pinning, invalid certificates refused, domain validated.
    public static var defaultPolicy: SecurityPolicy { SecurityPolicy() }

    /// A policy with `pinningMode` and no pinned certificates. (AFNetworking pins the app
    /// bundle's `.cer` files here; Linux has no bundle: use ``certificates(inDirectory:)``.)
    public static func policy(pinningMode: PinningMode) -> SecurityPolicy {
        SecurityPolicy(pinningMode: pinningMode)
    }

    /// AFNetworking's `policyWithPinningMode:withPinnedCertificates:`.
    public static func policy(pinningMode: PinningMode, pinnedCertificates: Set<Certificate>) -> SecurityPolicy {
        SecurityPolicy(pinningMode: pinningMode, pinnedCertificates: pinnedCertificates)
    }

    /// Every certificate in the `.cer`, `.der`, `.crt` and `.pem` files of `directory` (not recursive).
    /// - Throws: `TransferError.fileError` when the directory cannot be listed or a file read,
    ///   `.invalidRequest` when such a file holds no certificate.
    public static func certificates(inDirectory directory: URL) throws(TransferError) -> Set<Certificate> {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw TransferError(.fileError, "cannot list \(directory.path): \(error)", url: directory)
        }
        var result = Set<Certificate>()
        for name in names.sorted() where ["cer", "der", "crt", "pem"].contains(URL(fileURLWithPath: name).pathExtension.lowercased()) {
            result.formUnion(try Certificate.certificates(contentsOf: directory.appendingPathComponent(name)))
        }
        return result
    }

    /// Every certificate of PEM data (a bundle).
    public static func certificates(fromPEM data: Data) throws(TransferError) -> [Certificate] {
        try Certificate.certificates(fromPEM: data)
    }

    /// Evaluates `serverTrust` as the handshake would, without a connection.
    ///
    /// - Parameters:
    ///   - serverTrust: The chain, its evaluation date and anchors.
    ///   - domain: The host name or IP address to check; `nil` skips the host name check and
    ///     per-host rules.
    /// - Returns: ``TrustEvaluation/valid`` or the reason the chain is refused.
    public func evaluate(serverTrust: ServerTrust, forDomain domain: String?) -> TrustEvaluation {
        guard !serverTrust.certificates.isEmpty else {
            return .chainInvalid(ChainFailure(kind: .other, verifyError: 0, message: "no certificate"))
        }
        let engine: EngineTrustPolicy
        do {
            engine = try makeEnginePolicy(withReports: false)
        } catch {
            return .policyInvalid(reason: error.message)
        }
        return engine.evaluate(serverTrust, forDomain: domain)   // Bridging/SecurityPolicy+Engine.swift
    }

    /// Checks what can be checked before any connection: pinned keys, host rule patterns and the
    /// backup-pin rule. (The AFNetworking rule on allowing invalid certificates depends on the
    /// domain, so it is reported by ``evaluate(serverTrust:forDomain:)`` and the handshake.)
    /// - Throws: `TransferError.invalidRequest` with the reason.
    public func validate() throws(TransferError) {
        _ = try makeEnginePolicy(withReports: false)
    }

    /// AFNetworking's `evaluateServerTrust:forDomain:` as a Bool.
    public func isTrusted(serverTrust: ServerTrust, forDomain domain: String?) -> Bool {
        evaluate(serverTrust: serverTrust, forDomain: domain).isValid
    }
}
