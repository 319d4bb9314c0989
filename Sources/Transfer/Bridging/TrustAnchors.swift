import CTransfer
import FoundationEssentials

/// A set of trust anchors (root certificates) that chains are validated against.
///
/// Immutable once made, and safe to share: it wraps an OpenSSL `X509_STORE` that is only read
/// after creation (OpenSSL locks its internal lookups).
public final class TrustAnchors: @unchecked Sendable {
    /// Owned; freed in deinit. Never mutated after init (see the type's comment).
    let pointer: OpaquePointer

    private init(pointer: OpaquePointer) { self.pointer = pointer }

    /// The system's anchors (OpenSSL's default CA paths), loaded once per process.
    public static func system() throws(TransferError) -> TrustAnchors {
        var out: OpaquePointer?
        var message = [CChar](repeating: 0, count: 256)
        guard ct_trust_anchors_create_default(&out, &message) == CT_OK, let out else {
            throw TransferError(.tlsFailure, string(fromCBuffer: message))
        }
        return TrustAnchors(pointer: out)
    }

    /// Every certificate of a PEM bundle (or a DER file).
    public convenience init(pemFile url: URL) throws(TransferError) {
        var out: OpaquePointer?
        var message = [CChar](repeating: 0, count: 256)
        let rc = ct_trust_anchors_create_from_file(url.path, &out, &message)
        guard rc == CT_OK, let out else {
            throw TransferError(.invalidRequest, string(fromCBuffer: message), url: url)
        }
        self.init(pointer: out)
    }

    /// The given certificates.
    public convenience init(certificates: [Certificate]) throws(TransferError) {
        var out: OpaquePointer?
        var message = [CChar](repeating: 0, count: 256)
        let rc = withDERArrays(certificates.map(\.derData)) { ders, lengths, count in
            ct_trust_anchors_create_from_ders(ders, lengths, count, &out, &message)
        }
        guard rc == CT_OK, let out else {
            throw TransferError(.invalidRequest, string(fromCBuffer: message))
        }
        self.init(pointer: out)
    }

    deinit { ct_trust_anchors_destroy(pointer) }
}
