import Foundation

/// A value behind a pthread mutex, with Mutex's `withLock` shape.
///
/// Not `Synchronization.Mutex`: ThreadSanitizer on Linux does not see the
/// happens-before of its futex and reports races under contention, and the
/// CLI tests run the binary under TSan in CI (a report turns exit codes into 66).
final class Locked<Value>: @unchecked Sendable {
    // @unchecked Sendable: `value` is only touched with `mutex` held.
    private var value: Value
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    init(_ value: Value) {
        self.value = value
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
