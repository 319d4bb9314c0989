import Foundation
import Testing
import Transfer
@testable import TransferCLI

/// The `--metrics` line as the CLI wrote it before ``MetricsFormat`` (with
/// `String(format:)` and string concatenation): the reference the new
/// formatter must match byte for byte.
private enum ReferenceMetricsLine {
    static func encode(_ record: MetricsWriter.Record) -> String {
        let m = record.metrics ?? TaskMetrics()
        var fields: [(String, String)] = [
            ("url", string(record.url)),
            ("status", record.status.map(String.init) ?? "null"),
            ("http_version", m.httpVersion.isEmpty ? "null" : string(m.httpVersion)),
            ("bytes_received", String(record.bytesReceived)),
            ("bytes_sent", String(record.bytesSent)),
            ("name_lookup", seconds(m.nameLookup)),
            ("connect", seconds(m.connect)),
            ("tls", seconds(m.tlsHandshake)),
            ("request_sent", seconds(m.requestSent)),
            ("first_byte", seconds(m.firstByte)),
            ("total", seconds(m.total)),
            ("redirect", seconds(m.redirectDuration)),
            ("redirects", String(m.redirectCount)),
            ("reused_connection", m.reusedConnection ? "true" : "false"),
            ("remote_address", m.remoteAddress.isEmpty ? "null" : string(m.remoteAddress)),
        ]
        if let failure = record.failure {
            fields.append(("error_code", String(failure.status.rawValue)))
            fields.append(("error_message", string(failure.status.className + ": " + failure.detail)))
        } else {
            fields.append(("error_code", "0"))
            fields.append(("error_message", "null"))
        }
        return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }

    static func seconds(_ value: Double) -> String {
        value < 0 ? "null" : String(format: "%.6f", value)
    }

