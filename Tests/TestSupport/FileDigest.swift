import CTransfer
import Foundation

/// SHA-256 digests as lowercase hex, computed by the engine's `ct_digest` (OpenSSL).
public enum FileDigest {
    /// The digest of the file at `url`, read in large blocks.
    ///
    /// - Throws: `TestSupportError` with the errno text when the file cannot be read.
    public static func sha256(of url: URL) throws -> String {
        var digest = [UInt8](repeating: 0, count: Int(CT_SHA256_LENGTH))
        var failure: Int32 = 0
        let code = digest.withUnsafeMutableBufferPointer { out in
            ct_sha256_file(url.path, out.baseAddress!, &failure)
        }
        guard code == CT_OK else {
            if failure != 0 {
                throw TestSupportError.posix("sha256 of \(url.path)", failure)
            }
            throw TestSupportError("sha256 of \(url.path): \(code)")
        }
        return hex(digest)
    }

    /// The digest of `data`.
    public static func sha256(_ data: Data) -> String {
        let hasher = SHA256Hasher()
        hasher.update(data)
        return hasher.finalize()
    }

    /// The digest of `bytes`.
    public static func sha256(_ bytes: [UInt8]) -> String {
        let hasher = SHA256Hasher()
        bytes.withUnsafeBytes { hasher.update($0) }
        return hasher.finalize()
    }

    /// Lowercase hex of `bytes`.
    public static func hex<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// A running SHA-256 over `ct_sha256`. One thread at a time; not shared.
public final class SHA256Hasher {
    private let context: OpaquePointer

    /// Creates a hasher. Allocation failure of a few hundred bytes is not survivable in tests.
    public init() {
        var context: OpaquePointer?
        let code = ct_sha256_create(&context)
        guard code == CT_OK, let context else {
            // Invariant: only an out-of-memory OpenSSL or one without SHA-256 gets here.
            fatalError("ct_sha256_create failed: \(code)")
        }
        self.context = context
    }

    deinit {
        ct_sha256_destroy(context)
    }

    /// Feeds `bytes` (borrowed for the call only).
    public func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        _ = ct_sha256_update(context, base, bytes.count)
    }

    /// Feeds `data`.
    public func update(_ data: Data) {
        data.withUnsafeBytes { update($0) }
    }

    /// Returns the hex digest of everything fed so far and starts over.
    public func finalize() -> String {
        var digest = [UInt8](repeating: 0, count: Int(CT_SHA256_LENGTH))
        _ = digest.withUnsafeMutableBufferPointer { ct_sha256_final(context, $0.baseAddress!) }
        return FileDigest.hex(digest)
    }
}

@available(*, unavailable)
extension SHA256Hasher: Sendable {}
