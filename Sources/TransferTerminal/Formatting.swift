import FoundationEssentials
import Transfer

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
        return cFormat("%.1f", value) + " " + units[unit]
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
        if hours > 0 { return cFormat("%d:%02d:%02d", hours, minutes, secs) }
        return cFormat("%d:%02d", minutes, secs)
    }

    /// "42%": the fraction truncated to a whole percent, as the seeds' label does.
    public static func percent(_ fraction: Double) -> String {
        let clamped = min(1, max(0, fraction))
        return "\(Int((clamped * 100).rounded(.down)))%"
    }

    /// The columns `text` takes on a terminal: East Asian wide and fullwidth
    /// characters and emoji take two, combining marks none, the rest one.
    /// (A compact table of the common ranges, not the whole of UAX #11.)
    public static func columns(_ text: String) -> Int {
        text.reduce(0) { $0 + columns(of: $1) }
    }

    static func columns(of character: Character) -> Int {
        guard let first = character.unicodeScalars.first else { return 0 }
        if character.unicodeScalars.contains(where: isWide) { return 2 }
        if character.unicodeScalars.contains(where: { $0.value == 0xFE0F })
            && first.properties.isEmoji
        {
            return 2  // emoji presentation selector
        }
        switch first.properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format: return 0
        default: return 1
        }
    }

    private static func isWide(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x1100...0x115F,  // Hangul Jamo initials
            0x2E80...0x303E,  // CJK radicals, punctuation
            0x3041...0x33FF,  // kana, CJK compatibility
            0x3400...0x4DBF,  // CJK extension A
            0x4E00...0x9FFF,  // CJK unified ideographs
            0xA000...0xA4CF,  // Yi
            0xAC00...0xD7A3,  // Hangul syllables
            0xF900...0xFAFF,  // CJK compatibility ideographs
            0xFE30...0xFE4F,  // CJK compatibility forms
            0xFF00...0xFF60,  // fullwidth forms
            0xFFE0...0xFFE6,
            0x1F300...0x1F64F,  // pictographs, emoticons
            0x1F900...0x1F9FF,  // supplemental symbols and pictographs
            0x20000...0x3FFFD:  // CJK extensions B and later
            return true
        default:
            return false
        }
    }

    /// `text` cut or padded with spaces to exactly `width` terminal columns
    /// (a wide character that would straddle the edge becomes a space).
    static func fit(_ text: String, width: Int) -> String {
        let width = max(0, width)
        var result = ""
        var used = 0
        for character in text {
            let w = columns(of: character)
            if used + w > width { break }
            result.append(character)
            used += w
        }
        return result + String(repeating: " ", count: width - used)
    }
}
