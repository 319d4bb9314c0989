import FoundationEssentials

/// What a server presented: its certificate chain and the host it was reached as.
///
/// Built by the engine for challenges, or by hand (from files, for tests and tools) to ask a
/// ``SecurityPolicy`` about a chain without a connection.
public struct ServerTrust: Sendable, Hashable {
    /// The chain as sent, leaf first.
    public var certificates: [Certificate]
    /// The host the connection was for (informational; ``SecurityPolicy/evaluate(serverTrust:forDomain:)``
    /// checks the domain it is given).
    public var host: String?
    /// The port the connection was for (set by the engine for challenges;
    /// informational like ``host``).
    public var port: Int?
    /// The time the chain is validated at; `nil` means now. Tests set it so fixed certificates
    /// keep their verdict as clocks move.
    public var evaluationDate: Date?
    /// The anchors for policies that validate against anchors; `nil` means the system's.
    public var anchors: TrustAnchors?

    /// A trust for `certificates` (leaf first), for tests and ``SecurityPolicy/evaluate(serverTrust:forDomain:)``.
    public init(certificates: [Certificate], host: String? = nil, evaluationDate: Date? = nil,
                anchors: TrustAnchors? = nil) {
        self.certificates = certificates
        self.host = host
        self.evaluationDate = evaluationDate
        self.anchors = anchors
    }

    /// The leaf (first) certificate.
    public var leaf: Certificate? { certificates.first }

    public static func == (lhs: ServerTrust, rhs: ServerTrust) -> Bool {
        lhs.certificates == rhs.certificates && lhs.host == rhs.host && lhs.evaluationDate == rhs.evaluationDate
            && lhs.anchors === rhs.anchors
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(certificates)
        hasher.combine(host)
    }
}
