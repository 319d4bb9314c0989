import Foundation
import Transfer

/// Flags whose library part is built on other branches (downloads,
/// security, serialization). Each is parsed and validated here and reaches
/// the runner through this one value, so wiring the library API later means
/// changing this file and the few call sites that read it.
///
/// Present state:
/// - `--limit-rate`: the public API has only a session-wide limit, so each
///   transfer runs in its own session with that limit (exact, at the cost of
///   one engine thread per running transfer). With `--limit-rate-total` as
///   well and several URLs: not supported yet.
/// - `--segments N>1`: one connection is used (a note says so unless -s).
/// - `--sha256`: not supported yet (needs the streaming digest).
/// - `--resume`: not supported yet (needs the journal of the downloads branch).
/// - pinning, `--pin-*`, `-k`, `--allow-invalid-certificates`,
///   `--no-validate-domain`: not supported yet (needs SecurityPolicy).
/// - `--serializer`: data, json and text are checked here with Foundation;
///   xml and plist are not supported yet (need the response serializers).
struct PendingFeatures: Sendable {
    enum Serializer: String, Sendable {
        case data, json, xml, plist, text
    }

    var perTransferRate: Int64?
    var segments: Int
    var serializer: Serializer?

    init(options: Options, perTransferRate: Int64?, jobCount: Int, output: OutputTarget) throws(Failure) {
        self.perTransferRate = perTransferRate
        if perTransferRate != nil, options.limitRateTotal != nil, jobCount > 1 {
            throw Self.notYet("--limit-rate together with --limit-rate-total", "a per-transfer rate in the library")
        }

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

        switch options.pinningMode {
        case "none", "public-key", "certificate": break
        default: throw Failure(.usage, "--pinning-mode: expected none, public-key or certificate")
        }
        for file in options.pinCerts where !FileManager.default.isReadableFile(atPath: file) {
            throw Failure(.invalidRequest, "cannot read --pin-cert \(file)")
        }
        if options.pinningMode != "none" || !options.pinCerts.isEmpty || !options.pinSHA256.isEmpty {
            throw Self.notYet("certificate pinning", "SecurityPolicy (security branch)")
        }
        if options.insecure || options.allowInvalidCertificates || options.noValidateDomain {
            throw Self.notYet(options.insecure ? "--insecure" : "relaxed certificate checks",
                              "SecurityPolicy (security branch)")
        }

        if let name = options.serializer {
            guard let kind = Serializer(rawValue: name) else {
                throw Failure(.usage, "--serializer: expected data, json, xml, plist or text")
            }
            if kind == .xml || kind == .plist {
                throw Self.notYet("--serializer \(name)", "the response serializers (serialization branch)")
            }
            serializer = kind
        }
    }

    private static func notYet(_ what: String, _ needs: String) -> Failure {
        Failure(.usage, "\(what) is not supported yet (waiting for \(needs))")
    }

    /// Checks and re-encodes a body per `--serializer` (data, json, text).
    /// - Returns: the bytes to print instead of the body (json), or nil to
    ///   print the body as received.
    func serialize(_ body: Data, response: HTTPResponse) throws(Failure) -> Data? {
        guard let serializer else { return nil }
        let mime = response.mimeType ?? ""
        switch serializer {
        case .data, .xml, .plist:
            return nil
        case .text:
            guard mime.hasPrefix("text/") || mime.isEmpty else {
                throw Failure(.content, "content type \(mime) is not text")
            }
            guard String(validatingUTF8Data: body) != nil else {
                throw Failure(.content, "the body is not valid UTF-8 text")
            }
            return nil
        case .json:
            guard mime == "application/json" || mime == "text/json" || mime == "text/javascript"
                || mime.hasSuffix("+json")
            else {
                throw Failure(.content, "content type \(mime.isEmpty ? "(none)" : mime) is not JSON")
            }
            do {
                let value = try JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed])
                var encoded = try JSONSerialization.data(withJSONObject: value,
                                                         options: [.fragmentsAllowed, .prettyPrinted, .sortedKeys])
                encoded.append(0x0A)
                return encoded
            } catch {
                throw Failure(.content, "the body is not valid JSON: \(error.localizedDescription)")
            }
        }
    }
}

extension String {
    init?(validatingUTF8Data data: Data) {
        var valid = true
        let string = String(decoding: data, as: UTF8.self)
        // Decoding replaces invalid sequences with U+FFFD; compare lengths to spot them.
        if string.utf8.count != data.count { valid = false }
        guard valid else { return nil }
        self = string
    }
}
