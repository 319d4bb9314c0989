import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Transfer

/// Records every event it gets, as short strings, and checks that each one
/// runs on its own queue.
private final class RecordingMonitor: EventMonitor {
    let queue: DispatchQueue
    private let key = DispatchSpecificKey<Bool>()
    private let log = Locked<[String]>([])
    private let offQueue = Atomic<Int>(0)

    init(label: String) {
        queue = DispatchQueue(label: label)
        queue.setSpecific(key: key, value: true)
    }

    var events: [String] { log.withLock { $0 } }
    /// Events delivered on another queue than ``queue``.
    var misdelivered: Int { offQueue.load(ordering: .relaxed) }

    private func add(_ event: String) {
        if DispatchQueue.getSpecific(key: key) == nil { offQueue.add(1, ordering: .relaxed) }
        log.withLock { $0.append(event) }
    }

    func taskDidCreate(_ task: TransferTask) { add("created") }
    func taskDidResume(_ task: TransferTask) { add("resumed") }
    func task(_ task: TransferTask, didFinishNameLookupIn seconds: TimeInterval) { add("dns") }
    func task(_ task: TransferTask, didConnectIn seconds: TimeInterval) { add("connect") }
    func task(_ task: TransferTask, didFinishTLSHandshakeIn seconds: TimeInterval) { add("tls") }
    func task(_ task: TransferTask, didReceiveResponse response: HTTPResponse) { add("response \(response.statusCode)") }
    func task(_ task: TransferTask, willRedirectFrom from: URL, to: URL, statusCode: Int) {
        add("redirect \(statusCode) \(from.path) -> \(to.path)")
    }
    func task(_ task: TransferTask, didCompleteWith metrics: TaskMetrics?, error: TransferError?) {
        add("completed \(error.map { "\($0.code)" } ?? "ok")")
    }
    func taskDidCancel(_ task: TransferTask) { add("cancelled") }
    func task(_ task: TransferTask, didAdaptRequest request: Request, result: Result<Request, TransferError>) {
        switch result {
        case .success: add("adapted")
        case .failure(let error): add("adapt failed \(error.code)")
        }
    }
    func task(_ task: TransferTask, willRetry attempt: Int, after error: TransferError) {
        add("retry \(attempt) \(error.code)")
    }
}

/// The lifecycle events, without the metrics-derived phases (which depend
/// on whether a connection was reused).
private func lifecycle(_ events: [String]) -> [String] {
    events.filter { !["dns", "connect", "tls"].contains($0) }
}

@Suite("Event monitors over real sockets", .serialized)
struct EventMonitorTests {
    @Test("two monitors on different queues get created, resumed, response, completed in order for a 200")
    func twoMonitorsSeeTheSameEvents() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let first = RecordingMonitor(label: "monitor.first")
        let second = RecordingMonitor(label: "monitor.second")
        let session = try makeSession { $0.eventMonitors = [first] }
        defer { session.invalidateAndCancel() }
        session.addEventMonitor(second)

        let (data, _) = try await session.data(for: Request(url: server.url("/bytes/1024")))

