import Glibc

/// A mutex with `lock()`/`unlock()` for code that holds it across a whole
/// function (`defer { unlock() }`). The mutex lives in memory of its own, so
/// its address never moves.
final class PlainLock: @unchecked Sendable {
    // @unchecked Sendable: the pthread mutex is the synchronisation.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    func lock() { pthread_mutex_lock(mutex) }

    func unlock() { pthread_mutex_unlock(mutex) }
}
