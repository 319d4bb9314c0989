import Foundation
import Logging

extension SessionConfiguration {
    /// Where the session logs (swift-log); nil, the default, logs nothing.
    ///
    /// - Debug: each request's start (method, URL without credentials or
    ///   secret query values, headers), every redirect and retry, and its
    ///   completion with status, bytes and time.
    /// - Error: each failure, with its ``TransferError/Code``
    ///   (a cancel is logged at debug).
    /// - Trace: libcurl's verbose trace (text and header lines, never body
    ///   bytes), one record per line.
    ///
    /// The values of `Authorization`, `Cookie`, `Proxy-Authorization` and
    /// `Set-Cookie` are always replaced by `[redacted]`, in trace lines too.
    /// The level is read once, when the session is created: below it nothing
    /// is built, and without `.trace` libcurl's debug function is not even
    /// installed. Records are emitted on the session's delegate queue, or on
    /// the thread that created or resumed the task; never on the engine
    /// thread.
    public var logger: Logger? {
        get { observation.logger }
        set { observation.logger = newValue }
    }

    /// Monitors every task of sessions made with this configuration receives
    /// events for (see ``EventMonitor``); more can be added with
    /// ``SessionManager/addEventMonitor(_:)``.
    public var eventMonitors: [any EventMonitor] {
        get { observation.monitors }
        set { observation.monitors = newValue }
    }
}

/// The logger and monitors of a configuration, kept apart so the
/// configuration stays `Hashable`: two settings are equal when their loggers
/// have the same label and level and their monitors are the same objects.
struct ObservationSettings: Sendable, Hashable {
    var logger: Logger?
    var monitors: [any EventMonitor] = []

    static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.logger?.label == rhs.logger?.label && lhs.logger?.logLevel == rhs.logger?.logLevel
            && lhs.monitors.map(ObjectIdentifier.init) == rhs.monitors.map(ObjectIdentifier.init)
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(logger?.label)
        hasher.combine(logger?.logLevel)
        for monitor in monitors { hasher.combine(ObjectIdentifier(monitor)) }
    }
}
