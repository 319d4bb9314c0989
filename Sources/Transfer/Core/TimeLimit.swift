import FoundationEssentials

/// The one conversion of a time setting (seconds, a `Double`) to the whole
/// milliseconds the engine and the retry clock take. `Int64(x)` traps on
/// NaN, on infinity and past 2^63, so a setting is never converted any other
/// way: `.infinity` and any value past ``maximumSeconds`` mean "no limit"
/// (the caller's ``Limit/unlimited``), 0 and negative values mean "off"
/// (``Limit/off``), and NaN is refused with a typed error naming the setting.
enum TimeLimit {
    /// Longer than this (about 31 years) is no limit in practice; values
    /// past it are taken as unlimited so that no later sum overflows.
    static let maximumSeconds: Double = 1e9
    /// ``maximumSeconds`` in milliseconds, for the engine's fields.
    static let maximumMilliseconds: Int64 = 1_000_000_000_000

    /// What a time setting means.
    enum Limit: Equatable {
        /// 0, or less: the setting is off (or its default applies).
        case off
        /// Infinite, or longer than ``TimeLimit/maximumSeconds``.
        case unlimited
        /// A positive number of milliseconds, rounded up (a positive value
        /// never becomes 0), at most `maximumSeconds * 1000`.
        case milliseconds(Int64)
    }

    /// `seconds` as a ``Limit``.
    ///
    /// - Throws: ``TransferError/Code/invalidRequest`` for NaN, naming `setting`.
    static func limit(_ seconds: Double, setting: @autoclosure () -> String) throws(TransferError) -> Limit {
        guard !seconds.isNaN else {
            throw TransferError(.invalidRequest, "\(setting()) is not a number of seconds (NaN)")
        }
        if seconds <= 0 { return .off }
        if seconds > maximumSeconds { return .unlimited }
        return .milliseconds(max(1, Int64((seconds * 1000).rounded(.up))))
    }

    /// The engine's field for a limit whose 0 means "none": `off` and
    /// `unlimited` both give 0.
    static func engineMilliseconds(_ seconds: Double, setting: @autoclosure () -> String) throws(TransferError)
        -> Int64
    {
        switch try limit(seconds, setting: setting()) {
        case .off, .unlimited: return 0
        case .milliseconds(let ms): return ms
        }
    }

    /// `seconds` clamped to 0...``maximumSeconds`` as a `Duration` (NaN: 0).
    /// For values already checked, or where "no wait" is the safe reading.
    static func duration(seconds: Double) -> Duration {
        guard seconds > 0 else { return .zero }   // also NaN
        return .milliseconds(Int64((min(seconds, maximumSeconds) * 1000).rounded()))
    }

    /// `seconds` clamped to 0...``maximumSeconds`` (NaN: `fallback`), for
    /// waits measured with `Date` or `DispatchTime`.
    static func clampedSeconds(_ seconds: Double, fallback: Double) -> Double {
        if seconds.isNaN { return fallback }
        return min(max(seconds, 0), maximumSeconds)
    }

    /// A date as whole seconds since 1970 (rounded down) for the engine,
    /// clamped to ±2^53 (NaN: 0): `Int64(_:)` traps on an infinite date.
    static func unixSeconds(_ date: Date) -> Int64 {
        let seconds = date.timeIntervalSince1970.rounded(.down)
        guard !seconds.isNaN else { return 0 }
        let bound = 9_007_199_254_740_992.0
        return Int64(min(max(seconds, -bound), bound))
    }
}
