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
    // Unchecked exclusivity: the mutex makes every access exclusive, and
    // the dynamic check cost a runtime call on every lock.
    @exclusivity(unchecked) private var value: Value
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

/// A hook a test installs to widen a race window on purpose. Where none is
/// installed (always, outside tests) running it costs one atomic load.
package final class TestSeam<Argument>: Sendable {
    private let installed = Atomic<Bool>(false)
    private let hook = Protected<(@Sendable (Argument) -> Void)?>(nil)

    init() {}

    /// Installs `body` (nil: removes the hook, which a test must do before it
    /// ends: a hook kept by the session must not keep what it captured).
    package func install(_ body: (@Sendable (Argument) -> Void)?) {
        hook.withLock { $0 = body }
        installed.store(body != nil, ordering: .releasing)
    }

    func run(_ argument: Argument) {
        guard installed.load(ordering: .acquiring) else { return }
        hook.withLock { $0 }?(argument)
    }
}