    static func string(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    out += String(format: "\\u%04x", scalar.value)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}

/// SplitMix64: the same numbers on every run.
private struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite("transfer command: metrics formatting")
struct MetricsFormatTests {
    private func seconds(_ value: Double) -> String {
        var bytes: [UInt8] = []
        MetricsFormat.appendSeconds(value, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    private func integer(_ value: Int64) -> String {
        var bytes: [UInt8] = []
        MetricsFormat.appendInteger(value, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    private func string(_ value: String) -> String {
        var bytes: [UInt8] = []
        MetricsFormat.appendString(value, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    @Test("seconds match %.6f at zero, at rounding ties and carries, and at huge values")
    func secondsEdgeValues() {
        let values: [Double] = [
            0, -0.0, 1e-7, 4e-7, 5e-7, 5.000000000000001e-7, 0.0000005, 0.0000015, 0.0000025,
            // Exact binary ties at the sixth decimal: 7812.5 and 23437.5 micros (half to even).
            0.0078125, 0.0234375, 1.0078125, 1.0234375,
            // Carries into the whole seconds.
            0.9999995, 0.99999949999, 0.9999994999999999, 0.99999999, 9.9999999, 99.9999995,
            1, 1.5, 0.1, 0.2, 0.3, 0.000123, 123.456789, 3600.000001, 86_400.5,
            Double.leastNonzeroMagnitude, Double.leastNormalMagnitude, Double.ulpOfOne,
            1e9, 4_294_967_296.000001, 9_007_199_254.740991, 9.007199254740991e15,
            9_007_199_254_740_992, 9_007_199_254_740_994, 9.0e18, 9.2e18, 9_223_372_036_854_775_808,
            18_446_744_073_709_551_616, 1e20, 1.2345678901234567e25, 1e100, 1e300,
            Double.greatestFiniteMagnitude,
        ]
        for value in values {
            #expect(seconds(value) == String(format: "%.6f", value), "\(value)")
        }
    }

    @Test("seconds match %.6f over 200,000 seeded values of every magnitude")
    func secondsSweep() {
        var generator = SeededGenerator(state: 14)
        var mismatches: [Double] = []
        for round in 0..<200_000 {
            let value: Double
            switch round % 4 {
            case 0: value = Double.random(in: 0..<1, using: &generator)
            case 1: value = Double.random(in: 0..<100_000, using: &generator)
            case 2:
                // Near a half micro-second: where a careless rounding goes wrong.
                let micros = Double(generator.next() % 10_000_000)
                value = (micros + 0.5) / 1e6 + Double(Int64(generator.next() % 5) - 2) * 1e-17
            default:
                // Any finite positive double, from its bits.
                value = Double(bitPattern: generator.next() & 0x7FEF_FFFF_FFFF_FFFF)
            }
            if seconds(value) != String(format: "%.6f", value) { mismatches.append(value) }
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(10).map { "\($0.bitPattern)" })")
    }

    @Test("negative (unknown) timings are null, and so are NaN and infinities, which %.6f made invalid JSON")
    func absentTimings() {
        for value in [-1, -0.000001, -1e300, -Double.leastNonzeroMagnitude] as [Double] {
            #expect(seconds(value) == "null")
            #expect(seconds(value) == ReferenceMetricsLine.seconds(value))
        }
        for value in [Double.nan, -Double.nan, Double.infinity, -Double.infinity] {
            #expect(seconds(value) == "null", "\(value)")
        }
    }

    @Test("integers match String(Int64) from Int64.min to Int64.max")
    func integers() {
        let values: [Int64] = [0, 1, 9, 10, 99, 100, 1023, 1024, 65_536, -1, -10, 1 << 53, Int64(Int32.max) + 1,
                               999_999_999_999_999_999, Int64.max, Int64.min, Int64.min + 1]
        for value in values {
            #expect(integer(value) == String(value))
        }
    }

    @Test("strings escape like the reference: quotes, backslashes, controls, DEL; UTF-8 passes through")
    func strings() {
        let values = [
            "", "http://127.0.0.1:8080/a?b=c&d=e", "quote \" and backslash \\", "tab\tnew\nline\rret",
            "\u{0}\u{1}\u{8}\u{B}\u{C}\u{1B}\u{1F}\u{7F}", "C1 \u{80}\u{85}\u{9F} stays", "é ü 日本 🐈 e\u{301}",
            "\\u0000 literal", String(repeating: "a\"", count: 500),
        ]
        for value in values {
            #expect(string(value) == ReferenceMetricsLine.string(value), "\(value.debugDescription)")
        }
    }

    @Test("whole lines match the reference: success, failure, no metrics, odd values")
    func wholeLines() {
        var full = TaskMetrics()
        full.nameLookup = 0.000012
        full.connect = 0.0001235
        full.tlsHandshake = 0
        full.requestSent = 0.0078125
        full.firstByte = 1.9999996
        full.total = 123_456.789
        full.redirectDuration = -1
        full.redirectCount = 3
        full.httpVersion = "1.1"
        full.reusedConnection = true
        full.remoteAddress = "::1"
        var odd = TaskMetrics()
        odd.httpVersion = "2"
        odd.total = 1e300
        odd.remoteAddress = "127.0.0.1"
        // The widest line there is: every time at the largest double, every
        // number at its longest, every string byte escaped as \u00XX (the
        // line is written into memory sized for it beforehand).
        var widest = TaskMetrics()
        widest.nameLookup = Double.greatestFiniteMagnitude
        widest.connect = Double.greatestFiniteMagnitude
        widest.tlsHandshake = Double.greatestFiniteMagnitude
        widest.requestSent = Double.greatestFiniteMagnitude
        widest.firstByte = Double.greatestFiniteMagnitude
        widest.total = Double.greatestFiniteMagnitude
        widest.redirectDuration = Double.greatestFiniteMagnitude
        widest.redirectCount = Int.min
        widest.httpVersion = String(repeating: "\u{1}", count: 300)
        widest.remoteAddress = String(repeating: "\u{7F}", count: 300)
        let controls = String(repeating: "\u{2}", count: 1000)
        let records = [
            MetricsWriter.Record(url: controls, status: Int.min, metrics: widest, bytesReceived: Int64.min,
                                 bytesSent: Int64.min, failure: Failure(.cannotConnect, controls)),
            MetricsWriter.Record(url: "http://127.0.0.1/x", status: 200, metrics: full, bytesReceived: 1024,
                                 bytesSent: 0, failure: nil),
            MetricsWriter.Record(url: "http://h/\u{1}\"", status: nil, metrics: nil, bytesReceived: 0, bytesSent: 0,
                                 failure: Failure(.cannotConnect, "refused; errno 111: \"Connection refused\"\n")),
            MetricsWriter.Record(url: "https://h/", status: 404, metrics: odd, bytesReceived: Int64.max,
                                 bytesSent: -1, failure: Failure(.status, "HTTP 404 (accepted: 200-299)")),
            MetricsWriter.Record(url: "", status: 0, metrics: TaskMetrics(), bytesReceived: 0, bytesSent: 0,
                                 failure: nil),
        ]
        for record in records {
            #expect(MetricsWriter.encode(record) == ReferenceMetricsLine.encode(record))
        }
    }

    @Test("a line is one JSON object followed by one newline")
    func lineIsJSON() throws {
        var bytes: [UInt8] = []
        let record = MetricsWriter.Record(url: "http://h/é\u{7F}", status: 200, metrics: nil, bytesReceived: 5,
                                          bytesSent: 0, failure: nil)

        MetricsFormat.appendLine(record, to: &bytes)

        #expect(bytes.last == 0x0A)
        #expect(bytes.filter { $0 == 0x0A }.count == 1)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(bytes.dropLast())) as? [String: Any])
        #expect(object["url"] as? String == "http://h/é\u{7F}")
        #expect(object["total"] is NSNull)
    }
}
