import Glibc

/// C strings that live until `free()`: for building a `ct_transfer_spec`,
/// which the engine copies during submit. Not thread-safe; use locally.
///
/// Everything is copied into one arena: a request's URL, headers and
/// options usually fit the first block, so a spec costs one allocation
/// instead of one per string (and none for the bookkeeping).
final class CStrings {
    // Unchecked exclusivity: used by one caller at a time (above), and
    // each dynamic check was a runtime call per string.
    /// The block being filled, and what is left of it.
    @exclusivity(unchecked) private var block: UnsafeMutableRawPointer?
    @exclusivity(unchecked) private var used = 0
    @exclusivity(unchecked) private var capacity = 0
    /// Blocks filled before `block` (rare: a request with large headers).
    @exclusivity(unchecked) private var full: [UnsafeMutableRawPointer] = []

    private static let blockSize = 1024

    /// `count` bytes aligned for pointers, valid until `free()`.
    private func allocate(_ count: Int) -> UnsafeMutableRawPointer {
        let start = (used + 7) & ~7
        if let block, start + count <= capacity {
            used = start + count
            return block + start
        }
        if let block { full.append(block) }
        capacity = max(Self.blockSize, count)
        let fresh = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 8)
        block = fresh
        used = count
        return fresh
    }

    /// A copy of `head`, then `": "` and `tail` when given (a header line, written in one
    /// piece), NUL-terminated, in the arena: the one place bytes are copied and terminated.
    private func copyTerminated(_ head: UnsafeBufferPointer<UInt8>, value tail: UnsafeBufferPointer<UInt8>? = nil)
        -> UnsafeMutablePointer<CChar>
    {
        let length = head.count + (tail.map { 2 + $0.count } ?? 0)
        let pointer = allocate(length + 1)
        if let base = head.baseAddress { pointer.copyMemory(from: base, byteCount: head.count) }
        if let tail {
            pointer.storeBytes(of: UInt8(ascii: ":"), toByteOffset: head.count, as: UInt8.self)
            pointer.storeBytes(of: UInt8(ascii: " "), toByteOffset: head.count + 1, as: UInt8.self)
            if let base = tail.baseAddress { (pointer + head.count + 2).copyMemory(from: base, byteCount: tail.count) }
        }
        pointer.storeBytes(of: 0, toByteOffset: length, as: UInt8.self)
        return pointer.assumingMemoryBound(to: CChar.self)
    }

    /// A copy of `string` that lives until `free()`.
    func make(_ string: String) -> UnsafeMutablePointer<CChar> {
        var string = string
        return string.withUTF8 { copyTerminated($0) }
    }

    func make(_ string: String?) -> UnsafeMutablePointer<CChar>? {
        string.map { make($0) }
    }

    /// An array of C strings that lives until `free()`.
    func makeArray(_ strings: [String]) -> UnsafeMutablePointer<UnsafePointer<CChar>?> {
        let size = MemoryLayout<UnsafePointer<CChar>?>.stride
        let array = allocate(size * max(strings.count, 1))
            .bindMemory(to: UnsafePointer<CChar>?.self, capacity: max(strings.count, 1))
        for (index, string) in strings.enumerated() { array[index] = UnsafePointer(make(string)) }
        return array
    }

    /// The C array of "Name: value" lines of `headers`, then `extra` (a
    /// whole line) if given, written straight into the arena: no Swift
    /// string is made per line.
    func makeHeaderLines(_ headers: HTTPHeaders, then extra: String?)
        -> UnsafeMutablePointer<UnsafePointer<CChar>?>
    {
        let count = headers.count + (extra == nil ? 0 : 1)
        let size = MemoryLayout<UnsafePointer<CChar>?>.stride
        let array = allocate(size * max(count, 1)).bindMemory(to: UnsafePointer<CChar>?.self, capacity: max(count, 1))
        var index = 0
        for field in headers {
            var name = field.name
            var value = field.value
            array[index] = name.withUTF8 { name in
                value.withUTF8 { value in UnsafePointer(copyTerminated(name, value: value)) }
            }
            index += 1
        }
        if let extra { array[index] = UnsafePointer(make(extra)) }
        return array
    }

    /// A copy of `bytes` that lives until `free()`.
    func make(bytes: [UInt8]) -> UnsafePointer<UInt8> {
        let buffer = allocate(max(bytes.count, 1))
        bytes.withUnsafeBytes { source in
            if let base = source.baseAddress { buffer.copyMemory(from: base, byteCount: source.count) }
        }
        return UnsafePointer(buffer.assumingMemoryBound(to: UInt8.self))
    }

    /// Forgets every string (they must no longer be used: the engine has
    /// copied them) but keeps the current block for the next ones.
    func reset() {
        for block in full { block.deallocate() }
        full.removeAll(keepingCapacity: true)
        used = 0
    }

    func free() {
        reset()
        block?.deallocate()
        block = nil
        capacity = 0
    }

    deinit { free() }
}
