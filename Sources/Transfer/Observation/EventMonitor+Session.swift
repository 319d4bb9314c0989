import FoundationEssentials

extension SessionManager {
    /// Adds `monitor`: it receives the events of tasks from now on, on its
    /// own queue, next to the monitors of ``SessionConfiguration/eventMonitors``.
    /// Safe from any thread. Monitors cannot be removed (as in Alamofire):
    /// make one that ignores events to stop listening.
    public func addEventMonitor(_ monitor: any EventMonitor) {
        observation.add(monitor)
    }

    /// Whether an ``EventMonitor`` that wants the per-task events
    /// (``EventMonitorInterests/taskLifecycle``) is registered, from the
    /// configuration or ``addEventMonitor(_:)``: one relaxed atomic load, for
    /// code that skips work nobody observes (a fast path for unobserved
    /// requests must still report to monitors when this is true, and when
    /// ``SessionConfiguration/logger`` logs at debug or below). Monitors that
    /// want only completions do not count: the fast path serves them.
    public var hasEventMonitors: Bool { observation.hasEventMonitors }
}
