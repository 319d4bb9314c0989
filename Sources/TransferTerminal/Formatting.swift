import Foundation

/// Byte counts, rates and durations the way the bars print them.
public enum TerminalFormat {
    /// "512 B", "1.5 KiB", "10.0 MiB", "1.2 GiB" (binary units, one decimal).
    public static func bytes(_ count: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
        var value = Double(max(0, count))
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        if unit == 0 { return "\(max(0, count)) B" }
        return String(format: "%.1f %@", value, units[unit])
    }

    /// "1.2 MiB/s"; "0 B/s" before any time has passed.
    public static func rate(_ bytesPerSecond: Double) -> String {
        guard bytesPerSecond.isFinite, bytesPerSecond > 0 else { return "0 B/s" }
        return bytes(Int64(bytesPerSecond.rounded())) + "/s"
    }

    /// "0:05", "12:34", "1:02:03"; "--:--" when unknown.
    public static func duration(_ seconds: TimeInterval?) -> String {
        guard let seconds, seconds.isFinite, seconds >= 0, seconds < 360_000 else { return "--:--" }
        let total = Int(seconds.rounded(.up))
        let hours = total / 3600
        let minutes = (total % 3600) / 60
        let secs = total % 60
        if hours > 0 { return String(format: "%d:%02d:%02d", hours, minutes, secs) }
        return String(format: "%d:%02d", minutes, secs)
    }

    /// "42%": the fraction truncated to a whole percent, as the seeds' label does.
    public static func percent(_ fraction: Double) -> String {
        let clamped = min(1, max(0, fraction))
        return "\(Int((clamped * 100).rounded(.down)))%"
    }

    /// `text` cut or padded with spaces to exactly `width` characters.
    static func fit(_ text: String, width: Int) -> String {
        let width = max(0, width)
        if text.count > width { return String(text.prefix(width)) }
        return text + String(repeating: " ", count: width - text.count)
    }
}
