import Foundation

/// A value behind a lock that ThreadSanitizer understands.
///
/// `Synchronization.Mutex` on Linux parks contended threads with raw futex calls that TSan
/// does not model, so `swift test --sanitize=thread` reports false races on state it guards
/// whenever two threads contend (checked with Swift 6.3.1: four threads holding a Mutex for
/// 20 ms each are reported). NSLock is a pthread mutex, which TSan intercepts. TestSupport
/// runs under TSan in CI, so its shared state lives here.
///
/// `@unchecked Sendable`: `value` is only touched inside `withLock`, under `lock`.
public final class Locked<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    public init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` with exclusive access to the value. Do not call back into this lock.
    public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
