import Foundation
import Synchronization
import TestSupport
import Testing
import Transfer
import TransferFoundation

/// An ordered log of events, appended from any queue.
final class EventLog: Sendable {
    private let entries = Locked<[String]>([])
    func add(_ entry: String) { entries.withLock { $0.append(entry) } }
    var all: [String] { entries.withLock { $0 } }
    func index(of prefix: String) -> Int? { all.firstIndex { $0.hasPrefix(prefix) } }
}

/// Waits for a completion delivered by a callback (bounded by `timeout`).
func awaitCompletion<T: Sendable>(_ type: T.Type = T.self, timeout: Duration = .seconds(30),
                                  _ body: (@escaping @Sendable (T) -> Void) -> Void) async throws -> T {
    let box = Locked<T?>(nil)
    body { value in box.withLock { $0 = value } }
    let ok = await Wait.poll(timeout: timeout) { box.withLock { $0 != nil } }
    guard ok, let value = box.withLock({ $0 }) else { throw TransferError(.timedOut, "no completion within \(timeout)") }
    return value
}

@Suite("SessionManager parity with AFURLSessionManager", .serialized)
struct SessionParityTests {
    @Test("download hooks fire once each, in AFNetworking's order, before the completion handler")
    func downloadHookOrder() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        let log = EventLog()
        let directory = try TemporaryDirectory()
        let finalURL = directory.file("final.bin")
        var hooks = SessionHooks()
        hooks.downloadTaskDidWriteData = { _, _, _, _, _ in if log.index(of: "write") == nil { log.add("write") } }
        hooks.downloadTaskDidFinishDownloading = { _, _, location in
            log.add("finish:\(FileManager.default.fileExists(atPath: location.path))")
            return finalURL
        }
        hooks.taskDidFinishCollectingMetrics = { _, _, metrics in log.add("metrics:\(metrics.httpVersion)") }
        hooks.taskDidComplete = { _, _, error in log.add("complete:\(error == nil)") }
        session.hooks = hooks
        let observer = NotificationCenter.default.addObserver(forName: .transferTaskDidResume, object: nil, queue: nil) { _ in
            log.add("notify-resume")
        }
        defer { NotificationCenter.default.removeObserver(observer) }

        let (response, url, error): (HTTPResponse?, URL?, TransferError?) = try await awaitCompletion { done in
            let task = session.downloadTask(with: Request(url: server.url("/bytes/2000000?seed=4")),
                                            progress: { _ in }, destination: nil) { response, url, error in
                log.add("handler")
                done((response, url, error))
            }
            task.resume()
        }

