import Foundation

/// A gzip member holding `count` zero bytes, built by hand (no zlib in the
/// tests): one fixed-Huffman deflate block, a literal zero and then
/// length-258 / distance-1 copies, 13 bits for 258 bytes — the ~1030:1 of a
/// classic decompression bomb. The trailer (CRC-32, size) is exact, so a
/// small one decodes cleanly.
public enum GzipZeros {
    public static func member(count: Int) -> [UInt8] {
        var out: [UInt8] = [0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 0xFF]
        var writer = BitWriter()
        writer.write(1, bits: 1)  // BFINAL
        writer.write(1, bits: 2)  // BTYPE 01: fixed Huffman
        if count > 0 {
            writer.code(0x30, length: 8)  // literal 0
            let copies = (count - 1) / 258
            for _ in 0..<copies {
                writer.code(0xC5, length: 8)  // length 258 (symbol 285)
                writer.code(0, length: 5)  // distance 1
            }
            for _ in 0..<((count - 1) % 258) { writer.code(0x30, length: 8) }
        }
        writer.code(0, length: 7)  // end of block (symbol 256)
        out += writer.finish()
        let crc = crc32OfZeros(count)
        let size = UInt32(truncatingIfNeeded: count)
        for shift in stride(from: 0, to: 32, by: 8) { out.append(UInt8(truncatingIfNeeded: crc >> UInt32(shift))) }
        for shift in stride(from: 0, to: 32, by: 8) { out.append(UInt8(truncatingIfNeeded: size >> UInt32(shift))) }
        return out
    }

    /// CRC-32 of `count` zero bytes in O(log count), by squaring the
    /// zero-byte operator (the method of zlib's crc32_combine).
    static func crc32OfZeros(_ count: Int) -> UInt32 {
        func times(_ matrix: [UInt32], _ vector: UInt32) -> UInt32 {
            var sum: UInt32 = 0
            var v = vector
            var index = 0
            while v != 0 {
                if v & 1 != 0 { sum ^= matrix[index] }
                v >>= 1
                index += 1
            }
            return sum
        }
        func square(_ matrix: [UInt32]) -> [UInt32] { (0..<32).map { times(matrix, matrix[$0]) } }
        var op = [UInt32](repeating: 0, count: 32)
        op[0] = 0xEDB8_8320  // one zero bit, reflected polynomial
        for n in 1..<32 { op[n] = 1 << UInt32(n - 1) }
        op = square(square(square(op)))  // one zero byte
        var crc: UInt32 = 0xFFFF_FFFF
        var n = count
        while n > 0 {
            if n & 1 != 0 { crc = times(op, crc) }
            op = square(op)
            n >>= 1
        }
        return crc ^ 0xFFFF_FFFF
    }

    private struct BitWriter {
        var bytes: [UInt8] = []
        var accumulator: UInt64 = 0
        var filled = 0

        /// `value`'s low `bits` bits, least significant first (deflate's header fields).
        mutating func write(_ value: UInt32, bits: Int) {
            accumulator |= UInt64(value) << UInt64(filled)
            filled += bits
            while filled >= 8 {
                bytes.append(UInt8(truncatingIfNeeded: accumulator))
                accumulator >>= 8
                filled -= 8
            }
        }

        /// A Huffman code, most significant bit first.
        mutating func code(_ code: UInt32, length: Int) {
            var reversed: UInt32 = 0
            for bit in 0..<length { reversed |= ((code >> UInt32(bit)) & 1) << UInt32(length - 1 - bit) }
            write(reversed, bits: length)
        }

        mutating func finish() -> [UInt8] {
            if filled > 0 { bytes.append(UInt8(truncatingIfNeeded: accumulator)) }
            return bytes
        }
    }
}
