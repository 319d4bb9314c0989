import CTransfer
import Foundation

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
        var info = ct_cert_info()
        var pin = [CChar](repeating: 0, count: 64)
        let ok = derData.withUnsafeBytes { raw -> Bool in
            guard let base = raw.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return false }
            return ct_cert_info(base, raw.count, &info) == CT_OK
                && ct_cert_spki_sha256(base, raw.count, &pin, pin.count) == CT_OK
        }
        guard ok else {
            throw TransferError(.invalidRequest, "the data is not a DER certificate (\(derData.count) bytes)")
        }
        self.derData = derData
        subject = Self.string(&info.subject)
        issuer = Self.string(&info.issuer)
        notBefore = Date(timeIntervalSince1970: TimeInterval(info.not_before_unix))
        notAfter = Date(timeIntervalSince1970: TimeInterval(info.not_after_unix))
        isCertificateAuthority = info.is_ca != 0
        isSelfSigned = info.self_signed != 0
        publicKeySHA256 = String(decoding: pin.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Every certificate in PEM data (other PEM blocks are skipped), or the one certificate of DER data.
    /// - Throws: `TransferError.invalidRequest` when there is none.
    public static func certificates(fromPEM data: Data) throws(TransferError) -> [Certificate] {
        var list = ct_der_list()
        let rc = data.withUnsafeBytes { raw -> ct_code in
            guard let base = raw.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return CT_E_INVALID_ARGUMENT }
            return ct_cert_parse(base, raw.count, &list)
        }
        guard rc == CT_OK else {
            throw TransferError(.invalidRequest, "no certificate found in \(data.count) bytes of PEM/DER")
        }
        defer { ct_der_list_free(&list) }
        var result: [Certificate] = []
        for index in 0..<list.count {
            guard let der = list.ders?[index], let length = list.lengths?[index] else { continue }
            result.append(try Certificate(derData: Data(bytes: der, count: length)))
        }
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

    private static func string<T>(_ tuple: inout T) -> String {
        withUnsafeBytes(of: &tuple) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
    }
}

/// Calls `body` with C arrays of pointers and lengths over `ders` (valid only during the call).
/// `body` gets nil pointers when `ders` is empty.
func withDERArrays<R>(
    _ ders: [Data],
    _ body: (UnsafePointer<UnsafePointer<UInt8>>?, UnsafePointer<Int>?, Int) -> R
) -> R {
    var joined = [UInt8]()
    var offsets: [Int] = []
    var lengths: [Int] = []
    for der in ders {
        offsets.append(joined.count)
        lengths.append(der.count)
        joined.append(contentsOf: der)
    }
    guard !joined.isEmpty else { return body(nil, nil, 0) }
    return joined.withUnsafeBufferPointer { bytes in
        guard let base = bytes.baseAddress else { return body(nil, nil, 0) }
        let pointers = offsets.map { base + $0 }
        return pointers.withUnsafeBufferPointer { ptrs in
            lengths.withUnsafeBufferPointer { lens in
                body(ptrs.baseAddress, lens.baseAddress, ders.count)
            }
        }
    }
}

/// Calls `body` with a C array of C strings (valid only during the call); nil when empty.
func withCStringArray<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>>?) -> R) -> R {
    var pointers: [UnsafePointer<CChar>] = []
    func nest(_ index: Int) -> R {
        if index == strings.count {
            return pointers.withUnsafeBufferPointer { body(strings.isEmpty ? nil : $0.baseAddress) }
        }
        return strings[index].withCString { pointer in
            pointers.append(pointer)
            return nest(index + 1)
        }
    }
    return nest(0)
}

/// The NUL-terminated text in a C buffer filled by the engine.
func string(fromCBuffer buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
