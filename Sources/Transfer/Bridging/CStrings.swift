import Glibc

/// C strings that live until `free()`: for building a `ct_transfer_spec`,
/// which the engine copies during submit. Not thread-safe; use locally.
final class CStrings {
    private var pointers: [UnsafeMutablePointer<CChar>] = []

    /// A copy of `string` that lives until `free()`.
    func make(_ string: String) -> UnsafeMutablePointer<CChar> {
        let pointer = strdup(string)!
        pointers.append(pointer)
        return pointer
    }

    func make(_ string: String?) -> UnsafeMutablePointer<CChar>? {
        string.map { make($0) }
    }

    /// An array of C strings that lives until `free()`.
    func makeArray(_ strings: [String]) -> UnsafeMutablePointer<UnsafePointer<CChar>?> {
        let array = UnsafeMutablePointer<UnsafePointer<CChar>?>.allocate(capacity: max(strings.count, 1))
        for (index, string) in strings.enumerated() { array[index] = UnsafePointer(make(string)) }
        arrays.append(array)
        return array
    }

    private var arrays: [UnsafeMutablePointer<UnsafePointer<CChar>?>] = []
    private var buffers: [UnsafeMutablePointer<UInt8>] = []

    /// A copy of `bytes` that lives until `free()`.
    func make(bytes: [UInt8]) -> UnsafePointer<UInt8> {
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: max(bytes.count, 1))
        buffer.initialize(from: bytes, count: bytes.count)
        buffers.append(buffer)
        return UnsafePointer(buffer)
    }

    func free() {
        for pointer in pointers { Glibc.free(pointer) }
        for array in arrays { array.deallocate() }
        for buffer in buffers { buffer.deallocate() }
        pointers.removeAll()
        arrays.removeAll()
        buffers.removeAll()
    }

    deinit { free() }
}
