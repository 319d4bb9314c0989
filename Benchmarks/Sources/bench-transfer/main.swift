// bench-transfer: the common scenarios through the Transfer library's public
// async API: data(for:) (or, with `--api batch`, the batch API results(for:)),
// download(for:to:) (the body goes to disk in C),
// discard(for:) (counted in C, not stored), upload(for:fromFile:),
// segmentedDownload(with:to:segments:); with `--stream hook|slow`, a body
// dropped through the chunk hook or read through stream(for:); `--scenario
// soak` makes --count requests in --rounds rounds and samples RSS, fds and
// threads after each (issue 30 item 7).
import BenchCommon
import CoreMetrics
import Dispatch
import FoundationEssentials
import Glibc
import Logging
import Synchronization
import Tracing
import Transfer
import TransferMetrics
import TransferTracing

/// `--observe monitor`: one monitor that counts what it is told, on its own queue.
final class CountingMonitor: EventMonitor {
    let queue = DispatchQueue(label: "bench.monitor")
    let events = Atomic<Int>(0)
    func taskDidCreate(_ task: TransferTask) { events.add(1, ordering: .relaxed) }
    func taskDidResume(_ task: TransferTask) { events.add(1, ordering: .relaxed) }
    func task(_ task: TransferTask, didReceiveResponse response: HTTPResponse) { events.add(1, ordering: .relaxed) }
    func task(_ task: TransferTask, didCompleteWith metrics: TaskMetrics?, error: TransferError?) {
        events.add(1, ordering: .relaxed)
    }
}

/// `--observe completion`: one monitor that wants only completions, with
/// their metrics (it adds up the time to first byte): the fast path stays.
final class CompletionCountingMonitor: EventMonitor {
    let queue = DispatchQueue(label: "bench.completion")
    let completions = Atomic<Int>(0)
    let firstByteMicros = Atomic<Int>(0)
    var interests: EventMonitorInterests { .completion }
    func requestDidComplete(_ completion: CompletedRequest) {
        completions.add(1, ordering: .relaxed)
        firstByteMicros.add(Int((completion.metrics?.firstByte ?? 0) * 1e6), ordering: .relaxed)
    }
}

func makeSession(_ options: Options) throws -> SessionManager {
    var configuration = SessionConfiguration.default
    configuration.maxConnectionsPerHost = max(6, options.concurrency)
    configuration.caFile = options.cacert
    configuration.timeoutIntervalForRequest = 600
    // The peers do not ask for compressed bodies either.
    configuration.acceptsCompressedResponses = false
    switch options.observe {
    case "logger":
        // Logging configured but off for the per-request events (they are .debug).
        var logger = Logger(label: "bench")
        logger.logLevel = .info
        configuration.logger = logger
    case "monitor":
        configuration.eventMonitors = [CountingMonitor()]
    case "completion":
        configuration.eventMonitors = [CompletionCountingMonitor()]
    case "observability":
        // Issue 28: both integrations installed, with backends that record nothing.
        configuration.requestInstruments = [
            TransferMetrics(factory: NOOPMetricsHandler.instance), TransferTracing(tracer: NoOpTracer()),
        ]
    default:
        break
    }
    return try SessionManager(configuration: configuration)
}

func download(_ session: SessionManager, _ url: URL, to path: String, expected: Int64?, tally: Tally) async throws {
    let (file, response) = try await session.download(for: Request(url: url), to: URL(fileURLWithPath: path))
    tally.record(status: response.statusCode, bytes: fileSize(file.path), expected: expected,
                 httpVersion: response.httpVersion)
}

/// A byte count shared with the hook (which runs on the session's delegate queue).
final class Counter: @unchecked Sendable {  // `count` behind `lock`
    private let lock = BenchLock()
    private var count: Int64 = 0
    func add(_ n: Int) { lock.withLock { count += Int64(n) } }
    var value: Int64 { lock.withLock { count } }
}

/// The number of a /proc/self/status field (VmRSS, Threads, ...), 0 if /proc cannot tell.
func statusValue(_ field: String) -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = text.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") })
    else { return 0 }
    return line.split(whereSeparator: { $0 == " " || $0 == "\t" }).compactMap { Int($0) }.first ?? 0
}

/// VmRSS or VmHWM of this process in bytes (0 if /proc cannot tell).
func statusBytes(_ field: String) -> Int { statusValue(field) * 1024 }

func residentBytes() -> Int { statusBytes("VmRSS") }
func peakResidentBytes() -> Int { statusBytes("VmHWM") }

