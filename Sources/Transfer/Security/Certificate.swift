import FoundationEssentials
import Glibc

/// An X.509 certificate, kept as its DER bytes (what AFNetworking's `pinnedCertificates` hold).
///
/// Two certificates are equal when their DER bytes are.
public struct Certificate: Hashable, Sendable, CustomStringConvertible {
    /// The DER encoding.
    public let derData: Data
    /// The subject, RFC 2253 (`CN=localhost,O=Example`).
    public let subject: String
    /// The issuer, RFC 2253.
    public let issuer: String
    /// The start of the certificate's validity.
    public let notBefore: Date
    /// The end of the certificate's validity.
    public let notAfter: Date
    /// True when basicConstraints says CA.
    public let isCertificateAuthority: Bool
    /// True when the certificate is issued by itself and its signature verifies with its own key.
    public let isSelfSigned: Bool
    /// base64 SHA-256 of the SubjectPublicKeyInfo: the HPKP / `sha256//` pin of its key.
    public let publicKeySHA256: String

    /// Wraps one DER certificate.
    /// - Throws: `TransferError.invalidRequest` when the bytes are not exactly one certificate.
    public init(derData: Data) throws(TransferError) {
        guard let parsed = Certificate(parsingDER: derData) else {   // Bridging/Certificate+OpenSSL.swift
            throw TransferError(.invalidRequest, "the data is not a DER certificate (\(derData.count) bytes)")
        }
        self = parsed
    }

    /// Every certificate in PEM data (other PEM blocks are skipped), or the one certificate of DER data.
    /// - Throws: `TransferError.invalidRequest` when there is none.
    public static func certificates(fromPEM data: Data) throws(TransferError) -> [Certificate] {
        guard let ders = openSSLDERs(inPEM: data) else {   // Bridging/Certificate+OpenSSL.swift
            throw TransferError(.invalidRequest, "no certificate found in \(data.count) bytes of PEM/DER")
        }
        var result: [Certificate] = []
        for der in ders { result.append(try Certificate(derData: der)) }
        return result
    }

    /// The certificates of a `.pem`, `.crt`, `.cer` or `.der` file (PEM or DER content).
    public static func certificates(contentsOf url: URL) throws(TransferError) -> [Certificate] {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw TransferError(.fileError, "cannot read certificate file \(url.path): \(error)", url: url)
        }
        do {
            return try certificates(fromPEM: data)
        } catch {
            throw TransferError(.invalidRequest, "\(url.path): \(error.message)", url: url)
        }
    }

    public var description: String { "Certificate(\(subject), issuer: \(issuer), pin: \(publicKeySHA256))" }

    public static func == (lhs: Certificate, rhs: Certificate) -> Bool { lhs.derData == rhs.derData }
    public func hash(into hasher: inout Hasher) { hasher.combine(derData) }
}
