import CTransfer
import FoundationEssentials

/// The OpenSSL side of ``Certificate``: parsing DER and splitting PEM (ct_cert.h).
extension Certificate {
    /// OpenSSL's reading of `derData` (`ct_cert_info` and the SPKI pin); nil
    /// when the bytes are not exactly one DER certificate.
    init?(parsingDER derData: Data) {
        var info = ct_cert_info()
        var pin = [CChar](repeating: 0, count: 64)
        let ok = derData.withUnsafeBytes { raw -> Bool in
            guard let base = raw.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return false }
            return ct_cert_info(base, raw.count, &info) == CT_OK
                && ct_cert_spki_sha256(base, raw.count, &pin, pin.count) == CT_OK
        }
        guard ok else { return nil }
        self.derData = derData
        subject = stringFromCCharArray(info.subject)
        issuer = stringFromCCharArray(info.issuer)
        notBefore = Date(timeIntervalSince1970: TimeInterval(info.not_before_unix))
        notAfter = Date(timeIntervalSince1970: TimeInterval(info.not_after_unix))
        isCertificateAuthority = info.is_ca != 0
        isSelfSigned = info.self_signed != 0
        publicKeySHA256 = string(fromCBuffer: pin)
    }

    /// The DER bytes of every certificate in PEM data (other PEM blocks are
    /// skipped), or of the one certificate of DER data; nil when there is none.
    static func openSSLDERs(inPEM data: Data) -> [Data]? {
        var list = ct_der_list()
        let rc = data.withUnsafeBytes { raw -> ct_code in
            guard let base = raw.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return CT_E_INVALID_ARGUMENT }
            return ct_cert_parse(base, raw.count, &list)
        }
        guard rc == CT_OK else { return nil }
        defer { ct_der_list_free(&list) }
        var ders: [Data] = []
        for index in 0..<list.count {
            guard let der = list.ders?[index], let length = list.lengths?[index] else { continue }
            ders.append(Data(bytes: der, count: length))
        }
        return ders
    }
}
