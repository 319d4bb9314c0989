// What every Swift benchmark client shares: the command line, the clock,
// bounded concurrency, and the one JSON line each run prints.
import FoundationEssentials
import Glibc
import Histogram

#if canImport(Glibc)
    import Glibc
#endif

/// The scenarios every client knows; a client that cannot do one says so
/// with exit status 3 and a note.
public enum Scenario: String, Sendable, CaseIterable {
    /// One URL, body to `--output`.
    case download
    /// One URL, body read and dropped.
    case downloadDiscard = "download-discard"
    /// `--count` GETs of `--url` at `--concurrency`, keep-alive, bodies in memory.
    case many
    /// POST of the file `--input` to `--url`.
    case upload
    /// Every URL of `--urls-file` at `--concurrency`, each to a file in `--output` (a directory).
    case parallelDownloads = "parallel-downloads"
    /// `--count` GETs of `--url` at `--concurrency`, each on a new (TLS) connection.
    case tlsConnections = "tls-connections"
    /// One URL fetched in `--segments` ranges to `--output` (Transfer only).
    case segmented
    /// `--count` GETs of `--url` at `--concurrency` in `--rounds` rounds, with
    /// RSS, open fds and threads sampled between rounds (Transfer only).
    case soak
}

/// The common arguments: `--scenario S --url U [--urls-file F] --concurrency N
/// --count N --output PATH --input PATH --cacert CA --pin SHA256 --expect-bytes N
/// --segments N`.
public struct Options: Sendable {
    public var scenario: Scenario = .download
    public var url: URL?
    public var urls: [URL] = []
    public var concurrency = 1
    public var count = 1
    public var output: String?
    public var input: String?
    public var cacert: String?
    /// A pin: base64 SHA-256 of the server's SubjectPublicKeyInfo.
    public var pin: String?
    /// Expected body size of each response (downloads and GETs); nil: not checked.
    public var expectBytes: Int64?
    public var segments = 4
    /// `--rounds N` (`soak`): the requests are made in this many rounds, sampled after each.
    public var rounds = 10
    /// `--check`: say whether the scenario is supported (exit 0, or 3 with a note) and do nothing.
    public var checkOnly = false
    /// `--api data|batch|lazy` (bench-transfer, `many` and `soak`): one `data(for:)` per request
    /// (default), the batch API over an array, or the batch API over a lazy sequence.
    public var api = "data"
    /// `--observe logger|monitor|completion|observability` (bench-transfer): a logger at `.info`
    /// (the per-request events are `.debug`: logging configured but off), or one event monitor
    /// that counts every event, or one that wants only completions, or the TransferMetrics and
    /// TransferTracing integrations with no-op backends. Measures what observation costs.
    public var observe: String?
    /// `--stream none|hook|slow` (bench-transfer, `download-discard`): drop the body in C
    /// (default), stream it through the `dataTaskDidReceiveData` hook, or read it through
    /// `stream(for:)` with a reader that touches every byte.
    public var stream = "none"
    /// `--rate R` (`many`): open loop. Request i is due at start + i/R whatever the
    /// others do, and its latency is measured from when it was due (wrk2's correction
    /// of coordinated omission); `--count` requests in all, `--concurrency` ignored.
    public var rate: Double?
    /// `--max-outstanding K` (with `--rate`): a request due while K are still running is not
    /// sent but counted as dropped (`dropped` in the result line), so that a client that fell
    /// behind does not pile up tasks without bound; nil: no cap.
    public var maxOutstanding: Int?

    public init(arguments: [String] = Array(CommandLine.arguments.dropFirst())) throws {
        var index = 0
        func value(_ name: String) throws -> String {
            guard index + 1 < arguments.count else { throw BenchError("missing value for \(name)") }
            index += 1
            return arguments[index]
        }
        func integer(_ name: String) throws -> Int {
            let text = try value(name)
            guard let number = Int(text), number >= 0 else { throw BenchError("bad \(name): \(text)") }
            return number
        }
        while index < arguments.count {
            let name = arguments[index]
            switch name {
            case "--scenario":
                let text = try value(name)
                guard let scenario = Scenario(rawValue: text) else { throw BenchError("unknown scenario \(text)") }
                self.scenario = scenario
            case "--url":
                let text = try value(name)
                guard let url = URL(string: text) else { throw BenchError("bad URL \(text)") }
                self.url = url
            case "--urls-file":
                let path = try value(name)
                let text = try String(contentsOfFile: path, encoding: .utf8)
                urls = text.split(whereSeparator: \.isNewline).compactMap { URL(string: String($0)) }
            case "--concurrency": concurrency = max(1, try integer(name))
            case "--count": count = try integer(name)
            case "--output": output = try value(name)
            case "--input": input = try value(name)
            case "--cacert": cacert = try value(name)
            case "--pin": pin = try value(name)
            case "--expect-bytes": expectBytes = Int64(try integer(name))
            case "--segments": segments = max(1, try integer(name))
            case "--rounds": rounds = max(1, try integer(name))
            case "--check": checkOnly = true
            case "--rate":
                guard let r = Double(try value(name)), r > 0 else { throw BenchError("--rate must be a positive number") }
                rate = r
            case "--max-outstanding": maxOutstanding = max(1, try integer(name))
            case "--stream":
                let text = try value(name)
                guard ["none", "hook", "slow"].contains(text) else { throw BenchError("unknown --stream \(text)") }
                stream = text
            case "--api":
                let text = try value(name)
                guard ["data", "batch", "lazy"].contains(text) else { throw BenchError("unknown --api \(text)") }
                api = text
            case "--observe":
                let text = try value(name)
                guard ["logger", "monitor", "completion", "observability"].contains(text) else { throw BenchError("unknown --observe \(text)") }
                observe = text
            default: throw BenchError("unknown argument \(name)")
            }
            index += 1
        }
        if url == nil, scenario != .parallelDownloads { throw BenchError("--url is required") }
        if scenario == .parallelDownloads, urls.isEmpty, let url { urls = Array(repeating: url, count: max(1, count)) }
    }

