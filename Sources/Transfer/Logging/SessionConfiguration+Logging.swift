import FoundationEssentials
import Logging

extension SessionConfiguration {
    /// Where the session logs (swift-log); nil, the default, logs nothing.
    ///
    /// - Debug: each request's start (method, URL without credentials or
    ///   secret query values, headers), every redirect and retry, and its
    ///   completion with status, bytes and time.
    /// - Debug too: each failure, with its ``TransferError/Code``. The error
    ///   is the caller's (thrown or handed to its handler), who decides
    ///   whether it is one for the service: never logged at error.
    ///
    /// A request can carry its own logger instead (``Request/logger``).
    /// - Trace: libcurl's verbose trace (text and header lines, never body
    ///   bytes), one record per line.
    ///
    /// Every message and metadata value is redacted as it is emitted, trace
    /// lines and error messages too: credential header values (`Authorization`,
    /// `Cookie`, `X-Api-Key`, …), URL user info and secret query values become
    /// `[redacted]` (see ``LogRedaction`` for the rules, ``logRedaction`` to
    /// add names).
    /// The level is read once, when the session is created: below it nothing
    /// is built, and without `.trace` libcurl's debug function is not even
    /// installed. Records are emitted on the session's delegate queue, or on
    /// the thread that created or resumed the task; never on the engine
    /// thread.
    public var logger: Logger? {
        get { observation.logger }
        set { observation.logger = newValue }
    }

    /// Header and query parameter names whose values the ``logger`` never
    /// shows, added to the built-in rules of ``LogRedaction`` (which always
    /// apply). Default: ``LogRedaction/standard``, the built-in rules only.
    ///
    /// ```swift
    /// configuration.logRedaction.headerNames.insert("X-Tenant-Secret-Ref")
    /// configuration.logRedaction.queryParameterNames.insert("ticket")
    /// ```
    public var logRedaction: LogRedaction {
        get { observation.redaction }
        set { observation.redaction = newValue }
    }

    /// Monitors every task of sessions made with this configuration receives
    /// events for (see ``EventMonitor``); more can be added with
    /// ``SessionManager/addEventMonitor(_:)``.
    public var eventMonitors: [any EventMonitor] {
        get { observation.monitors }
        set { observation.monitors = newValue }
    }

    /// Instruments that see every request of sessions made with this
    /// configuration, on every path (see ``RequestInstrument``): the seam of
    /// the optional metrics and tracing integrations. Unlike an
    /// ``EventMonitor`` with ``EventMonitorInterests/taskLifecycle``, an
    /// instrument keeps requests on the fast path of ``SessionManager/data(for:)``
    /// and the batch API. Empty (the default) costs one check per request.
    public var requestInstruments: [any RequestInstrument] {
        get { observation.instruments }
        set { observation.instruments = newValue }
    }
}

/// The logger and monitors of a configuration, kept apart so the
/// configuration stays `Hashable`: two settings are equal when their loggers
/// have the same label and level and their monitors are the same objects.
struct ObservationSettings: Sendable, Hashable {
    var logger: Logger?
    var monitors: [any EventMonitor] = []
    var instruments: [any RequestInstrument] = []
    var redaction = LogRedaction.standard

    static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.logger?.label == rhs.logger?.label && lhs.logger?.logLevel == rhs.logger?.logLevel
            && lhs.redaction == rhs.redaction
            && lhs.monitors.map(ObjectIdentifier.init) == rhs.monitors.map(ObjectIdentifier.init)
            && lhs.instruments.map(ObjectIdentifier.init) == rhs.instruments.map(ObjectIdentifier.init)
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(logger?.label)
        hasher.combine(logger?.logLevel)
        hasher.combine(redaction)
        for monitor in monitors { hasher.combine(ObjectIdentifier(monitor)) }
        for instrument in instruments { hasher.combine(ObjectIdentifier(instrument)) }
    }
}
