import Dispatch
import Glibc

/// A mutex with a condition variable (pthread), for the few places where a
/// thread must block until another one changes state: a body-stream reader
/// waiting for room, the engine thread waiting for a trust answer.
///
/// Replaces Foundation's `NSCondition` so that the core needs only
/// FoundationEssentials. `wait(timeout:)` measures on `CLOCK_MONOTONIC`.
///
/// @unchecked Sendable: the pthread objects are the synchronisation itself;
/// they live in stable heap allocations that are never moved.
final class ConditionLock: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        // Neither can fail with default attributes and valid memory.
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    func lock() { pthread_mutex_lock(mutex) }

    func unlock() { pthread_mutex_unlock(mutex) }

    /// Runs `body` with the mutex held.
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// With the mutex held: releases it until ``broadcast()`` (or a spurious
    /// wake-up; callers loop on their predicate), then holds it again.
    func wait() { pthread_cond_wait(condition, mutex) }

    /// With the mutex held: like ``wait()``, but for at most until `deadline`.
    /// - Returns: false when the deadline passed.
    func wait(until deadline: timespec) -> Bool {
        var deadline = deadline
        return pthread_cond_timedwait(condition, mutex, &deadline) != ETIMEDOUT
    }

    /// Wakes every waiter. Call with the mutex held.
    func broadcast() { pthread_cond_broadcast(condition) }

    /// The `CLOCK_MONOTONIC` time `seconds` from now, for ``wait(until:)``.
    static func deadline(after seconds: Double) -> timespec {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let bounded = max(0, min(seconds, 1e9))
        let whole = Int(bounded)
        var nanoseconds = now.tv_nsec + Int((bounded - Double(whole)) * 1e9)
        var secondsPart = now.tv_sec + whole
        if nanoseconds >= 1_000_000_000 {
            nanoseconds -= 1_000_000_000
            secondsPart += 1
        }
        return timespec(tv_sec: secondsPart, tv_nsec: nanoseconds)
    }
}

/// Runs `body` on a new detached thread.
///
/// Replaces Foundation's `Thread` in the core. A thread that cannot be created
/// (the process is out of threads) runs `body` on a Dispatch worker instead,
/// so the work is never lost.
func detachThread(_ body: @escaping @Sendable () -> Void) {
    final class Start {
        let body: @Sendable () -> Void
        init(body: @escaping @Sendable () -> Void) {
            self.body = body
        }
    }
    let start = Unmanaged.passRetained(Start(body: body)).toOpaque()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    var thread = pthread_t()
    let created = pthread_create(&thread, &attributes, { context in
        let start = Unmanaged<Start>.fromOpaque(context!).takeRetainedValue()
        start.body()
        return nil
    }, start)
    if created != 0 {
        let start = Unmanaged<Start>.fromOpaque(start).takeRetainedValue()
        DispatchQueue.global().async(execute: start.body)
    }
}
