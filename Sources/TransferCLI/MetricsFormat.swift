import Transfer

/// Where ``MetricsFormat`` writes: a growable array, or a ``ByteCursor``
/// over memory sized beforehand for the whole line.
protocol ByteSink {
    mutating func put(_ byte: UInt8)
    mutating func put(_ bytes: UnsafeBufferPointer<UInt8>)
}

extension Array: ByteSink where Element == UInt8 {
    @inline(__always) mutating func put(_ byte: UInt8) { append(byte) }
    @inline(__always) mutating func put(_ bytes: UnsafeBufferPointer<UInt8>) { append(contentsOf: bytes) }
}

/// Writes forward from a pointer with no capacity checks: the caller has
/// reserved room for everything that will be put (``MetricsFormat/appendLine(_:to:)``
/// counts it first).
struct ByteCursor: ByteSink {
    private(set) var position: UnsafeMutablePointer<UInt8>

    init(_ start: UnsafeMutablePointer<UInt8>) { position = start }

    @inline(__always) mutating func put(_ byte: UInt8) {
        position.initialize(to: byte)
        position += 1
    }

    @inline(__always) mutating func put(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let base = bytes.baseAddress else { return }
        position.initialize(from: base, count: bytes.count)
        position += bytes.count
    }
}

/// The bytes of one `--metrics` line, written by hand into a byte buffer.
///
/// The output is the one `String(format:)` and string concatenation produced
/// before (the CLI tests and scripts parse it), at a fraction of the cost: no
/// Foundation formatting, no intermediate strings, and for a whole line one
/// copy into the caller's buffer of bytes written through a pointer.
enum MetricsFormat {
    /// At most this many bytes for one value of ``appendSeconds(_:to:)``:
    /// a sign, 309 digits of the largest double, the point and six decimals.
    static let secondsBound = 1 + 309 + 1 + 6
    /// At most this many for ``appendInteger(_:to:)``: a sign and 19 digits.
    static let integerBound = 20

