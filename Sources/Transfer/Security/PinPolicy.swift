import Dispatch
import FoundationEssentials

/// Pins for one group of hosts, beyond AFNetworking (HPKP-style, checked in the handshake).
///
/// Patterns: `"example.com"` is that host only (and every subdomain with `includeSubdomains`);
/// `"*.example.com"` is exactly one more label (any depth with `includeSubdomains`). Matching
/// ignores case and a trailing dot. `exclusions` use the same syntax and win over `patterns`.
public struct HostPinPolicy: Sendable, Hashable {
    /// What happens when a chain matches none of the rule's pins.
    public enum Enforcement: Sendable, Hashable {
        /// A chain without a pinned key or certificate is refused.
        case enforce
        /// The connection proceeds; the mismatch goes to ``PinPolicy/reportHandler``.
        case reportOnly
    }

    /// Host names the rule applies to; `*.example.com` matches one label.
    public var patterns: [String]
    /// Whether the rule also applies to every subdomain of its patterns.
    public var includeSubdomains: Bool
    /// Host names the rule does not apply to, even when a pattern matches.
    public var exclusions: [String]
    /// base64 SHA-256 of SubjectPublicKeyInfo (``Certificate/publicKeySHA256``); a `sha256//`
    /// prefix is accepted.
    public var publicKeyHashes: [String]
    /// Certificates of which one must be in the chain.
    public var certificates: [Certificate]
    /// After this date the rule no longer applies (the host is then unpinned).
    public var expiration: Date?
    /// Refuse a mismatch, or only report it.
    public var enforcement: Enforcement

    /// - Note: An enforced rule needs at least two pins (keys + certificates): one of them a
    ///   backup, so a key rotation cannot lock clients out. ``validate()`` and
    ///   ``SessionManager/setSecurityPolicy(_:)`` check it.
    public init(patterns: [String], includeSubdomains: Bool = false, exclusions: [String] = [],
                publicKeyHashes: [String] = [], certificates: [Certificate] = [], expiration: Date? = nil,
                enforcement: Enforcement = .enforce) {
        self.patterns = patterns
        self.includeSubdomains = includeSubdomains
        self.exclusions = exclusions
        self.publicKeyHashes = publicKeyHashes
        self.certificates = certificates
        self.expiration = expiration
        self.enforcement = enforcement
    }

    /// One host pattern.
    public init(host: String, includeSubdomains: Bool = false, publicKeyHashes: [String] = [],
                certificates: [Certificate] = [], expiration: Date? = nil, enforcement: Enforcement = .enforce) {
        self.init(patterns: [host], includeSubdomains: includeSubdomains, publicKeyHashes: publicKeyHashes,
                  certificates: certificates, expiration: expiration, enforcement: enforcement)
    }

    /// Checks patterns, pins and the backup-pin rule.
    /// - Throws: `TransferError.invalidRequest` with the engine's sentence.
    public func validate() throws(TransferError) {
        var policy = SecurityPolicy.defaultPolicy
        policy.pinPolicy = PinPolicy(rules: [self])
        _ = try policy.makeEnginePolicy()
    }
}

/// A set of per-host pin rules and where their failures are reported.
public struct PinPolicy: Sendable {
    /// The rules. Of those that match a host and have not expired, the most specific applies
    /// (TrustKit's precedence): an exact host beats `*.example.com`, which beats include-subdomains
    /// on a parent (the longer parent first); on a tie, the earlier rule.
    public var rules: [HostPinPolicy]
    /// Called for every pin mismatch seen in a handshake (enforced and report-only rules), on
    /// `reportQueue`. Not called by ``SecurityPolicy/evaluate(serverTrust:forDomain:)``.
    public var reportHandler: (@Sendable (PinFailureReport) -> Void)?
    /// Where ``reportHandler`` runs; default: a private serial queue.
    public var reportQueue: DispatchQueue
    /// When set, the session POSTs each report as JSON (``PinFailureReport/jsonData()``)
    /// to this http(s) URL, at most one per host and pattern every ``reportInterval``.
    public var reportURL: URL?
    /// Minimum seconds between two reports POSTed for the same host and pattern.
    public var reportInterval: TimeInterval = 60

    /// A policy of `rules`; reports go to `reportHandler` on `reportQueue`
    /// and, with `reportURL`, are POSTed there.
    public init(rules: [HostPinPolicy], reportQueue: DispatchQueue? = nil, reportURL: URL? = nil,
                reportHandler: (@Sendable (PinFailureReport) -> Void)? = nil) {
        self.rules = rules
        self.reportQueue = reportQueue ?? DispatchQueue(label: "transfer.pin-report")
        self.reportURL = reportURL
        self.reportHandler = reportHandler
    }
}

/// A per-host pin rule did not match a server's chain.
public struct PinFailureReport: Sendable, Hashable {
    /// The host the connection was for.
    public var host: String
    /// 0 when unknown.
    public var port: Int
    /// The rule's first pattern.
    public var pattern: String
    /// What the pins were checked against: the validated chain, then the other presented certificates.
    public var chain: [Certificate]
    /// The rule's pins as base64 SPKI SHA-256 (certificate pins by their key).
    public var pins: [String]
    /// When the mismatch was seen.
    public var date: Date
    /// The rule's expiration, if it has one.
    public var expiration: Date?
    /// False for report-only rules (the connection went ahead).
    public var enforced: Bool

    /// A report, for tests and for report handlers of your own.
    public init(host: String, port: Int, pattern: String, chain: [Certificate], pins: [String], date: Date,
                expiration: Date?, enforced: Bool) {
        self.host = host
        self.port = port
        self.pattern = pattern
        self.chain = chain
        self.pins = pins
        self.date = date
        self.expiration = expiration
        self.enforced = enforced
    }

    /// A JSON body in the shape of an HPKP violation report (RFC 7469 §3), for POSTing to a
    /// report URL.
    public func jsonData() -> Data {
        // ISO 8601 in UTC, "2026-01-02T03:04:05Z".
        let format = Date.ISO8601FormatStyle()
        var object: [String: JSONValue] = [
            "date-time": .string(date.formatted(format)),
            "hostname": .string(host),
            "port": .int(port),
            "noted-hostname": .string(pattern),
            "include-subdomains": .bool(pattern.hasPrefix("*.")),
            "served-certificate-chain": .array(chain.map { .string(Self.pem($0)) }),
            "known-pins": .array(pins.map { .string("pin-sha256=\"\($0)\"") }),
            "enforced": .bool(enforced),
        ]
        if let expiration { object["effective-expiration-date"] = .string(expiration.formatted(format)) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(JSONValue.object(object))) ?? Data()
    }

    private static func pem(_ certificate: Certificate) -> String {
        let base64 = certificate.derData.base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        return "-----BEGIN CERTIFICATE-----\n\(base64)\n-----END CERTIFICATE-----\n"
    }
}