/// What the process holds: resident bytes, open file descriptors, threads.
struct ProcessSample {
    var rss: Int
    var fds: Int
    var threads: Int

    static func now() -> ProcessSample {
        let fds = directoryEntryCount("/proc/self/fd")
        // The listing itself holds one descriptor open while it reads.
        return ProcessSample(rss: residentBytes(), fds: max(0, fds - 1), threads: statusValue("Threads"))
    }
}

/// `count` copies of one request, made one at a time as the batch takes them.
struct RepeatedRequests: Sequence, Sendable {
    let request: Request
    let count: Int

    struct Iterator: IteratorProtocol {
        let request: Request
        var left: Int
        mutating func next() -> Request? {
            guard left > 0 else { return nil }
            left -= 1
            return request
        }
    }

    func makeIterator() -> Iterator { Iterator(request: request, left: count) }
}

/// `count` GETs of `request` at `--concurrency`: one `data(for:)` each
/// (`data`), one batch over an array (`batch`), or one over a lazy sequence
/// that makes each request only when the batch takes it (`lazy`).
func makeRequests(_ session: SessionManager, _ request: Request, count: Int, api: String, options: Options,
                  tally: Tally) async
{
    func record(_ element: BatchResult) {
        switch element.result {
        case .success(let (data, response)):
            tally.record(status: response.statusCode, bytes: Int64(data.count), expected: options.expectBytes,
                         httpVersion: response.httpVersion)
        case .failure(let error):
            tally.fail(error)
        }
    }
    let batch = BatchOptions(maxConcurrentRequests: options.concurrency)
    switch api {
    case "batch":
        // One batch: the engine gets the requests a window at a time and
        // Swift hears of their results once per loop pass.
        let requests = [Request](repeating: request, count: count)
        for await element in session.results(for: requests, options: batch) { record(element) }
    case "lazy":
        let requests = RepeatedRequests(request: request, count: count)
        for await element in session.results(for: requests, options: batch) { record(element) }
    default:
        await forEachBounded(count: count, concurrency: options.concurrency, tally: tally) { _ in
            let (data, response) = try await session.data(for: request)
            tally.record(status: response.statusCode, bytes: Int64(data.count), expected: options.expectBytes,
                         httpVersion: response.httpVersion)
        }
    }
}