    /// The one URL of single-URL scenarios.
    public var target: URL {
        get throws {
            guard let url else { throw BenchError("--url is required") }
            return url
        }
    }

    public func requireOutput() throws -> String {
        guard let output else { throw BenchError("--output is required for \(scenario.rawValue)") }
        return output
    }

    public func requireInput() throws -> String {
        guard let input else { throw BenchError("--input is required for \(scenario.rawValue)") }
        return input
    }

    /// Where the i-th download of `parallel-downloads` goes.
    public func outputPath(index: Int) throws -> String {
        try requireOutput() + "/\(index).bin"
    }
}

/// A benchmark setup error (bad arguments, unsupported scenario).
public struct BenchError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// What one run counts; thread-safe so concurrent requests can add to it.
public final class Tally: @unchecked Sendable {  // state behind `lock`
    private let lock = BenchLock()
    private var _bytes: Int64 = 0
    private var _requests = 0
    private var _errors = 0
    private var _firstError: String?
    private var _httpVersion: String?

    public init() {}

    /// Records one finished request: counted as an error unless the status is
    /// 200 and the body size matches `expected` (when given).
    public func record(status: Int, bytes: Int64, expected: Int64?, httpVersion: String? = nil) {
        lock.lock()
        defer { lock.unlock() }
        _requests += 1
        if let httpVersion, _httpVersion == nil { _httpVersion = httpVersion }
        if status != 200 {
            _errors += 1
            if _firstError == nil { _firstError = "status \(status)" }
        } else if let expected, bytes != expected {
            _errors += 1
            if _firstError == nil { _firstError = "body \(bytes) bytes, expected \(expected)" }
        } else {
            _bytes += bytes
        }
    }

    public func fail(_ error: any Error) {
        lock.lock()
        defer { lock.unlock() }
        _requests += 1
        _errors += 1
        if _firstError == nil { _firstError = String(describing: error) }
    }

    public var snapshot: (bytes: Int64, requests: Int, errors: Int, firstError: String?, httpVersion: String?) {
        lock.lock()
        defer { lock.unlock() }
        return (_bytes, _requests, _errors, _firstError, _httpVersion)
    }
}

/// A monotonic clock in seconds.
public func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// The size of the file at `path`, or -1.
public func fileSize(_ path: String) -> Int64 {
    var st = stat()
    return stat(path, &st) == 0 ? Int64(st.st_size) : -1
}

/// Runs `body(i)` for i in 0..<count with at most `concurrency` in flight;
/// an error thrown by `body` is recorded in `tally`.
public func forEachBounded(count: Int, concurrency: Int, tally: Tally,
                           _ body: @escaping @Sendable (Int) async throws -> Void) async
{
    await withTaskGroup(of: Void.self) { group in
        var next = 0
        func add() {
            let index = next
            next += 1
            group.addTask {
                do { try await body(index) } catch { tally.fail(error) }
            }
        }
        while next < min(count, concurrency) { add() }
        while await group.next() != nil {
            if next < count { add() }
        }
    }
}

/// Latencies of an open-loop run, in microseconds, in an HdrHistogram (3 significant digits).
public final class Latencies: @unchecked Sendable {  // state behind `lock`
    private let lock = BenchLock()
    private var histogram = Histogram<UInt64>(highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: .three)

    public init() {}

    private var _dropped = 0
    private var _outstanding = 0

    /// Takes a slot for a request due now: false (and counted as dropped) when `cap` are
    /// running already.
    func take(cap: Int?) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if let cap, _outstanding >= cap {
            _dropped += 1
            return false
        }
        _outstanding += 1
        return true
    }

    func record(seconds: Double, releasing: Bool) {
        let micros = UInt64(max(0, min(seconds, 3600)) * 1e6)
        lock.lock()
        defer { lock.unlock() }
        if releasing { _outstanding -= 1 }
        _ = histogram.record(micros)
    }

    public func record(seconds: Double) {
        let micros = UInt64(max(0, min(seconds, 3600)) * 1e6)
        lock.lock()
        defer { lock.unlock() }
        _ = histogram.record(micros)
    }

    /// p50, p99, p99.9 and the maximum, in milliseconds, for the result line.
    public var fields: [String: Any] {
        lock.lock()
        defer { lock.unlock() }
        func ms(_ v: UInt64) -> Double { Double(v) / 1000 }
        return [
            "latency_p50_ms": ms(histogram.valueAtPercentile(50)),
            "latency_p99_ms": ms(histogram.valueAtPercentile(99)),
            "latency_p999_ms": ms(histogram.valueAtPercentile(99.9)),
            "latency_max_ms": ms(histogram.max),
            "latency_count": histogram.totalCount,
            "dropped": _dropped,
        ]
    }
}

