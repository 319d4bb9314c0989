import Foundation

/// Thrown by `Wait.until` when the condition is still false at the deadline.
public struct WaitTimedOut: Error, CustomStringConvertible, Sendable {
    public var what: String
    public var timeout: Duration
    public var description: String { "timed out after \(timeout) waiting for \(what)" }
}

/// Bounded waits on real conditions, for tests. Never a fixed sleep as synchronisation:
/// the condition is polled and the wait ends as soon as it holds.
public enum Wait {
    /// Polls `condition` every `interval` until it is true or `timeout` passes.
    ///
    /// - Returns: Whether the condition held before the deadline.
    ///
    /// Blocks the calling thread between checks. Disfavoured, so that in async code the async
    /// variant is chosen even for a synchronous condition: a test that blocked a thread of
    /// the small shared pool could starve the callbacks of tests running beside it.
    @_disfavoredOverload
    public static func poll(
        timeout: Duration = .seconds(5), interval: Duration = .milliseconds(5),
        _ condition: () throws -> Bool
    ) rethrows -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        while true {
            if try condition() { return true }
            if clock.now >= deadline { return false }
            Thread.sleep(forTimeInterval: seconds(interval))
        }
    }

    /// Async variant of `poll`, sleeping the task (not the thread) between checks.
    public static func poll(
        timeout: Duration = .seconds(5), interval: Duration = .milliseconds(5),
        _ condition: () async throws -> Bool
    ) async rethrows -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        while true {
            if try await condition() { return true }
            if clock.now >= deadline { return false }
            try? await Task.sleep(for: interval)
        }
    }

    /// Like `poll`, but throws `WaitTimedOut` naming `what` when the deadline passes.
    @_disfavoredOverload
    public static func until(
        _ what: String, timeout: Duration = .seconds(5), interval: Duration = .milliseconds(5),
        _ condition: () throws -> Bool
    ) throws {
        guard try poll(timeout: timeout, interval: interval, condition) else {
            throw WaitTimedOut(what: what, timeout: timeout)
        }
    }

    /// Async variant of `until`.
    public static func until(
        _ what: String, timeout: Duration = .seconds(5), interval: Duration = .milliseconds(5),
        _ condition: () async throws -> Bool
    ) async throws {
        guard try await poll(timeout: timeout, interval: interval, condition) else {
            throw WaitTimedOut(what: what, timeout: timeout)
        }
    }

    static func seconds(_ duration: Duration) -> Double {
        let parts = duration.components
        return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
    }
}
