import CTransfer
import Foundation
import TestSupport
import Testing

@Suite("ct_digest SHA-256")
struct DigestTests {
    /// Hashes `bytes` through the C API, fed in pieces of `piece` bytes.
    private func digest(_ bytes: [UInt8], piece: Int = .max) throws -> String {
        var context: OpaquePointer?
        #expect(ct_sha256_create(&context) == CT_OK)
        let ctx = try #require(context)
        defer { ct_sha256_destroy(ctx) }
        var offset = 0
        while offset < bytes.count {
            let n = min(piece, bytes.count - offset)
            let code = bytes.withUnsafeBytes { ct_sha256_update(ctx, $0.baseAddress! + offset, n) }
            #expect(code == CT_OK)
            offset += n
        }
        var out = [UInt8](repeating: 0, count: Int(CT_SHA256_LENGTH))
        #expect(out.withUnsafeMutableBufferPointer { ct_sha256_final(ctx, $0.baseAddress!) } == CT_OK)
        return FileDigest.hex(out)
    }

    @Test(
        "known vectors from FIPS 180-2 hash to their published digests",
        arguments: [
            ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            (
                "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
                "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
            ),
        ])
    func knownVectors(message: String, expected: String) throws {
        #expect(try digest(Array(message.utf8)) == expected)
    }

    @Test("one million 'a' fed in odd-sized pieces matches the FIPS digest")
    func millionAInPieces() throws {
        let bytes = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)

        let streamed = try digest(bytes, piece: 4099)

        #expect(streamed == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test("final resets the context so it can hash the next message")
    func finalResets() throws {
        var context: OpaquePointer?
        #expect(ct_sha256_create(&context) == CT_OK)
        let ctx = try #require(context)
        defer { ct_sha256_destroy(ctx) }
        var out = [UInt8](repeating: 0, count: 32)

        _ = "junk".withCString { ct_sha256_update(ctx, $0, 4) }
        _ = out.withUnsafeMutableBufferPointer { ct_sha256_final(ctx, $0.baseAddress!) }
        _ = "abc".withCString { ct_sha256_update(ctx, $0, 3) }
        #expect(out.withUnsafeMutableBufferPointer { ct_sha256_final(ctx, $0.baseAddress!) } == CT_OK)

        #expect(FileDigest.hex(out) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test("NULL data with a length is refused, NULL with zero length is accepted")
    func nullArguments() throws {
        var context: OpaquePointer?
        #expect(ct_sha256_create(&context) == CT_OK)
        let ctx = try #require(context)
        defer { ct_sha256_destroy(ctx) }

        #expect(ct_sha256_update(ctx, nil, 5) == CT_E_INVALID_ARGUMENT)
        #expect(ct_sha256_update(ctx, nil, 0) == CT_OK)
        ct_sha256_destroy(nil)
    }

    @Test("a file hashes to the digest of its bytes, across the 1 MiB read blocks")
    func fileDigest() throws {
        let directory = try TemporaryDirectory()
        let file = directory.file("body.bin")
        let data = DeterministicBytes.data(seed: 3, count: 3 * (1 << 20) + 17)
        try data.write(to: file)
        var out = [UInt8](repeating: 0, count: 32)
        var failure: Int32 = -1

        let code = out.withUnsafeMutableBufferPointer { ct_sha256_file(file.path, $0.baseAddress!, &failure) }

        #expect(code == CT_OK)
        #expect(failure == 0)
        #expect(FileDigest.hex(out) == FileDigest.sha256(data))
        #expect(try FileDigest.sha256(of: file) == DeterministicBytes.sha256(seed: 3, count: data.count))
    }

    @Test("a missing file fails with CT_E_SOURCE_IO and ENOENT")
    func missingFile() throws {
        let directory = try TemporaryDirectory()
        var out = [UInt8](repeating: 7, count: 32)
        var failure: Int32 = 0

        let code = out.withUnsafeMutableBufferPointer {
            ct_sha256_file(directory.file("absent").path, $0.baseAddress!, &failure)
        }

        #expect(code == CT_E_SOURCE_IO)
        #expect(failure == ENOENT)
        #expect(out == [UInt8](repeating: 7, count: 32))
        #expect(throws: TestSupportError.self) { try FileDigest.sha256(of: directory.file("absent")) }
    }
}
