import Foundation

extension SessionManager {
    /// Adds `monitor`: it receives the events of tasks from now on, on its
    /// own queue, next to the monitors of ``SessionConfiguration/eventMonitors``.
    /// Safe from any thread. Monitors cannot be removed (as in Alamofire):
    /// make one that ignores events to stop listening.
    public func addEventMonitor(_ monitor: any EventMonitor) {
        observation.add(monitor)
    }

    /// Whether any ``EventMonitor`` is registered (from the configuration or
    /// ``addEventMonitor(_:)``): one relaxed atomic load, for code that
    /// skips work nobody observes (a fast path for unobserved requests must
    /// still report to monitors when this is true, and when
    /// ``SessionConfiguration/logger`` logs at debug or below).
    public var hasEventMonitors: Bool { observation.hasEventMonitors }
}