        #expect(data.count == 1024)
        try await Wait.until("both monitors see the completion") {
            first.events.last == "completed ok" && second.events.last == "completed ok"
        }
        #expect(lifecycle(first.events) == ["created", "resumed", "response 200", "completed ok"])
        #expect(first.events == second.events)
        // A fresh connection to 127.0.0.1: connect is reported, TLS is not.
        #expect(first.events.contains("connect"))
        #expect(!first.events.contains("tls"))
        #expect(first.misdelivered == 0 && second.misdelivered == 0)
    }

    @Test("redirects followed by the engine and by a redirect hook are reported hop by hop, before the response")
    func redirectsAreReported() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let expected = [
            "created", "resumed", "redirect 302 /redirect/2 -> /redirect/1", "redirect 302 /redirect/1 -> /redirect/0",
            "response 200", "completed ok",
        ]

        for throughHook in [false, true] {
            let first = RecordingMonitor(label: "monitor.first")
            let second = RecordingMonitor(label: "monitor.second")
            let session = try makeSession { $0.eventMonitors = [first, second] }
            defer { session.invalidateAndCancel() }
            if throughHook {
                // Redirects then go through Swift (TransferTask.followRedirect).
                session.hooks.taskWillPerformHTTPRedirection = { _, _, _, request in request }
            }

            let (_, response) = try await session.data(for: Request(url: server.url("/redirect/2")))

            #expect(response.statusCode == 200)
            try await Wait.until("the completion reaches both monitors") {
                first.events.last == "completed ok" && second.events.last == "completed ok"
            }
            #expect(lifecycle(first.events) == expected, "through the hook: \(throughHook)")
            #expect(first.events == second.events)
        }
    }

    @Test("a failed transfer reaches both monitors as completed with its error")
    func failureIsReported() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let first = RecordingMonitor(label: "monitor.first")
        let second = RecordingMonitor(label: "monitor.second")
        let session = try makeSession { $0.eventMonitors = [first, second] }
        defer { session.invalidateAndCancel() }

        var thrown: TransferError?
        do {
            _ = try await session.data(for: Request(url: server.url("/truncate/4000")))
        } catch {
            thrown = error
        }

        #expect(thrown?.code == .truncatedResponse)
        try await Wait.until("the completion reaches both monitors") {
            first.events.last?.hasPrefix("completed") == true && second.events.last?.hasPrefix("completed") == true
        }
        #expect(lifecycle(first.events) == ["created", "resumed", "response 200", "completed truncatedResponse"])
        #expect(first.events == second.events)
    }

    @Test("a cancelled transfer reports cancelled, then completed with the cancel")
    func cancelIsReported() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let first = RecordingMonitor(label: "monitor.first")
        let second = RecordingMonitor(label: "monitor.second")
        let session = try makeSession { $0.eventMonitors = [first, second] }
        defer { session.invalidateAndCancel() }
        let done = Atomic<Bool>(false)
        let task = session.dataTask(with: Request(url: server.url("/hold/200000?gate=monitors&after=1000"))) { _, _, _ in
            done.store(true, ordering: .releasing)
        }

        task.resume()
        try await Wait.until("the response head reaches the monitor") { first.events.contains("response 200") }
        task.cancel()

        try await Wait.until("the task completes") { done.load(ordering: .acquiring) }
        try await Wait.until("the completion reaches both monitors") {
            first.events.last?.hasPrefix("completed") == true && second.events.last?.hasPrefix("completed") == true
        }
        #expect(lifecycle(first.events) == ["created", "resumed", "response 200", "cancelled", "completed cancelled"])
        #expect(first.events == second.events)
        server.openGate("monitors")
    }

    @Test("a session without monitors hands out no event; one added later gets the next task's")
    func noMonitorNoCalls() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }

        _ = try await session.data(for: Request(url: server.url("/bytes/1024")))

        #expect(!session.hasEventMonitors)
        #expect(session.observation.dispatchedEvents == 0)

        let late = RecordingMonitor(label: "monitor.late")
        session.addEventMonitor(late)
        _ = try await session.data(for: Request(url: server.url("/bytes/1024")))

        #expect(session.hasEventMonitors)
        try await Wait.until("the late monitor sees the completion") { late.events.last == "completed ok" }
        #expect(lifecycle(late.events) == ["created", "resumed", "response 200", "completed ok"])
        #expect(session.observation.dispatchedEvents > 0)
    }

    @Test("over HTTPS the TLS handshake is reported between connect and completion")
    func tlsIsReported() async throws {
        let nginx = try NginxFixture.shared()
        let monitor = RecordingMonitor(label: "monitor.tls")
        let session = try makeSession {
            $0.caFile = nginx.caFile
            $0.eventMonitors = [monitor]
        }
        defer { session.invalidateAndCancel() }

        let (_, response) = try await session.data(for: Request(url: nginx.url(.https, "/")))

        #expect(response.statusCode > 0)
        try await Wait.until("the completion reaches the monitor") { monitor.events.last?.hasPrefix("completed") == true }
        let events = monitor.events
        let connect = try #require(events.firstIndex(of: "connect"))
        let tls = try #require(events.firstIndex(of: "tls"))
        #expect(connect < tls)
    }

    @Test("an interceptor's adaptations and retries reach every monitor, the retry before the attempt it starts")
    func retriesAreReported() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let first = RecordingMonitor(label: "monitor.retry.first")
        let second = RecordingMonitor(label: "monitor.retry.second")
        let policy = RetryPolicy(maximumAttempts: 3, initialDelay: .milliseconds(1), maximumDelay: .milliseconds(2))
        let session = try makeSession {
            $0.interceptor = policy
            $0.eventMonitors = [first, second]
        }
        defer { session.invalidateAndCancel() }

        let (_, response) = try await session.data(for: Request(url: server.url("/flaky/1?key=monitored")))

        #expect(response.statusCode == 200)
        try await Wait.until("both monitors see the completion") {
            first.events.last == "completed ok" && second.events.last == "completed ok"
        }
        let events = lifecycle(first.events)
        #expect(events.filter { $0 == "adapted" }.count == 2)
        let retry = try #require(events.firstIndex(of: "retry 1 unacceptableStatusCode"))
        let lastAdapt = try #require(events.lastIndex(of: "adapted"))
        let ok = try #require(events.lastIndex(of: "response 200"))
        #expect(retry < lastAdapt && lastAdapt < ok)
        #expect(first.events == second.events)
    }
}

