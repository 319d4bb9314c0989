import Glibc
import Synchronization

/// A flag that can be claimed once, from any thread.
final class OnceFlag: Sendable {
    private let claimed = Atomic<Bool>(false)
    /// True for the first caller only.
    func claim() -> Bool {
        claimed.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
    }
}

/// A value behind a pthread mutex.
///
/// Used instead of `Synchronization.Mutex`, which ThreadSanitizer on Linux
/// reports as racing under contention (a false positive: it does not see
/// the futex-based lock's happens-before); pthread mutexes it understands.
/// Deciding happens under the lock, acting (handlers, C calls) after it.
package final class Protected<Value>: @unchecked Sendable {
    // @unchecked Sendable: `value` is only touched with `mutex` held.
    private var value: Value
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    package init(_ value: Value) {
        self.value = value
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    package func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