    /// Appends the JSON object of `record` and a newline to `out`.
    static func appendLine(_ record: MetricsWriter.Record, to out: inout [UInt8]) {
        // Without metrics (a job that never ran) every phase is unknown.
        let m = record.metrics ?? TaskMetrics()
        // The line's largest size: the names and punctuation, every number
        // at its widest, every string byte escaped as \u00XX.
        var escaped = record.url.utf8.count + m.httpVersion.utf8.count + m.remoteAddress.utf8.count
        if let failure = record.failure { escaped += failure.status.className.utf8.count + 2 + failure.detail.utf8.count }
        let bound = 512 + 7 * secondsBound + 5 * integerBound + 6 * escaped + 4 * 2
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: bound) { buffer in
            guard let start = buffer.baseAddress else { return }
            var cursor = ByteCursor(start)
            writeLine(record, metrics: m, to: &cursor)
            assert(cursor.position - start <= bound, "a metrics line outgrew its bound")
            out.append(contentsOf: UnsafeBufferPointer(start: start, count: cursor.position - start))
        }
    }

    private static func writeLine<Sink: ByteSink>(_ record: MetricsWriter.Record, metrics m: TaskMetrics,
                                                   to out: inout Sink)
    {
        append("{\"url\":", to: &out)
        appendString(record.url, to: &out)
        append(",\"status\":", to: &out)
        if let status = record.status { appendInteger(Int64(status), to: &out) } else { append("null", to: &out) }
        append(",\"http_version\":", to: &out)
        appendStringOrNull(m.httpVersion, to: &out)
        append(",\"bytes_received\":", to: &out)
        appendInteger(record.bytesReceived, to: &out)
        append(",\"bytes_sent\":", to: &out)
        appendInteger(record.bytesSent, to: &out)
        append(",\"name_lookup\":", to: &out)
        appendSeconds(m.nameLookup, to: &out)
        append(",\"connect\":", to: &out)
        appendSeconds(m.connect, to: &out)
        append(",\"tls\":", to: &out)
        appendSeconds(m.tlsHandshake, to: &out)
        append(",\"request_sent\":", to: &out)
        appendSeconds(m.requestSent, to: &out)
        append(",\"first_byte\":", to: &out)
        appendSeconds(m.firstByte, to: &out)
        append(",\"total\":", to: &out)
        appendSeconds(m.total, to: &out)
        append(",\"redirect\":", to: &out)
        appendSeconds(m.redirectDuration, to: &out)
        append(",\"redirects\":", to: &out)
        appendInteger(Int64(m.redirectCount), to: &out)
        append(m.reusedConnection ? ",\"reused_connection\":true" : ",\"reused_connection\":false", to: &out)
        append(",\"remote_address\":", to: &out)
        appendStringOrNull(m.remoteAddress, to: &out)
        // error_code is the exit-code class of docs/CLI.md (0 on success).
        if let failure = record.failure {
            append(",\"error_code\":", to: &out)
            appendInteger(Int64(failure.status.rawValue), to: &out)
            append(",\"error_message\":", to: &out)
            out.put(0x22)
            appendEscaped(failure.status.className, to: &out)
            append(": ", to: &out)
            appendEscaped(failure.detail, to: &out)
            out.put(0x22)
            append("}\n", to: &out)
        } else {
            append(",\"error_code\":0,\"error_message\":null}\n", to: &out)
        }
    }

    /// Appends the UTF-8 of `text` as it is.
    @inline(__always)
    static func append<Sink: ByteSink>(_ text: StaticString, to out: inout Sink) {
        out.put(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// A string literal, or `null` for the empty string (an absent value).
    static func appendStringOrNull<Sink: ByteSink>(_ text: String, to out: inout Sink) {
        if text.isEmpty { append("null", to: &out) } else { appendString(text, to: &out) }
    }

    /// A JSON string literal of `text`.
    ///
    /// `"`, `\`, LF, CR and tab get their short escapes; every other C0
    /// control and DEL become `\u00xx`; everything else, non-ASCII included,
    /// is copied as UTF-8 (no byte of a multi-byte sequence is below 0x80).
    static func appendString<Sink: ByteSink>(_ text: String, to out: inout Sink) {
        out.put(0x22)
        appendEscaped(text, to: &out)
        out.put(0x22)
    }

    /// The escaped bytes of `text`, without quotes.
    private static func appendEscaped<Sink: ByteSink>(_ text: String, to out: inout Sink) {
        var text = text
        text.withUTF8 { bytes in appendEscaped(bytes, to: &out) }
    }

    private static func appendEscaped<Sink: ByteSink>(_ bytes: UnsafeBufferPointer<UInt8>, to out: inout Sink) {
        var runStart = 0
        for index in 0..<bytes.count {
            let byte = bytes[index]
            if byte >= 0x20 && byte != 0x22 && byte != 0x5C && byte != 0x7F { continue }
            if runStart < index { out.put(UnsafeBufferPointer(rebasing: bytes[runStart..<index])) }
            runStart = index + 1
            out.put(0x5C)
            switch byte {
            case 0x22: out.put(0x22)
            case 0x5C: out.put(0x5C)
            case 0x0A: out.put(0x6E)   // n
            case 0x0D: out.put(0x72)   // r
            case 0x09: out.put(0x74)   // t
            default:
                append("u00", to: &out)
                out.put(hexDigit(byte >> 4))
                out.put(hexDigit(byte & 0x0F))
            }
        }
        if runStart < bytes.count { out.put(UnsafeBufferPointer(rebasing: bytes[runStart...])) }
    }

    /// Lower-case, as `%04x` wrote it.
    @inline(__always)
    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? 0x30 + nibble : 0x61 + nibble - 10
    }

    /// A signed decimal integer, as `String(Int64)` writes it.
    static func appendInteger<Sink: ByteSink>(_ value: Int64, to out: inout Sink) {
        if value < 0 { out.put(0x2D) }
        appendDecimal(value.magnitude, to: &out)
    }

    /// The decimal digits of `value`, no sign, no padding.
    static func appendDecimal<Sink: ByteSink>(_ value: UInt64, to out: inout Sink) {
        if value < 10 {
            out.put(0x30 + UInt8(truncatingIfNeeded: value))
            return
        }
        // 20 digits hold UInt64.max; written from the end, copied once.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var rest = value
            var start = 20
            while rest > 0 {
                start -= 1
                digits[start] = 0x30 + UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
            }
            out.put(UnsafeBufferPointer(rebasing: digits[start..<20]))
        }
    }

    /// Seconds with six decimals, exactly as `String(format: "%.6f", value)`
    /// (glibc: the binary value's exact decimal expansion, rounded half to
    /// even), or `null` for a phase that did not happen or is unknown
    /// (negative) and for a value that is not a number (NaN and infinities,
    /// which `%.6f` wrote as `nan`/`inf`: not JSON).
    static func appendSeconds<Sink: ByteSink>(_ value: Double, to out: inout Sink) {
        guard value.isFinite, !(value < 0) else {
            append("null", to: &out)
            return
        }
        if value.sign == .minus { out.put(0x2D) }   // -0.0: "%.6f" wrote "-0.000000"
        let magnitude = value.magnitude
        let whole = magnitude.rounded(.down)
        // Exact: both lie in the same binade or the fraction is below 1.
        let fraction = magnitude - whole
        // fraction * 1e6 is rounded; the fused multiply-add gives the exact
        // error, so the true product is `scaled + error` with no loss.
        let scaled = fraction * 1e6
        let error = (-scaled).addingProduct(fraction, 1e6)
        var micros = scaled.rounded(.down)
        let rest = scaled - micros   // exact, on the grid of scaled's ulp
        let roundUp: Bool
        if rest > 0.5 {
            roundUp = true
        } else if rest < 0.5 {
            // Below 0.5 on a grid that holds 0.5: at least one ulp below,
            // and the error is at most half an ulp.
            roundUp = false
        } else if error != 0 {
            roundUp = error > 0
        } else {
            roundUp = micros.truncatingRemainder(dividingBy: 2) == 1   // an exact tie: to even
        }
        if roundUp { micros += 1 }
        var carry: UInt64 = 0
        var fractionDigits = UInt64(micros)
        if fractionDigits == 1_000_000 {
            fractionDigits = 0
            carry = 1
        }
        if whole < 9.0e18 {
            appendDecimal(UInt64(whole) + carry, to: &out)
        } else {
            // At or above 2^53 a double is an integer: no fraction, no carry.
            appendLargeInteger(whole, to: &out)
        }
        out.put(0x2E)
        // Six digits, zero-padded.
        var divisor: UInt64 = 100_000
        while divisor > 0 {
            out.put(0x30 + UInt8(truncatingIfNeeded: fractionDigits / divisor % 10))
            divisor /= 10
        }
    }

    /// The exact decimal digits of an integral double too large for UInt64
    /// (up to 309 digits): significand times a power of two, in base-10^9
    /// limbs. Only absurd timings take this path.
    private static func appendLargeInteger<Sink: ByteSink>(_ value: Double, to out: inout Sink) {
        let base: UInt64 = 1_000_000_000
        var significand = value.significandBitPattern | (1 << UInt64(Double.significandBitCount))
        var shift = Int(value.exponent) - Double.significandBitCount
        var limbs: [UInt64] = []   // least significant first, each below 10^9
        while significand > 0 {
            limbs.append(significand % base)
            significand /= base
        }
        while shift > 0 {
            let step = min(shift, 32)
            shift -= step
            var carry: UInt64 = 0
            for index in limbs.indices {
                let product = limbs[index] << UInt64(step) + carry   // < 2^30 * 2^32 + carry: fits
                limbs[index] = product % base
                carry = product / base
            }
            while carry > 0 {
                limbs.append(carry % base)
                carry /= base
            }
        }
        appendDecimal(limbs[limbs.count - 1], to: &out)
        for limb in limbs.dropLast().reversed() {
            var divisor: UInt64 = 100_000_000
            while divisor > 0 {
                out.put(0x30 + UInt8(truncatingIfNeeded: limb / divisor % 10))
                divisor /= 10
            }
        }
    }
}
