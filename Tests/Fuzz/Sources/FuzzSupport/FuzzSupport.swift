import Foundation

/// Stops the fuzzer with a message when an invariant does not hold: a
/// violated property is a finding, like a crash.
public func require(
    _ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String,
    file: StaticString = #fileID, line: UInt = #line
) {
    if !condition() {
        FileHandle.standardError.write(Data("invariant violated at \(file):\(line): \(message())\n".utf8))
        abort()
    }
}

/// The fuzzer's bytes as Data (copied: the buffer is only valid during the call).
public func bytes(_ data: UnsafePointer<UInt8>, _ size: Int) -> Data {
    Data(bytes: data, count: size)
}

/// Splits the input at NUL bytes into `count` fields (missing fields are
/// empty, the last one keeps any further NULs), each decoded as UTF-8 with
/// replacement: how a target takes several strings from one input.
public func fields(_ data: Data, _ count: Int) -> [String] {
    var result: [String] = []
    var rest = data[...]
    while result.count < count - 1, let nul = rest.firstIndex(of: 0) {
        result.append(String(decoding: rest[..<nul], as: UTF8.self))
        rest = rest[rest.index(after: nul)...]
    }
    result.append(String(decoding: rest, as: UTF8.self))
    while result.count < count { result.append("") }
    return result
}

@_silgen_name("LLVMFuzzerRunDriver")
private func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt) -> CInt

/// libFuzzer's driver. SwiftPM links a debug executable with its entry
/// point renamed to `<module>_main` (for testable executables), which
/// hides libFuzzer's own `main`; each target defines that symbol and
/// calls this.
public func runFuzzer(
    _ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt
) -> CInt {
    var argc = argc
    var argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv, callback)
}
