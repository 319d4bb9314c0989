import FoundationEssentials
import Glibc
import Transfer

/// Messages and numbers the command prints, without Foundation's formatting.
enum Describe {
    /// A file-system error as one line: the path and `strerror` for the
    /// errors FoundationEssentials' file APIs throw, the error itself for others.
    static func error(_ error: any Error) -> String {
        if let cocoa = error as? CocoaError, let posix = cocoa.userInfo["NSUnderlyingError"] as? POSIXError {
            let message = String(cString: strerror(posix.code.rawValue))
            if let path = cocoa.userInfo["NSFilePath"] as? String { return "\(path): \(message)" }
            return message
        }
        if let transfer = error as? TransferError { return transfer.message }
        return String(describing: error)
    }

    /// `value` with three decimals, as `%.3f` wrote it for the values the
    /// command prints (non-negative seconds); "0.000" for anything not finite.
    static func threeDecimals(_ value: Double) -> String {
        guard value.isFinite, value >= 0, value < 9e15 else { return "0.000" }
        let thousandths = UInt64((value * 1000).rounded())
        let fraction = thousandths % 1000
        let digits = String(fraction)
        return "\(thousandths / 1000)." + String(repeating: "0", count: 3 - digits.count) + digits
    }

    /// `value` in decimal, zero-padded on the left to `width` digits (`%0Nd`).
    static func zeroPadded(_ value: some BinaryInteger, width: Int) -> String {
        let digits = String(value.magnitude)
        let padded = String(repeating: "0", count: max(0, width - digits.count)) + digits
        return value < 0 ? "-" + padded : padded
    }
}
