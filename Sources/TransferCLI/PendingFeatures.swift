import Foundation
import Transfer

/// Flags whose library part is built on other branches (downloads,
/// security, serialization). Each is parsed and validated here and reaches
/// the runner through this one value, so wiring the library API later means
/// changing this file and the few call sites that read it.
///
/// Present state:
/// - `--limit-rate`: the public API has only a session-wide limit, so each
///   transfer runs in its own session with that limit (at the cost of one
///   engine thread per running transfer). `--limit-rate-total` with several
///   URLs becomes an even per-transfer share (RunPlan), because the engine
///   enforces the session-wide limit for a single transfer only.
/// - `--segments N>1`: one connection is used (a note says so unless -s).
/// - `--sha256`: not supported yet (needs the streaming digest).
/// - `--resume`: not supported yet (needs the journal of the downloads branch).
/// - `--pinning-mode`, `--pin-cert`, `--pin-sha256`, `-k`,
///   `--allow-invalid-certificates`, `--no-validate-domain`: a
///   ``SecurityPolicy`` installed on the session.
/// - `--serializer`: the library's response serializers.
struct PendingFeatures: Sendable {
    enum Serializer: String, Sendable {
        case data, json, xml, plist, text
    }

    var perTransferRate: Int64?
    var segments: Int
    /// The server-trust flags as the library's policy (nil: the default policy).
    var securityPolicy: SecurityPolicy?
    var serializer: Serializer?

    init(options: Options, perTransferRate: Int64?, jobCount: Int, output: OutputTarget) throws(Failure) {
        self.perTransferRate = perTransferRate

        guard options.segments >= 1 else { throw Failure(.usage, "--segments: must be at least 1") }
        segments = options.segments

        if let digest = options.sha256 {
            guard Parse.sha256Hex(digest) != nil else {
                throw Failure(.usage, "--sha256: expected 64 hex digits")
            }
            throw Self.notYet("--sha256", "the streaming digest of the downloads branch")
        }
        if options.resume {
            throw Self.notYet("--resume", "the resume journal of the downloads branch")
        }

        securityPolicy = try Self.securityPolicy(options)

        if let name = options.serializer {
            guard let kind = Serializer(rawValue: name) else {
                throw Failure(.usage, "--serializer: expected data, json, xml, plist or text")
            }
            serializer = kind
        }
    }

    /// The policy of the trust flags, nil when none was given.
    private static func securityPolicy(_ options: Options) throws(Failure) -> SecurityPolicy? {
        let mode: PinningMode
        switch options.pinningMode {
        case "none": mode = .none
        case "public-key": mode = .publicKey
        case "certificate": mode = .certificate
        default: throw Failure(.usage, "--pinning-mode: expected none, public-key or certificate")
        }
        let pinsGiven = !options.pinCerts.isEmpty || !options.pinSHA256.isEmpty
        let relaxed = options.insecure || options.allowInvalidCertificates || options.noValidateDomain
        guard mode != .none || pinsGiven || relaxed else { return nil }
        if mode == .none && pinsGiven {
            throw Failure(.usage, "--pin-cert and --pin-sha256 need --pinning-mode public-key or certificate")
        }
        if mode == .certificate && options.pinCerts.isEmpty {
            throw Failure(.usage, "--pinning-mode certificate needs at least one --pin-cert")
        }
        if mode == .publicKey && !pinsGiven {
            throw Failure(.usage, "--pinning-mode public-key needs --pin-sha256 or --pin-cert")
        }
        var certificates = Set<Certificate>()
        for file in options.pinCerts {
            do throws(TransferError) {
                certificates.formUnion(try Certificate.certificates(contentsOf: URL(fileURLWithPath: file)))
            } catch {
                throw Failure(.invalidRequest, "--pin-cert \(file): \(error.message)")
            }
        }
        var policy = SecurityPolicy(pinningMode: mode, pinnedCertificates: certificates)
        for hash in options.pinSHA256 {
            let value = hash.hasPrefix("sha256//") ? String(hash.dropFirst("sha256//".count)) : hash
            guard let raw = Data(base64Encoded: value), raw.count == 32 else {
                throw Failure(.usage, "--pin-sha256: expected the base64 of 32 bytes, got \(hash.debugDescription)")
            }
            policy.pinnedPublicKeyHashes.insert(value)
        }
        if options.insecure || options.allowInvalidCertificates { policy.allowInvalidCertificates = true }
        if options.insecure || options.noValidateDomain { policy.validatesDomainName = false }
        do throws(TransferError) {
            try policy.validate()
        } catch {
            // e.g. --allow-invalid-certificates while validating the domain, without pins.
            throw Failure(.usage, "the trust flags make no valid policy: \(error.message)")
        }
        return policy
    }

    private static func notYet(_ what: String, _ needs: String) -> Failure {
        Failure(.usage, "\(what) is not supported yet (waiting for \(needs))")
    }

    /// Checks a body with the library's response serializer for
    /// `--serializer` (content type and syntax; the status was checked by
    /// --accept-status already, so every status passes here).
    /// - Returns: the bytes to print instead of the body (json: the parsed
    ///   value re-encoded; text: the decoded text as UTF-8), or nil to print
    ///   the body as received.
    func serialize(_ body: Data, response: HTTPResponse) throws(Failure) -> Data? {
        guard let serializer else { return nil }
        let anyStatus = IndexSet(integersIn: 100..<1000)
        do throws(TransferError) {
            switch serializer {
            case .data:
                var check = HTTPResponseSerializer()
                check.acceptableStatusCodes = anyStatus
                _ = try check.serialize(response: response, data: body, error: nil)
                return nil
            case .json:
                var check = JSONResponseSerializer()
                check.acceptableStatusCodes = anyStatus
                guard let value = try check.serialize(response: response, data: body, error: nil) else { return Data() }
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                do {
                    var encoded = try encoder.encode(value)
                    encoded.append(0x0A)
                    return encoded
                } catch {
                    throw TransferError(.serializationFailed, "cannot re-encode the JSON value: \(error)")
                }
            case .xml:
                var check = XMLDocumentResponseSerializer()
                check.acceptableStatusCodes = anyStatus
                _ = try check.serialize(response: response, data: body, error: nil)
                return nil
            case .plist:
                var check = PropertyListResponseSerializer()
                check.acceptableStatusCodes = anyStatus
                _ = try check.serialize(response: response, data: body, error: nil)
                return nil
            case .text:
                var check = StringResponseSerializer()
                check.acceptableStatusCodes = anyStatus
                return Data(try check.serialize(response: response, data: body, error: nil).utf8)
            }
        } catch {
            throw Failure(error)
        }
    }
}

