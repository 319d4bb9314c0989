import Foundation

/// The byte stream behind `/bytes/N?seed=S` and `NginxFixture.ensureFile(size:seed:)`.
///
/// Byte `i` of the stream for `seed` is byte `i % 8` (little-endian) of the 64-bit word
/// `splitmix64(seed + (i / 8 + 1) * golden)`. Any offset can be produced without generating
/// the bytes before it, which is what ranges and resumed downloads need.
public enum DeterministicBytes {
    private static let digests = Locked<[Key: String]>([:])

    private struct Key: Hashable {
        var seed: UInt64
        var count: Int
    }

    @inline(__always)
    static func word(seed: UInt64, index: UInt64) -> UInt64 {
        var z = seed &+ (index &+ 1) &* 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Fills `buffer` with the stream bytes starting at `offset`.
    public static func fill(_ buffer: UnsafeMutableRawBufferPointer, seed: UInt64, offset: Int) {
        guard let base = buffer.baseAddress, !buffer.isEmpty else { return }
        let count = buffer.count
        var position = 0
        var index = UInt64(offset / 8)
        // Unaligned head: the tail of one word.
        var skip = offset % 8
        while position < count {
            let value = word(seed: seed, index: index)
            index &+= 1
            if skip == 0 && count - position >= 8 {
                base.storeBytes(of: value.littleEndian, toByteOffset: position, as: UInt64.self)
                position += 8
                continue
            }
            var shifted = value >> UInt64(8 * skip)
            for _ in skip..<8 where position < count {
                base.storeBytes(of: UInt8(truncatingIfNeeded: shifted), toByteOffset: position, as: UInt8.self)
                shifted >>= 8
                position += 1
            }
            skip = 0
        }
    }

    /// `count` stream bytes starting at `offset`.
    public static func data(seed: UInt64, offset: Int = 0, count: Int) -> Data {
        var data = Data(count: count)
        data.withUnsafeMutableBytes { fill($0, seed: seed, offset: offset) }
        return data
    }

    /// The hex SHA-256 of the first `count` bytes of the stream (memoised).
    public static func sha256(seed: UInt64, count: Int) -> String {
        let key = Key(seed: seed, count: count)
        if let known = digests.withLock({ $0[key] }) {
            return known
        }
        let hasher = SHA256Hasher()
        let block = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { block.deallocate() }
        var done = 0
        while done < count {
            let n = min(block.count, count - done)
            let part = UnsafeMutableRawBufferPointer(rebasing: block[0..<n])
            fill(part, seed: seed, offset: done)
            hasher.update(UnsafeRawBufferPointer(part))
            done += n
        }
        let digest = hasher.finalize()
        digests.withLock { $0[key] = digest }
        return digest
    }

    /// Writes the first `count` stream bytes to `path` (created or truncated, mode 0644).
    ///
    /// - Returns: The hex SHA-256 of what was written, computed in the same pass.
    /// - Throws: `TestSupportError` when the file cannot be written.
    @discardableResult
    public static func write(seed: UInt64, count: Int, to path: String) throws -> String {
        let hasher = SHA256Hasher()
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw TestSupportError.posix("open \(path)") }
        defer { close(fd) }
        let block = UnsafeMutableRawBufferPointer.allocate(byteCount: 4 << 20, alignment: 16)
        defer { block.deallocate() }
        var done = 0
        while done < count {
            let n = min(block.count, count - done)
            fill(UnsafeMutableRawBufferPointer(rebasing: block[0..<n]), seed: seed, offset: done)
            hasher.update(UnsafeRawBufferPointer(rebasing: block[0..<n]))
            var written = 0
            while written < n {
                let r = Glibc.write(fd, block.baseAddress! + written, n - written)
                if r < 0 {
                    if errno == EINTR { continue }
                    throw TestSupportError.posix("write \(path)")
                }
                written += r
            }
            done += n
        }
        let digest = hasher.finalize()
        digests.withLock { $0[Key(seed: seed, count: count)] = digest }
        return digest
    }
}