/// Wants only completions: keeps the fast path.
private final class CompletionMonitor: EventMonitor {
    let queue = DispatchQueue(label: "completion-monitor")
    private let seen = Locked<[CompletedRequest]>([])
    private let lifecycleEvents = Locked(0)
    var interests: EventMonitorInterests { .completion }
    var completions: [CompletedRequest] { seen.withLock { $0 } }
    var otherEvents: Int { lifecycleEvents.withLock { $0 } }

    func requestDidComplete(_ completion: CompletedRequest) { seen.withLock { $0.append(completion) } }
    func taskDidCreate(_ task: TransferTask) { lifecycleEvents.withLock { $0 += 1 } }
    func task(_ task: TransferTask, didCompleteWith metrics: TaskMetrics?, error: TransferError?) {
        lifecycleEvents.withLock { $0 += 1 }
    }
}

@Suite("Event monitors that want only completions", .serialized)
struct CompletionMonitorTests {
    @Test("a completion-only monitor keeps the fast path and hears every request, with metrics, on every path")
    func completionsOnEveryPath() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let monitor = CompletionMonitor()
        let session = try makeSession { $0.eventMonitors = [monitor] }
        defer { session.invalidateAndCancel() }

        // Given a session whose one monitor wants only completions: the fast path stays open
        #expect(session.usesFastPath)
        #expect(!session.hasEventMonitors)

        // When requests go through data(for:), a batch, a failing request and a task
        _ = try await session.data(for: Request(url: server.url("/bytes/10?seed=1")))
        let batch = await session.data(for: (0..<5).map { Request(url: server.url("/bytes/\($0 + 1)?seed=2")) })
        #expect(batch.allSatisfy { (try? $0.get()) != nil })
        _ = try? await session.data(for: Request(url: server.url("/truncate/4000?send=1000")))
        let task = session.dataTask(with: Request(url: server.url("/status/404"))) { _, _, _ in }
        task.resume()

