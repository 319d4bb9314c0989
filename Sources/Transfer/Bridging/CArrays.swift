import FoundationEssentials

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