await benchMain(client: "transfer") { options in
    if options.checkOnly { return 0 }
    let session = try makeSession(options)
    if let pin = options.pin {
        // Public-key pinning (AFSSLPinningModePublicKey) on top of chain validation against --cacert.
        var policy = SecurityPolicy(pinningMode: .publicKey)
        policy.pinnedPublicKeyHashes = [pin]
        try session.setSecurityPolicy(policy)
    }
    let tally = Tally()
    var note: String?
    var extra: [String: Any] = [:]
    let start = monotonicSeconds()
    switch options.scenario {
    case .download:
        do {
            try await download(session, try options.target, to: try options.requireOutput(),
                               expected: options.expectBytes, tally: tally)
        } catch {
            tally.fail(error)
        }
    case .downloadDiscard where options.stream == "hook":
        // Issue 14 item 2b: the chunks go to the hook and are not also kept.
        let seen = Counter()
        var hooks = SessionHooks()
        hooks.dataTaskDidReceiveData = { _, _, chunk in seen.add(chunk.count) }
        session.hooks = hooks
        let rss = residentBytes()
        do {
            let (data, response) = try await session.data(for: Request(url: try options.target))
            tally.record(status: data.isEmpty ? response.statusCode : 0, bytes: seen.value, expected: options.expectBytes,
                         httpVersion: response.httpVersion)
        } catch {
            tally.fail(error)
        }
        note = "peak RSS \((peakResidentBytes() - rss) >> 20) MiB over the RSS before the transfer"
    case .downloadDiscard where options.stream == "slow":
        // Issue 15 item 6: a reader that touches every byte; the engine waits for it.
        let rss = residentBytes()
        do {
            let (response, body) = try await session.stream(for: Request(url: try options.target))
            var count: Int64 = 0
            var sum: UInt64 = 0
            for try await chunk in body {
                count += Int64(chunk.count)
                for byte in chunk { sum &+= UInt64(byte) }
            }
            tally.record(status: response.statusCode, bytes: count, expected: options.expectBytes,
                         httpVersion: response.httpVersion)
            note = "peak RSS \((peakResidentBytes() - rss) >> 20) MiB over the RSS before the transfer (byte sum \(sum))"
        } catch {
            tally.fail(error)
        }
    case .downloadDiscard:
        do {
            let (bytes, response) = try await session.discard(for: Request(url: try options.target))
            tally.record(status: response.statusCode, bytes: bytes, expected: options.expectBytes,
                         httpVersion: response.httpVersion)
        } catch {
            tally.fail(error)
        }
    case .many, .tlsConnections:
        var request = Request(url: try options.target)
        if options.scenario == .tlsConnections { request.setValue("close", forHTTPHeaderField: "Connection") }
        let shared = request
        let rss = residentBytes()
        if let rate = options.rate {
            // Open loop (data(for:) per request): latency from when each was due.
            let latencies = Latencies()
            await forEachAtRate(count: options.count, rate: rate, maxOutstanding: options.maxOutstanding,
                                tally: tally, latencies: latencies) { _ in
                let (data, response) = try await session.data(for: shared)
                tally.record(status: response.statusCode, bytes: Int64(data.count), expected: options.expectBytes,
                             httpVersion: response.httpVersion)
            }
            extra = latencies.fields
        } else {
            await makeRequests(session, shared, count: options.count, api: options.api, options: options, tally: tally)
        }
        if options.api == "lazy" || (options.api == "batch" && options.count >= 100_000) {
            note = "peak RSS \((peakResidentBytes() - rss) >> 20) MiB over the RSS before the requests"
        }
    case .soak:
        // Issue 30 item 7: the same work in rounds; what the process holds
        // after each round should not grow from round 2 on.
        let request = Request(url: try options.target)
        let perRound = max(1, options.count / options.rounds)
        var samples: [ProcessSample] = []
        for _ in 0..<options.rounds {
            if options.api == "data" {
                // Half through data(for:) (64 tasks), half through the lazy batch API.
                await makeRequests(session, request, count: perRound / 2, api: "data", options: options, tally: tally)
                await makeRequests(session, request, count: perRound - perRound / 2, api: "lazy", options: options,
                                   tally: tally)
            } else {
                await makeRequests(session, request, count: perRound, api: options.api, options: options, tally: tally)
            }
            samples.append(ProcessSample.now())
        }
        let first = samples[min(1, samples.count - 1)]
        let last = samples[samples.count - 1]
        extra = [
            "rounds": samples.count,
            "rss_growth_bytes": last.rss - first.rss,
            "fd_growth": last.fds - first.fds,
            "thread_growth": last.threads - first.threads,
            "rss_kib": samples.map { $0.rss >> 10 },
            "fds": samples.map { $0.fds },
            "threads": samples.map { $0.threads },
        ]
        note = "from round \(min(2, samples.count)) to \(samples.count): RSS \(last.rss - first.rss) bytes, "
            + "fds \(last.fds - first.fds), threads \(last.threads - first.threads); peak RSS \(peakResidentBytes() >> 20) MiB"
    case .upload:
        let input = try options.requireInput()
        var request = Request(url: try options.target, method: .post)
        request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
        do {
            let (_, response) = try await session.upload(for: request, fromFile: URL(fileURLWithPath: input))
            tally.record(status: response.statusCode, bytes: fileSize(input), expected: nil,
                         httpVersion: response.httpVersion)
        } catch {
            tally.fail(error)
        }
    case .parallelDownloads:
        let urls = options.urls
        await forEachBounded(count: urls.count, concurrency: options.concurrency, tally: tally) { index in
            try await download(session, urls[index], to: try options.outputPath(index: index),
                               expected: options.expectBytes, tally: tally)
        }
    case .segmented:
        let download = session.segmentedDownload(with: Request(url: try options.target),
                                                 to: URL(fileURLWithPath: try options.requireOutput()),
                                                 segments: options.segments)
        do {
            let file = try await download.value
            // The response of a ranged segment is a 206; the whole file is what counts.
            let status = download.response.map { $0.statusCode == 206 ? 200 : $0.statusCode } ?? 0
            tally.record(status: status, bytes: fileSize(file.path), expected: options.expectBytes,
                         httpVersion: download.response?.httpVersion)
            note = "\(download.segmentsUsed) segments used"
        } catch {
            tally.fail(error)
        }
    }
    let wall = monotonicSeconds() - start
    session.invalidateAndCancel()
    return report(client: "transfer", options: options, wall: wall, tally: tally, note: note, extra: extra)
}

/// The entries of a directory without `.` and `..` (0 when it cannot be read).
func directoryEntryCount(_ path: String) -> Int {
    guard let directory = opendir(path) else { return 0 }
    defer { closedir(directory) }
    var count = 0
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
        if name != "." && name != ".." { count += 1 }
    }
    return count
}
