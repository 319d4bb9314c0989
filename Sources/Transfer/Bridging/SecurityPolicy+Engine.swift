import CTransfer
import Dispatch
import FoundationEssentials

/// A `ct_trust_policy` built from a ``SecurityPolicy``, for the engine.
///
/// Hand `pointer` to `ct_loop_set_trust_policy` (which retains it); this object releases its own
/// reference in deinit. The C policy is immutable once a loop has it, so the wrapper is safe to
/// share (hence `@unchecked Sendable`: nothing mutates `pointer` after init).
final class EngineTrustPolicy: @unchecked Sendable {
    let pointer: OpaquePointer

    fileprivate init(pointer: OpaquePointer) { self.pointer = pointer }

    deinit { ct_trust_policy_release(pointer) }

    /// A policy that refuses every chain (a public-key pin nobody has), for
    /// a session that must fail closed; nil when out of memory.
    static func refusingEverything() -> EngineTrustPolicy? {
        var raw: OpaquePointer?
        guard ct_trust_policy_create(&raw) == CT_OK, let raw else { return nil }
        _ = ct_trust_policy_set_mode(raw, CT_PINNING_PUBLIC_KEY)
        _ = ct_trust_policy_add_pinned_spki(raw, "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
        return EngineTrustPolicy(pointer: raw)
    }

    /// Evaluates `serverTrust` against this policy in the engine, as the
    /// handshake would (``SecurityPolicy/evaluate(serverTrust:forDomain:)``).
    func evaluate(_ serverTrust: ServerTrust, forDomain domain: String?) -> TrustEvaluation {
        let anchors = serverTrust.anchors  // nil: the engine's process-wide system store
        var result = ct_trust_result()
        let time = serverTrust.evaluationDate.map(TimeLimit.unixSeconds) ?? 0
        let rc = withDERArrays(serverTrust.certificates.map(\.derData)) { ders, lengths, count -> ct_code in
            guard let ders, let lengths else { return CT_E_INVALID_ARGUMENT }
            return ct_trust_evaluate(pointer, ders, lengths, count, domain, time, anchors?.pointer, &result)
        }
        let message = stringFromCCharArray(result.message)
        guard rc == CT_OK else {
            return .chainInvalid(ChainFailure(kind: .other, verifyError: 0, message: message))
        }
        switch UInt32(bitPattern: result.reason) {
        case CT_TLS_OK.rawValue:
            return .valid
        case CT_TLS_HOSTNAME_MISMATCH.rawValue:
            return .hostnameMismatch(host: domain ?? "")
        case CT_TLS_NO_PIN_MATCHED.rawValue:
            return .noPinMatched(reason: message)
        case CT_TLS_POLICY_INVALID.rawValue:
            return .policyInvalid(reason: message)
        default:
            return .chainInvalid(ChainFailure(problem: result.chain_problem, verifyError: result.verify_error,
                                              message: message))
        }
    }
}

/// The report handler and its queue, retained by the C policy (released by `release_ctx`).
private final class ReportSink: Sendable {
    let handler: @Sendable (PinFailureReport) -> Void
    let queue: DispatchQueue

    init(handler: @escaping @Sendable (PinFailureReport) -> Void, queue: DispatchQueue) {
        self.handler = handler
        self.queue = queue
    }
}

extension SecurityPolicy {
    /// Builds the engine's policy.
    /// - Throws: `TransferError.invalidRequest` for a malformed pin, pattern or certificate, or an
    ///   enforced host rule without a backup pin.
    func makeEnginePolicy() throws(TransferError) -> EngineTrustPolicy {
        try makeEnginePolicy(withReports: true)
    }

