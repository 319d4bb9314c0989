/// The text of a fixed-size, NUL-terminated C `char` array imported as a
/// tuple (`char message[256]` and the like), decoded as UTF-8.
func stringFromCCharArray<T>(_ array: T) -> String {
    withUnsafeBytes(of: array) { raw in
        String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
    }
}

/// The NUL-terminated text in a C buffer filled by the engine.
func string(fromCBuffer buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
