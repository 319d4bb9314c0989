import CTransfer

/// The engine's SHA-256 of bytes in memory (`ct_sha256_*`, OpenSSL).
enum SHA256 {
    /// The digest of `bytes` as 64 lower-case hex digits; nil only when the
    /// OpenSSL in use cannot give SHA-256 (callers then keep nothing).
    static func hex(_ bytes: [UInt8]) -> String? {
        var context: OpaquePointer?
        guard ct_sha256_create(&context) == CT_OK, let context else { return nil }
        defer { ct_sha256_destroy(context) }
        var digest = [UInt8](repeating: 0, count: 32)
        let fed = bytes.withUnsafeBytes { ct_sha256_update(context, $0.baseAddress, $0.count) }
        guard fed == CT_OK, ct_sha256_final(context, &digest) == CT_OK else { return nil }
        let digits = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        text.reserveCapacity(64)
        for byte in digest {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0xf)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