        #expect(error == nil)
        #expect(response?.statusCode == 200)
        #expect(url == finalURL)
        #expect(try FileDigest.sha256(of: finalURL) == TestServer.sha256(seed: 4, count: 2_000_000))
        let events = log.all
        #expect(events.filter { $0 == "handler" }.count == 1)
        #expect(events.contains("finish:true"))
        let order = ["notify-resume", "write", "finish", "metrics", "complete", "handler"].map { log.index(of: $0) }
        #expect(order.allSatisfy { $0 != nil }, "\(events)")
        #expect(order.compactMap { $0 } == order.compactMap { $0 }.sorted(), "\(events)")
    }

    @Test("suspend and resume mid-download produce a byte-exact file on the same connection")
    func suspendResume() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        let destination = try TemporaryDirectory().file("paused.bin")
        let size = 4 << 20
        let states = EventLog()

        // The server sends 1 MiB, then waits at a gate that the test opens once the pause is
        // in effect: from then on data waits on the paused connection.
        let task = session.downloadTask(with: Request(url: server.url("/hold/\(size)?seed=9&after=1048576&gate=rest")),
                                        to: destination)
        task.observeState(on: .global()) { states.add("\($0)") }
        let paused = Atomic<Bool>(false)
        task.observeProgress(.download, on: .global()) { progress in
            if progress.completedUnitCount > 256 << 10, !paused.exchange(true, ordering: .relaxed) {
                task.suspend()
            }
        }
        let error = try await awaitCompletion(TransferError?.self) { done in
            // Only the download: the round trips below complete on the same session. (Its id,
            // not the task: the session keeps its hooks, and the task keeps the session.)
            let downloadID = task.taskIdentifier
            session.hooks.taskDidComplete = { _, completed, error in
                if completed.taskIdentifier == downloadID { done(error) }
            }
            task.resume()
            Task {
                // The observer runs after suspend() has queued the pause for the engine.
                let suspended = await Wait.poll(timeout: .seconds(10)) { states.all.contains("suspended") }
                // A round trip through the same engine: its commands run after the pause, so
                // once it is back the pause is in effect.
                let first = try? await session.data(for: Request(url: server.url("/bytes/12")))
                let frozen = task.countOfBytesReceived
                server.openGate("rest")
                let pending = await Wait.poll(timeout: .seconds(10)) { server.sentPastGate("rest") == 1 }
                // A second round trip is the observation window: the loop serves sockets
                // throughout, and the paused connection has data waiting.
                let second = try? await session.data(for: Request(url: server.url("/bytes/65536?seed=1")))
                if !suspended || !pending || first?.0.count != 12 || second?.0.count != 65536 {
                    states.add("window failed: suspended \(suspended), data pending \(pending)")
                } else {
                    states.add(task.countOfBytesReceived == frozen ? "frozen" : "moved")
                }
                task.resume()
            }
        }

        #expect(error == nil)
        #expect(try FileDigest.sha256(of: destination) == TestServer.sha256(seed: 9, count: size))
        #expect(states.all.contains("suspended"))
        #expect(states.all.contains("frozen"), "\(states.all)")
        // Resumed where it stopped, on the same connection: the download was requested once.
        #expect(server.requests.filter { $0.path == "/hold/\(size)" }.count == 1)
    }

    @Test("cancelling the task's Foundation Progress cancels the task")
    func progressCancelCancelsTask() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }

        let error = try await awaitCompletion(TransferError?.self) { done in
            let task = session.dataTask(with: Request(url: server.url("/slow?rate=65536&size=10000000"))) { _, _, error in
                done(error)
            }
            let progress = session.downloadProgress(for: task)
            task.resume()
            Task {
                let receiving = await Wait.poll(timeout: .seconds(10)) { task.countOfBytesReceived > 0 }
                #expect(receiving, "the task never received a byte before its progress was cancelled")
                progress.cancel()
            }
        }

        #expect(error?.code == .cancelled)
    }

    @Test("a data task can become a download task from its response hook")
    func becomeDownload() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let target = directory.file("became.bin")
        let log = EventLog()
        var hooks = SessionHooks()
        hooks.dataTaskDidReceiveResponse = { _, _, response in
            log.add("response:\(response.statusCode)")
            return .becomeDownload
        }
        hooks.dataTaskDidBecomeDownloadTask = { _, _, download in log.add("became:\(download.taskIdentifier)") }
        hooks.downloadTaskDidFinishDownloading = { _, _, _ in target }
        session.hooks = hooks

        let error = try await awaitCompletion(TransferError?.self) { done in
            session.hooks.taskDidComplete = { _, task, error in
                log.add("complete:\(type(of: task))")
                done(error)
            }
            session.dataTask(with: Request(url: server.url("/bytes/300000?seed=2"))).resume()
        }

        #expect(error == nil)
        #expect(log.all.first == "response:200")
        #expect(log.index(of: "became:") != nil)
        #expect(log.all.contains("complete:DownloadTask"))
        #expect(try FileDigest.sha256(of: target) == TestServer.sha256(seed: 2, count: 300_000))
    }

    @Test("the redirect hook can rewrite the next request, or refuse it")
    func redirectHook() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        let seen = EventLog()

        session.hooks.taskWillPerformHTTPRedirection = { _, _, response, next in
            seen.add("\(response.statusCode) \(next.url.path)")
            var rewritten = next
            rewritten.url = server.url("/bytes/1000?seed=8")
            return rewritten
        }
        let (data, response) = try await session.data(for: Request(url: server.url("/redirect/2")))

        #expect(response.statusCode == 200)
        #expect(FileDigest.sha256(data) == TestServer.sha256(seed: 8, count: 1000))
        #expect(seen.all == ["302 /redirect/1"])

        session.hooks.taskWillPerformHTTPRedirection = { _, _, _, _ in nil }
        let (_, refused) = try await session.data(for: Request(url: server.url("/redirect/2")))
        #expect(refused.statusCode == 302)
    }

    @Test("a Basic challenge goes to the hook, which can answer, fail, or cancel")
    func basicChallenge() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        let counts = EventLog()
        session.hooks.taskDidReceiveChallenge = { _, _, challenge in
            counts.add("\(challenge.previousFailureCount)")
            guard case .httpBasic(let realm) = challenge.kind, realm == "TestServer" else { return .performDefaultHandling }
            return challenge.previousFailureCount == 0
                ? .useCredential(Credential(user: "ann", password: "wrong"))
                : .useCredential(Credential(user: "ann", password: "s3cret"))
        }

        let (_, response) = try await session.data(for: Request(url: server.url("/basic-auth/ann/s3cret")))

        #expect(response.statusCode == 200)
        #expect(counts.all == ["0", "1"])

        session.hooks.taskDidReceiveChallenge = { _, _, _ in .cancelAuthenticationChallenge }
        await #expect { try await session.data(for: Request(url: server.url("/basic-auth/ann/s3cret"))) }
            throws: { ($0 as? TransferError)?.code == .cancelled }
        session.hooks.taskDidReceiveChallenge = { _, _, _ in .performDefaultHandling }
        let (_, unauthorized) = try await session.data(for: Request(url: server.url("/basic-auth/ann/s3cret")))
        #expect(unauthorized.statusCode == 401)
    }

    @Test("an invalidated session refuses new tasks and reports its invalidation once")
    func invalidation() async throws {
        let session = try makeSession()
        let invalidations = Atomic<Int>(0)
        session.hooks.sessionDidBecomeInvalid = { _, _ in invalidations.add(1, ordering: .relaxed) }

        session.invalidateSession(cancelPendingTasks: true)
        session.invalidateSession(cancelPendingTasks: true)

        await #expect { try await session.data(for: Request(url: URL(string: "http://127.0.0.1:1/")!)) }
            throws: { ($0 as? TransferError)?.code == .sessionInvalidated }
        #expect(await Wait.poll(timeout: .seconds(5)) { invalidations.load(ordering: .relaxed) == 1 })
        #expect(session.isInvalidated)
    }

    @Test("cancelling the Swift task cancels the transfer")
    func swiftCancellation() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }

        let work = Task { try await session.data(for: Request(url: server.url("/stall-headers"))) }
        try await Wait.until("the request reached the server") { server.requestCount > 0 }
        work.cancel()
        let result = await work.result

        #expect(throws: TransferError.self) { try result.get() }
        if case .failure(let error) = result { #expect((error as? TransferError)?.code == .cancelled) }
        #expect(await Wait.poll(timeout: .seconds(5)) { session.tasks.isEmpty })
    }

    @Test("10,000 tasks run and complete without leaking tasks, descriptors or memory")
    func manyTasksDoNotLeak() async throws {
        let nginx = try NginxFixture.shared()
        let file = try nginx.ensureFile(size: 100, seed: 1)
        let url = nginx.url(.http, file.path)
        let session = try makeSession { $0.maxConnectionsPerHost = 32 }
        defer { session.invalidateAndCancel() }
        let total = Sizes.underSanitizer ? 1_000 : 10_000
        let alive = Locked<[WeakTask]>([])
        // Warm up at the same concurrency: the pool's keep-alive connections,
        // caches and first allocations exist before we measure.
        #expect(await runLanes(session: session, url: url, total: 640, alive: alive) == 0)
        let fdsBefore = openDescriptors()
        let residentBefore = residentBytes()

        let failures = await runLanes(session: session, url: url, total: total, alive: alive)

        #expect(failures == 0)
        #expect(session.tasks.isEmpty)
        #expect(await Wait.poll(timeout: .seconds(5)) { alive.withLock { $0.allSatisfy { $0.task == nil } } })
        // A leak would be thousands. The pool itself may hold up to its 32
        // connections beyond the warm-up's: nginx closes a connection after
        // its keepalive_requests, libcurl opens another, and a connection the
        // peer closed is only noticed (and its descriptor closed) on next use.
        #expect(openDescriptors() <= fdsBefore + 34)
        // Under AddressSanitizer freed memory sits in its quarantine (256 MiB by default), so
        // resident size says nothing there; LeakSanitizer checks for leaks in that run instead.
        if !Sizes.underSanitizer {
            #expect(residentBytes() - residentBefore < 32 << 20)
        }
    }

    private func runLanes(session: SessionManager, url: URL, total: Int, alive: Locked<[WeakTask]>) async -> Int {
        await withTaskGroup(of: Int.self) { group -> Int in
            for lane in 0..<32 {
                group.addTask {
                    var failed = 0
                    for _ in stride(from: lane, to: total, by: 32) {
                        let ok: Bool = await withCheckedContinuation { done in
                            let task = session.dataTask(with: Request(url: url)) { response, data, error in
                                done.resume(returning: error == nil && response?.statusCode == 200 && data?.count == 100)
                            }
                            alive.withLock { $0.append(WeakTask(task)) }
                            task.resume()
                        }
                        if !ok { failed += 1 }
                    }
                    return failed
                }
            }
            return await group.reduce(0, +)
        }
    }
}

final class WeakTask: @unchecked Sendable {
    // @unchecked Sendable: written once in init; weak loads are atomic in Swift.
    weak var task: TransferTask?
    init(_ task: TransferTask) { self.task = task }
}

func openDescriptors() -> Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1 }

func residentBytes() -> Int {
    guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = statm.split(separator: " ")
    return fields.count > 1 ? (Int(fields[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE))) : 0
}