/// Open loop: starts `body(i)` when it is due, at start + i / `rate`, however many are
/// still running, and records each one's latency from when it was due, not from when it
/// could start (so a stalled client is charged for the requests it delayed: wrk2's
/// correction). Requests due together are started together; the loop sleeps only when
/// it is at least a millisecond ahead, and a request it starts before it is due counts
/// from when it started. With `maxOutstanding`, a request due while that
/// many are running is not sent: it counts as dropped (`latencies.fields["dropped"]`),
/// has no latency and no place in `tally`.
public func forEachAtRate(count: Int, rate: Double, maxOutstanding: Int? = nil, tally: Tally,
                          latencies: Latencies, _ body: @escaping @Sendable (Int) async throws -> Void) async
{
    let start = monotonicSeconds()
    await withDiscardingTaskGroup { group in
        for index in 0..<count {
            let due = start + Double(index) / rate
            let ahead = due - monotonicSeconds()
            if ahead > 0.001 { try? await Task.sleep(nanoseconds: UInt64(ahead * 1e9)) }
            guard latencies.take(cap: maxOutstanding) else { continue }
            // Sent late: from when it was due (wrk2). Sent early (up to the millisecond the
            // loop does not sleep for): from when it was sent, not a negative time clamped to 0.
            let from = min(due, monotonicSeconds())
            group.addTask {
                do { try await body(index) } catch { tally.fail(error) }
                latencies.record(seconds: monotonicSeconds() - from, releasing: true)
            }
        }
    }
}

/// Prints the result line and returns the process exit status.
public func report(client: String, options: Options, wall: Double, tally: Tally, note: String? = nil,
                   extra: [String: Any] = [:]) -> Int32
{
    let s = tally.snapshot
    var fields: [String: Any] = [
        "client": client, "scenario": options.scenario.rawValue, "wall_s": wall,
        "bytes": s.bytes, "requests": s.requests, "errors": s.errors,
    ]
    fields.merge(extra) { old, _ in old }
    if let version = s.httpVersion { fields["http_version"] = version }
    if let error = s.firstError { fields["first_error"] = error }
    if let note { fields["note"] = note }
    printJSON(fields)
    return s.errors == 0 ? 0 : 1
}

/// Prints that `client` cannot run this scenario; exit status 3 tells the harness to skip it.
public func unsupported(client: String, options: Options, why: String) -> Int32 {
    printJSON(["client": client, "scenario": options.scenario.rawValue, "unsupported": true, "note": why])
    return 3
}

private func printJSON(_ fields: [String: Any]) {
    writeAll(STDOUT_FILENO, jsonText(fields) + "\n")
}

/// JSON of the values a result line holds (strings, integers, reals,
/// booleans, arrays and objects of them), keys sorted; anything else is null.
private func jsonText(_ value: Any) -> String {
    switch value {
    case let text as String:
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    case let flag as Bool: return flag ? "true" : "false"
    case let number as Int: return String(number)
    case let number as Int64: return String(number)
    case let number as UInt64: return String(number)
    case let number as Double: return number.isFinite ? "\(number)" : "null"
    case let list as [Any]: return "[" + list.map(jsonText).joined(separator: ",") + "]"
    case let object as [String: Any]:
        return "{" + object.keys.sorted().map { jsonText($0) + ":" + jsonText(object[$0]!) }.joined(separator: ",") + "}"
    default: return "null"
    }
}

/// Writes all of `text` to a descriptor.
private func writeAll(_ descriptor: Int32, _ text: String) {
    var bytes = Array(text.utf8)
    var offset = 0
    while offset < bytes.count {
        let written = bytes.withUnsafeMutableBytes { write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
        if written < 0 && errno == EINTR { continue }
        if written <= 0 { return }
        offset += written
    }
}

/// Parses the options, runs `body`, and exits with its status; a setup error
/// prints a message and exits with 2.
public func benchMain(client: String, _ body: @escaping @Sendable (Options) async throws -> Int32) async -> Never {
    let status: Int32
    do {
        let options = try Options()
        status = try await body(options)
    } catch {
        writeAll(STDERR_FILENO, "bench-\(client): \(error)\n")
        status = 2
    }
    exit(status)
}

/// A pthread mutex with lock/unlock/withLock (NSLock's shape, without Foundation).
public final class BenchLock: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    public init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    public func lock() { pthread_mutex_lock(mutex) }
    public func unlock() { pthread_mutex_unlock(mutex) }

    public func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock()
        defer { unlock() }
        return try body()
    }
}
