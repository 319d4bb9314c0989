import Foundation

/// A failure inside a test helper (a syscall, a subprocess, a fixture that would not start).
///
/// Tests usually let it propagate: Swift Testing records the thrown error with its message.
public struct TestSupportError: Error, CustomStringConvertible, Sendable {
    /// What failed, in words, with `errno` text where there was one.
    public var message: String

    public init(_ message: String) {
        self.message = message
    }

    /// An error carrying `strerror(errno)` for the syscall named in `what`.
    static func posix(_ what: String, _ code: Int32 = errno) -> TestSupportError {
        TestSupportError("\(what): \(String(cString: strerror(code))) (errno \(code))")
    }

    public var description: String { "TestSupportError: \(message)" }
}
