import Dispatch
import FoundationEssentials
import Glibc
import Transfer

/// The flags that map onto the library's feature APIs (downloads,
/// security, serialization), parsed and validated in one value the runner
/// reads.
///
/// How each reaches the library:
/// - `--limit-rate`: ``DownloadOptions/speedLimit`` for downloads,
///   ``TransferTask/setSpeedLimit(receive:send:)`` for the others;
///   `--limit-rate-total` is the session's limit and, with several URLs, an
///   even per-transfer share as well (RunPlan), because the engine enforces
///   the session-wide limit for a single transfer only.
/// - `--segments N`: ``SessionManager/segmentedDownload(with:to:segments:options:progress:completionHandler:)``
///   for bodiless downloads (falls back to one connection without ranges).
/// - `--sha256`, `--resume`: ``DownloadOptions`` (checked while streaming;
///   part file and journal kept on interruption).
/// - `--max-filesize`: ``DownloadOptions/maximumFileSize`` for downloads,
///   ``SessionConfiguration/maximumResponseBodySize`` for bodies kept in
///   memory (RunPlan); exceeding it is exit 11 (an oversized body is a
///   malformed response to us; curl's own code, 63, has no class here).
/// - `--pinning-mode`, `--pin-cert`, `--pin-sha256`, `-k`,
///   `--allow-invalid-certificates`, `--no-validate-domain`: a
///   ``SecurityPolicy`` installed on the session.
/// - `--serializer`: the library's response serializers.
struct FeatureOptions: Sendable {
    enum Serializer: String, Sendable {
        case data, json, xml, plist, text
    }

    var perTransferRate: Int64?
    var segments: Int
    /// The server-trust flags as the library's policy (nil: the default policy).
    var securityPolicy: SecurityPolicy?
    var serializer: Serializer?
    var expectedSHA256: String?
    var resume: Bool
    /// --max-filesize in bytes; 0: no limit.
    var maximumFileSize: Int64 = 0

    /// The options of every bodiless download.
    var downloadOptions: DownloadOptions {
        var options = DownloadOptions(resumable: resume, expectedSHA256: expectedSHA256,
                                      speedLimit: perTransferRate ?? 0)
        options.maximumFileSize = maximumFileSize
        return options
    }

    init(options: Options, perTransferRate: Int64?, jobCount: Int, output: OutputTarget) throws(Failure) {
        self.perTransferRate = perTransferRate

        guard options.segments >= 1 else {
            throw Failure(.usage, "--segments: must be at least 1, got \(options.segments)")
        }
        guard options.segments <= 64 else { throw Failure(.usage, "--segments: at most 64") }
        segments = options.segments

        if let digest = options.sha256 {
            guard let hex = Parse.sha256Hex(digest) else {
                throw Failure(.usage, "--sha256: expected 64 hex digits")
            }
            guard jobCount == 1 else { throw Failure(.usage, "--sha256 takes one URL") }
            expectedSHA256 = hex
        }
        resume = options.resume
        if let text = options.maxFilesize {
            guard let size = Parse.rate(text) else { throw Failure(.usage, "--max-filesize: not a size: \(text)") }
            maximumFileSize = size
        }
        if resume {
            switch output {
            case .file, .remoteName: break
            case .stdout, .discard: throw Failure(.usage, "--resume needs -o, -O or --output-dir")
            case .device(let path): throw Failure(.usage, "--resume needs a regular file; \(path) is not one")
            }
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

    /// Checks a body with the library's response serializer for
    /// `--serializer` (content type and syntax; the status was checked by
    /// --accept-status already, so every status passes here).
    /// - Returns: the bytes to print instead of the body (json: the parsed
    ///   value re-encoded; text: the decoded text as UTF-8), or nil to print
    ///   the body as received.
    func serialize(_ body: Data, response: HTTPResponse) throws(Failure) -> Data? {
        guard let serializer else { return nil }
        let anyStatus = StatusCodeSet(100..<1000)
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
                var check = HTTPResponseSerializer(acceptableContentTypes: BodyCheck.xmlContentTypes)
                check.acceptableStatusCodes = anyStatus
                try BodyCheck.run(check, response: response, body: body, what: "the body is not well-formed XML") {
                    try XMLWellFormedness.check($0)
                }
                return nil
            case .plist:
                var check = HTTPResponseSerializer(acceptableContentTypes: BodyCheck.propertyListContentTypes)
                check.acceptableStatusCodes = anyStatus
                try BodyCheck.run(
                    check, response: response, body: body, what: "the body is not a valid property list",
                    parse: BodyCheck.parsePropertyList)
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