    func makeEnginePolicy(withReports: Bool) throws(TransferError) -> EngineTrustPolicy {
        var raw: OpaquePointer?
        guard ct_trust_policy_create(&raw) == CT_OK, let raw else {
            throw TransferError(.internalError, "out of memory building a trust policy")
        }
        let policy = EngineTrustPolicy(pointer: raw)  // releases on every exit below
        _ = ct_trust_policy_set_mode(raw, pinningMode.engineValue)
        _ = ct_trust_policy_set_allow_invalid(raw, allowInvalidCertificates ? 1 : 0)
        _ = ct_trust_policy_set_validates_domain(raw, validatesDomainName ? 1 : 0)
        // Sorted so two builds of one policy are identical.
        for certificate in pinnedCertificates.sorted(by: { $0.derData.lexicographicallyPrecedes($1.derData) }) {
            let rc = certificate.derData.withUnsafeBytes { bytes -> ct_code in
                guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
                    return CT_E_INVALID_ARGUMENT
                }
                return ct_trust_policy_add_pinned_certificate(raw, base, bytes.count)
            }
            guard rc == CT_OK else { throw TransferError(.invalidRequest, "cannot pin \(certificate)") }
        }
        for hash in pinnedPublicKeyHashes.sorted() {
            guard ct_trust_policy_add_pinned_spki(raw, hash) == CT_OK else {
                throw TransferError(.invalidRequest, "pin \"\(hash)\" is not the base64 of a SHA-256 digest")
            }
        }
        if let pinPolicy {
            for rule in pinPolicy.rules {
                try Self.add(rule, to: raw)
            }
            if withReports, let handler = pinPolicy.reportHandler {
                let sink = Unmanaged.passRetained(ReportSink(handler: handler, queue: pinPolicy.reportQueue))
                _ = ct_trust_policy_set_report_handler(
                    raw,
                    { ctx, report in
                        guard let ctx else { return }
                        // Loop thread, mid-handshake: copy, hop, return.
                        let sink = Unmanaged<ReportSink>.fromOpaque(ctx).takeUnretainedValue()
                        let value = PinFailureReport(report.pointee)
                        sink.queue.async { sink.handler(value) }
                    },
                    sink.toOpaque(),
                    { ctx in
                        // Balances passRetained above; runs once when the C policy is freed.
                        if let ctx { Unmanaged<ReportSink>.fromOpaque(ctx).release() }
                    })
            }
        }
        return policy
    }

    private static func add(_ rule: HostPinPolicy, to raw: OpaquePointer) throws(TransferError) {
        var message = [CChar](repeating: 0, count: 256)
        let rc = withCStringArray(rule.patterns) { patterns in
            withCStringArray(rule.exclusions) { exclusions in
                withCStringArray(rule.publicKeyHashes) { hashes in
                    withDERArrays(rule.certificates.map(\.derData)) { ders, lengths, count in
                        var spec = ct_host_rule_spec()
                        spec.patterns = patterns
                        spec.pattern_count = rule.patterns.count
                        spec.include_subdomains = rule.includeSubdomains ? 1 : 0
                        spec.exclusions = exclusions
                        spec.exclusion_count = rule.exclusions.count
                        spec.spki_sha256 = hashes
                        spec.spki_count = rule.publicKeyHashes.count
                        spec.cert_ders = ders
                        spec.cert_lengths = lengths
                        spec.cert_count = count
                        spec.expires_unix = rule.expiration.map(TimeLimit.unixSeconds) ?? 0
                        spec.report_only = rule.enforcement == .reportOnly ? 1 : 0
                        return ct_trust_policy_add_host_rule(raw, &spec, &message)
                    }
                }
            }
        }
        guard rc == CT_OK else {
            throw TransferError(.invalidRequest, "pin policy: " + string(fromCBuffer: message))
        }
    }
}

extension PinFailureReport {
    /// Copies a report the engine handed over (valid only during the callback).
    init(_ report: ct_pin_report) {
        var chain: [Certificate] = []
        for index in 0..<report.chain_count {
            let data = Data(bytes: report.chain_ders[index], count: report.chain_lengths[index])
            if let certificate = try? Certificate(derData: data) { chain.append(certificate) }
        }
        var pins: [String] = []
        for index in 0..<report.pin_count { pins.append(String(cString: report.pins[index])) }
        self.init(host: String(cString: report.host), port: Int(report.port), pattern: String(cString: report.pattern),
                  chain: chain, pins: pins, date: Date(timeIntervalSince1970: TimeInterval(report.time_unix)),
                  expiration: report.expires_unix == 0
                      ? nil : Date(timeIntervalSince1970: TimeInterval(report.expires_unix)),
                  enforced: report.enforced != 0)
    }
}

extension PinningMode {
    var engineValue: ct_pinning_mode {
        switch self {
        case .none: CT_PINNING_NONE
        case .publicKey: CT_PINNING_PUBLIC_KEY
        case .certificate: CT_PINNING_CERTIFICATE
        }
    }
}