        // Then each one reaches the monitor once, with its response and metrics
        try await Wait.until("8 completions", timeout: .seconds(30)) { monitor.completions.count == 8 }
        let completions = monitor.completions
        let fast = completions.filter { $0.taskIdentifier == nil }
        #expect(fast.count == 7)
        #expect(completions.filter { $0.taskIdentifier == task.taskIdentifier }.count == 1)
        let ok = completions.filter { $0.error == nil }
        #expect(ok.count == 7)
        #expect(ok.allSatisfy { $0.metrics != nil && ($0.metrics?.total ?? -1) >= 0 })
        #expect(ok.compactMap { $0.response?.statusCode }.sorted() == [200, 200, 200, 200, 200, 200, 404])
        let failed = try #require(completions.first { $0.error != nil })
        #expect(failed.error?.code == .truncatedResponse)
        // And it got none of the per-task events, not even for the task
        #expect(monitor.otherEvents == 0)
    }

    @Test("a monitor that wants the per-task events still takes requests off the fast path")
    func fullMonitorClosesTheFastPath() throws {
        let session = try makeSession { $0.eventMonitors = [RecordingMonitor(label: "full")] }
        defer { session.invalidateAndCancel() }
        #expect(!session.usesFastPath)
        #expect(session.hasEventMonitors)
    }
}

/// Numbers every request it sees in an `x-wire` header and records how each ended.
private final class WireInstrument: RequestInstrument, @unchecked Sendable {
    // @unchecked Sendable: its state is under the lock.
    private let state = Locked<(started: Int, completed: [CompletedRequest])>((0, []))
    var started: Int { state.withLock { $0.started } }
    var completed: [CompletedRequest] { state.withLock { $0.completed } }

    func requestWillStart(_ request: inout Request) -> (any RequestObserver)? {
        let number = state.withLock { state -> Int in
            state.started += 1
            return state.started
        }
        request.headers["x-wire"] = "\(number)"
        return WireObserver(self)
    }

    fileprivate func record(_ completion: CompletedRequest) { state.withLock { $0.completed.append(completion) } }
}

private final class WireObserver: RequestObserver {
    private let instrument: WireInstrument
    init(_ instrument: WireInstrument) { self.instrument = instrument }
    func requestDidComplete(_ completion: CompletedRequest) { instrument.record(completion) }
}

@Suite("A segmented download to observers", .serialized)
struct SegmentedObservationTests {
    @Test("is one task to lifecycle monitors and its probe and each range are requests of their own")
    func segmentedDownloadIsObserved() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let lifecycleMonitor = RecordingMonitor(label: "monitor.segmented")
        let completions = CompletionMonitor()
        let instrument = WireInstrument()
        let session = try makeSession {
            $0.eventMonitors = [lifecycleMonitor, completions]
            $0.requestInstruments = [instrument]
        }
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let count = 4 << 20
        var options = DownloadOptions()
        options.minimumSegmentSize = 256 << 10

        // When a 4 MiB file comes over 4 ranges
        let download = session.segmentedDownload(with: Request(url: server.url("/bytes/\(count)?seed=31")),
                                                 to: directory.file("seg.bin"), segments: 4, options: options)
        _ = try await download.value
        #expect(download.segmentsUsed == 4)

        // Then the task's lifecycle is reported once, as for any task
        try await Wait.until("the download's completion reaches the lifecycle monitor") {
            lifecycleMonitor.events.contains("completed ok")
        }
        #expect(lifecycleMonitor.events.filter { ["created", "resumed", "completed ok"].contains($0) }
            == ["created", "resumed", "completed ok"])
        // And the HEAD probe and the 4 ranges are 5 requests, each started and completed once, with their metrics
        try await Wait.until("every wire request reaches the completion monitor") { completions.completions.count == 5 }
        #expect(instrument.started == 5)
        let seen = instrument.completed
        #expect(seen.count == 5)
        #expect(seen.allSatisfy { $0.error == nil && $0.metrics != nil && $0.taskIdentifier == download.taskIdentifier })
        #expect(seen.filter { $0.request.method == .head }.count == 1)
        #expect(seen.filter { $0.response?.statusCode == 206 }.count == 4)
        #expect(completions.completions.allSatisfy { $0.taskIdentifier == download.taskIdentifier })
        // Each went out with the header its instrument added: one number per wire request
        let numbers = Set(server.requests.compactMap { $0.header("x-wire") })
        #expect(numbers == Set((1...5).map(String.init)))
    }
}
