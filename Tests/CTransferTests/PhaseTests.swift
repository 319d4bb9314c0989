import CTransfer
import Foundation
import Synchronization
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// One change of phase or pause reasons, as the loop's `on_phase` reported it.
struct PhaseEvent: Sendable, Equatable {
    var from: ct_phase
    var to: ct_phase
    var pausedBefore: UInt32
    var pausedAfter: UInt32
    var why: String
}

/// What one transfer ended with.
struct PhaseOutcome: Sendable {
    var code: ct_code
    var body: Data
    var message: String
    var sysErrno: Int32
    var httpStatus: Int = 0
    var bytesOnDisk: Int64 = 0
    var writeBufferPeak: Int64 = 0
    var reusedConnection = false
    var bodyBytesReceived: Int64 = 0
    var httpVersion: Int32 = 0
    var localPort: Int32 = 0
}

/// A loop whose phase trace and results the test reads. Callbacks run on the loop thread.
/// Shared state is in `Locked` (NSLock), which TSan understands, not in `Mutex`.
final class PhaseHarness: Sendable {
    let events = Locked<[UInt64: [PhaseEvent]]>([:])
    let outcomes = Locked<[UInt64: [PhaseOutcome]]>([:])
    /// When set, every transfer entering FINISHING is cancelled from on_phase.
    let cancelWhenFinishing = Atomic<Bool>(false)
    let lateCancels = Atomic<Int>(0)
    let loopBits = Atomic<Int>(0)

    var loop: OpaquePointer { OpaquePointer(bitPattern: loopBits.load(ordering: .acquiring))! }

    init(maxTotalConnections: Int64 = 0, maxConnectionsPerHost: Int64 = 0, cookieJar: OpaquePointer? = nil) throws {
        var config = ct_loop_config()
        ct_loop_config_init(&config)
        config.max_total_connections = maxTotalConnections
        config.max_connections_per_host = maxConnectionsPerHost
        config.cookie_jar = cookieJar
        config.callbacks.on_finish = { ctx, result in
            guard let ctx else { return }
            let entry = Unmanaged<PhaseEntry>.fromOpaque(ctx).takeRetainedValue()
            let r = result.pointee
            var body = Data()
            if let bytes = r.body, r.body_length > 0 { body = Data(bytes: bytes, count: Int(r.body_length)) }
            ct_buffer_free(r.body)
            let message = withUnsafeBytes(of: r.message) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            let outcome = PhaseOutcome(code: r.code, body: body, message: message, sysErrno: r.sys_errno,
                                       httpStatus: Int(r.http_status), bytesOnDisk: r.bytes_on_disk,
                                       writeBufferPeak: r.write_buffer_peak,
                                       reusedConnection: r.metrics.reused_connection != 0,
                                       bodyBytesReceived: r.metrics.body_bytes_received,
                                       httpVersion: r.metrics.http_version, localPort: r.metrics.local_port)
            entry.harness.outcomes.withLock { $0[entry.tag, default: []].append(outcome) }
        }
        config.on_phase = { ctx, event in
            guard let ctx else { return }
            let harness = Unmanaged<PhaseHarness>.fromOpaque(ctx).takeUnretainedValue()
            let e = event.pointee
            let record = PhaseEvent(
                from: e.from, to: e.to, pausedBefore: e.paused_before, pausedAfter: e.paused_after,
                why: String(cString: e.why))
            harness.events.withLock { $0[e.id, default: []].append(record) }
            if e.to == CT_PHASE_FINISHING && harness.cancelWhenFinishing.load(ordering: .acquiring) {
                // Queued from the loop thread: runs after this transfer is retired.
                if ct_loop_cancel(harness.loop, e.id, 0) == CT_OK {
                    harness.lateCancels.add(1, ordering: .relaxed)
                }
            }
        }
        // Unretained: the harness outlives the loop (destroy() joins it).
        config.batch_ctx = Unmanaged.passUnretained(self).toOpaque()
        var created: OpaquePointer?
        try #require(ct_loop_create(&config, &created) == CT_OK)
        loopBits.store(Int(bitPattern: UnsafeRawPointer(created!)), ordering: .releasing)
    }

    func destroy() {
        ct_loop_destroy(loop)
    }

    /// Submits `url`; returns (tag, engine id). The tag keys `outcomes`, the id keys `events`.
    func submit(
        _ url: String, flags: UInt32 = 0, maxRecvSpeed: Int64 = 0
    ) throws -> UInt64 {
        var spec = ct_transfer_spec()
        ct_transfer_spec_init(&spec)
        spec.flags |= flags
        spec.max_recv_speed = maxRecvSpeed
        let tag = UInt64.random(in: 1...UInt64.max)
        let entry = Unmanaged.passRetained(PhaseEntry(harness: self, tag: tag))
        var id: UInt64 = 0
        let code = url.withCString { pointer -> ct_code in
            spec.url = pointer
            return ct_loop_submit(loop, &spec, entry.toOpaque(), &id)
        }
        if code != CT_OK { entry.release() }
        try #require(code == CT_OK)
        // Tags and ids are both unique; keep one map by using the id as the tag afterwards.
        tags.withLock { $0[id] = tag }
        return id
    }

    let tags = Locked<[UInt64: UInt64]>([:])

    /// Submits `url` with the spec as `configure` leaves it. Strings made with `strings.dup` live
    /// until the submit returns (the engine copies them); a memory body must outlive the finish.
    func submit(_ url: String, configure: (inout ct_transfer_spec, CStrings) -> Void) throws -> UInt64 {
        var spec = ct_transfer_spec()
        ct_transfer_spec_init(&spec)
        let strings = CStrings()
        configure(&spec, strings)
        let tag = UInt64.random(in: 1...UInt64.max)
        let entry = Unmanaged.passRetained(PhaseEntry(harness: self, tag: tag))
        var id: UInt64 = 0
        let code = url.withCString { pointer -> ct_code in
            spec.url = pointer
            return ct_loop_submit(loop, &spec, entry.toOpaque(), &id)
        }
        withExtendedLifetime(strings) {}
        if code != CT_OK { entry.release() }
        try #require(code == CT_OK)
        tags.withLock { $0[id] = tag }
        return id
    }

    func trace(_ id: UInt64) -> [PhaseEvent] { events.withLock { $0[id] ?? [] } }
    func phases(_ id: UInt64) -> [ct_phase] { trace(id).filter { $0.from != $0.to }.map(\.to) }
    func results(_ id: UInt64) -> [PhaseOutcome] {
        guard let tag = tags.withLock({ $0[id] }) else { return [] }
        return outcomes.withLock { $0[tag] ?? [] }
    }

    func waitForPhase(_ id: UInt64, _ phase: ct_phase, timeout: Duration = .seconds(20)) throws {
        try Wait.until("transfer \(id) to reach \(String(cString: ct_phase_name(phase)))", timeout: timeout) {
            phases(id).contains(phase)
        }
    }

    func waitForEvent(_ id: UInt64, _ what: String, timeout: Duration = .seconds(20),
                      _ match: @escaping (PhaseEvent) -> Bool) throws {
        try Wait.until(what, timeout: timeout) { trace(id).contains(where: match) }
    }

    func waitForFinish(_ id: UInt64, timeout: Duration = .seconds(30)) throws -> PhaseOutcome {
        try Wait.until("transfer \(id) to finish", timeout: timeout) { !results(id).isEmpty }
        return results(id)[0]
    }
}

/// C strings for a spec, freed with the object.
final class CStrings {
    private var owned: [UnsafeMutablePointer<CChar>] = []
    func dup(_ s: String) -> UnsafePointer<CChar> {
        let p = strdup(s)!
        owned.append(p)
        return UnsafePointer(p)
    }
    private var arrays: [UnsafeMutablePointer<UnsafePointer<CChar>?>] = []
    func array(_ items: [String]) -> UnsafePointer<UnsafePointer<CChar>?> {
        let list = UnsafeMutablePointer<UnsafePointer<CChar>?>.allocate(capacity: max(1, items.count))
        for (i, item) in items.enumerated() { list[i] = dup(item) }
        arrays.append(list)
        return UnsafePointer(list)
    }
    deinit {
        owned.forEach { free($0) }
        arrays.forEach { $0.deallocate() }
    }
}

final class PhaseEntry {
    let harness: PhaseHarness
    let tag: UInt64
    init(harness: PhaseHarness, tag: UInt64) {
        self.harness = harness
        self.tag = tag
    }
}

@Suite("Transfer phases", .serialized)
struct PhaseTests {
    @Test("a simple GET goes connecting, head, receiving, finishing, done")
    func simpleGetPhases() throws {
        let server = try TestServer.start()
        defer { _ = server.stop() }
        let harness = try PhaseHarness()

        let id = try harness.submit(server.url("/bytes/1000?seed=3").absoluteString)
        let outcome = try harness.waitForFinish(id)
        try harness.waitForPhase(id, CT_PHASE_DONE)

        #expect(outcome.code == CT_OK)
        #expect(outcome.body == TestServer.bytes(seed: 3, count: 1000))
        #expect(harness.phases(id) == [CT_PHASE_CONNECTING, CT_PHASE_HEAD, CT_PHASE_RECEIVING,
                                       CT_PHASE_FINISHING, CT_PHASE_DONE])
        #expect(harness.trace(id).first?.from == CT_PHASE_QUEUED)
        #expect(ct_loop_illegal_transitions(harness.loop) == 0)
        harness.destroy()
        #expect(harness.results(id).count == 1)
    }

    @Test("a followed redirect goes back to connecting between hops")
    func redirectPhases() throws {
        let server = try TestServer.start()
        defer { _ = server.stop() }
        let harness = try PhaseHarness()

        let id = try harness.submit(server.url("/redirect/2").absoluteString)
        let outcome = try harness.waitForFinish(id)
        try harness.waitForPhase(id, CT_PHASE_DONE)

        #expect(outcome.code == CT_OK)
        let hop: [ct_phase] = [CT_PHASE_HEAD, CT_PHASE_CONNECTING]
        #expect(harness.phases(id) == [CT_PHASE_CONNECTING] + hop + hop + [CT_PHASE_HEAD, CT_PHASE_RECEIVING,
                                                                            CT_PHASE_FINISHING, CT_PHASE_DONE])
        #expect(harness.trace(id).filter { $0.why == "redirect" }.count == 2)
        #expect(ct_loop_illegal_transitions(harness.loop) == 0)
        harness.destroy()
    }

    @Test("resuming a user pause taken while rate-paused leaves the rate pause in force")
    func userResumeKeepsRatePause() throws {
        let server = try TestServer.start()
        defer { _ = server.stop() }
        let harness = try PhaseHarness()
        let count = 48 * 1024

        // Given a transfer held by its own rate limit (8 KiB/s: a 16 KiB burst, then debt)
        let id = try harness.submit(server.url("/bytes/\(count)?seed=5").absoluteString, maxRecvSpeed: 8192)
        try harness.waitForEvent(id, "the rate pause") { $0.pausedAfter & CT_PAUSE_RATE != 0 }

        // When the user suspends and resumes it
        #expect(ct_loop_pause(harness.loop, id) == CT_OK)
        try harness.waitForEvent(id, "the user pause") { $0.why == "suspended" }
        #expect(ct_loop_resume(harness.loop, id) == CT_OK)
        let outcome = try harness.waitForFinish(id)

        // Then only the rate timer lifts the rate pause, the user reason was kept apart, and the
        // body arrives intact
        let trace = harness.trace(id)
        let resumed = try #require(trace.first { $0.why == "resumed" })
        #expect(resumed.pausedBefore & CT_PAUSE_USER != 0)
        #expect(resumed.pausedAfter == resumed.pausedBefore & ~CT_PAUSE_USER)
        let rateCleared = trace.filter { $0.pausedBefore & CT_PAUSE_RATE != 0 && $0.pausedAfter & CT_PAUSE_RATE == 0 }
        #expect(!rateCleared.isEmpty)
        #expect(rateCleared.allSatisfy { $0.why == "rate timer" })
        #expect(outcome.code == CT_OK)
        #expect(outcome.body == TestServer.bytes(seed: 5, count: count))
        #expect(ct_loop_illegal_transitions(harness.loop) == 0)
        harness.destroy()
    }

    @Test("suspend while deciding, answer, resume: the answer does not lift the user pause")
    func suspendWhileDeciding() throws {
        let server = try TestServer.start()
        defer { _ = server.stop() }
        let harness = try PhaseHarness()
        let count = 200_000

        // Given a transfer waiting for its response disposition
        let id = try harness.submit(server.url("/bytes/\(count)?seed=9").absoluteString,
                                    flags: UInt32(CT_FLAG_AWAIT_DISPOSITION))
        try harness.waitForPhase(id, CT_PHASE_DECIDING)

        // When it is suspended, then allowed
        #expect(ct_loop_pause(harness.loop, id) == CT_OK)
        try harness.waitForEvent(id, "the user pause") { $0.why == "suspended" }
        #expect(ct_loop_set_disposition(harness.loop, id, CT_DISPOSITION_ALLOW, nil) == CT_OK)
        try harness.waitForPhase(id, CT_PHASE_RECEIVING)

        // Then it stays paused by the user until resumed
        let answered = harness.trace(id).filter { $0.why == "disposition answered" }
        #expect(!answered.isEmpty)
        #expect(answered.allSatisfy { $0.pausedAfter & CT_PAUSE_USER != 0 })
        #expect(harness.results(id).isEmpty)
        #expect(ct_loop_resume(harness.loop, id) == CT_OK)
        let outcome = try harness.waitForFinish(id)
        #expect(outcome.code == CT_OK)
        #expect(outcome.body == TestServer.bytes(seed: 9, count: count))
        #expect(ct_loop_illegal_transitions(harness.loop) == 0)
        harness.destroy()
    }

    /// Cancels `id` once `ready` holds and checks it ends exactly once, cancelled, from `phase`.
    private func cancel(_ harness: PhaseHarness, _ id: UInt64, from phase: ct_phase) throws {
        #expect(ct_loop_cancel(harness.loop, id, 0) == CT_OK)
        let outcome = try harness.waitForFinish(id)
        try harness.waitForPhase(id, CT_PHASE_DONE)
        #expect(outcome.code == CT_E_CANCELLED)
        let finishing = harness.trace(id).first { $0.to == CT_PHASE_FINISHING }
        #expect(finishing?.from == phase)
        #expect(finishing?.why == "cancelled")
    }

    @Test("cancel while the head is arriving ends the transfer exactly once, cancelled")
    func cancelInHead() throws {
        // Given a server that sends a status line and one header, then nothing
        let listener = try LoopbackListener.open(backlog: 4)
        defer { close(listener.fd) }
        let thread = Thread {
            let client = accept(listener.fd, nil, nil)
            guard client >= 0 else { return }
            defer { close(client) }
            var request = [UInt8]()
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !request.suffix(4).elementsEqual(Array("\r\n\r\n".utf8)) {
                let n = recv(client, &buffer, buffer.count, 0)
                if n <= 0 { return }
                request += buffer[0..<n]
            }
            let partial = Array("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n".utf8)
            _ = send(client, partial, partial.count, Int32(MSG_NOSIGNAL))
            // Held until the client hangs up.
            while recv(client, &buffer, buffer.count, 0) > 0 {}
        }
        thread.start()
        let harness = try PhaseHarness()

        // When the transfer is cancelled with its head half read
        let id = try harness.submit("http://127.0.0.1:\(listener.port)/half-head")
        try harness.waitForPhase(id, CT_PHASE_HEAD)

        // Then it ends once, cancelled, from the head phase
        try cancel(harness, id, from: CT_PHASE_HEAD)
        #expect(ct_loop_illegal_transitions(harness.loop) == 0)
        harness.destroy()
        #expect(harness.results(id).count == 1)
    }

    @Test("cancel in each phase ends the transfer exactly once, cancelled")
    func cancelInEachPhase() throws {
        let server = try TestServer.start()
        defer { _ = server.stop() }
        // One connection: a second transfer to the server waits in curl's queue.
        let harness = try PhaseHarness(maxTotalConnections: 1)

        // Connecting: the request went out, no status line came back
        let silent = try harness.submit(server.url("/stall-headers").absoluteString)
        try harness.waitForPhase(silent, CT_PHASE_CONNECTING)
        // Queued: waiting for a connection slot behind `silent`
        let waiting = try harness.submit(server.url("/bytes/10").absoluteString)
        try harness.waitForPhase(waiting, CT_PHASE_CONNECTING)
        #expect(server.waitForOpenConnections(1))
        try cancel(harness, waiting, from: CT_PHASE_CONNECTING)
        try cancel(harness, silent, from: CT_PHASE_CONNECTING)

        // Receiving: the head came, the body does not
        let stalled = try harness.submit(server.url("/stall?size=5000").absoluteString)
        try harness.waitForPhase(stalled, CT_PHASE_RECEIVING)
        try cancel(harness, stalled, from: CT_PHASE_RECEIVING)

        // Deciding: the head waits for its disposition
        let deciding = try harness.submit(server.url("/bytes/5000").absoluteString,
                                          flags: UInt32(CT_FLAG_AWAIT_DISPOSITION))
        try harness.waitForPhase(deciding, CT_PHASE_DECIDING)
        try cancel(harness, deciding, from: CT_PHASE_DECIDING)

        // Paused: receiving, suspended by the user
        let paused = try harness.submit(server.url("/hold/400000?gate=p").absoluteString)
        try harness.waitForPhase(paused, CT_PHASE_RECEIVING)
        #expect(ct_loop_pause(harness.loop, paused) == CT_OK)
        try harness.waitForEvent(paused, "the user pause") { $0.why == "suspended" }
        try cancel(harness, paused, from: CT_PHASE_RECEIVING)
        server.openGate("p")

        // Finishing: the outcome is decided; a cancel arriving now is a no-op
        harness.cancelWhenFinishing.store(true, ordering: .releasing)
        let finishing = try harness.submit(server.url("/bytes/10?seed=1").absoluteString)
        let finished = try harness.waitForFinish(finishing)
        try harness.waitForPhase(finishing, CT_PHASE_DONE)
        #expect(harness.lateCancels.load(ordering: .relaxed) == 1)
        #expect(finished.code == CT_OK)
        #expect(finished.body == TestServer.bytes(seed: 1, count: 10))

        #expect(ct_loop_illegal_transitions(harness.loop) == 0)
        harness.destroy()
        // Exactly once each, after the loop is gone too.
        for id in [silent, waiting, stalled, deciding, paused, finishing] {
            #expect(harness.results(id).count == 1)
        }
    }

    @Test("a download's file work is a phase: head work holds the body by its reason, then finishing, committing, done")
    func downloadCommitsInItsOwnPhase() throws {
        let server = try TestServer.start()
        defer { _ = server.stop() }
        let folder = try TemporaryDirectory()
        let harness = try PhaseHarness()
        let path = folder.file("out.bin").path

        // A download with a journal: its first journal write is head work on the worker
        let id = try harness.submit(server.url("/bytes/20000?seed=7").absoluteString) { spec, strings in
            spec.sink_kind = CT_SINK_FILE
            spec.sink_path = strings.dup(path)
            spec.journal_path = strings.dup(folder.file("out.journal").path)
        }
        let outcome = try harness.waitForFinish(id)
        try harness.waitForPhase(id, CT_PHASE_DONE)

        #expect(outcome.code == CT_OK)
        #expect(FileManager.default.contents(atPath: path) == TestServer.bytes(seed: 7, count: 20000))
        #expect(harness.phases(id).suffix(3) == [CT_PHASE_FINISHING, CT_PHASE_COMMITTING, CT_PHASE_DONE])
        #expect(harness.trace(id).contains { $0.to == CT_PHASE_COMMITTING && $0.why == "commit on the worker" })
        // The head work's reason is set when the work is handed over and cleared when it is done
        let trace = harness.trace(id)
        let held = try #require(trace.firstIndex { $0.why == "head file work" })
        #expect(trace[held].pausedAfter & CT_PAUSE_FILE != 0)
        let freed = try #require(trace.firstIndex { $0.why == "head file work done" })
        #expect(freed > held && trace[freed].pausedAfter & CT_PAUSE_FILE == 0)
        #expect(ct_loop_illegal_transitions(harness.loop) == 0)
        harness.destroy()
        #expect(harness.results(id).count == 1)
    }

    @Test("a failed download settles its part file in the committing phase too")
    func failedDownloadSettlesWhileCommitting() throws {
        let server = try TestServer.start()
        defer { _ = server.stop() }
        let folder = try TemporaryDirectory()
        let harness = try PhaseHarness()
        let path = folder.file("gone.bin").path

        let id = try harness.submit(server.url("/stall?size=5000").absoluteString) { spec, strings in
            spec.sink_kind = CT_SINK_FILE
            spec.sink_path = strings.dup(path)
        }
        try harness.waitForPhase(id, CT_PHASE_RECEIVING)
        #expect(ct_loop_cancel(harness.loop, id, 0) == CT_OK)
        let outcome = try harness.waitForFinish(id)
        try harness.waitForPhase(id, CT_PHASE_DONE)

        #expect(outcome.code == CT_E_CANCELLED)
        #expect(harness.trace(id).contains { $0.to == CT_PHASE_COMMITTING && $0.why == "settle on the worker" })
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(!FileManager.default.fileExists(atPath: path + ".part"))
        #expect(ct_loop_illegal_transitions(harness.loop) == 0)
        harness.destroy()
    }

    @Test("a 401 that libcurl answers goes head, challenged, head again; a final 401 goes challenged, receiving")
    func challengedPhase() throws {
        let server = try TestServer.start()
        defer { _ = server.stop() }
        let harness = try PhaseHarness()

        // Digest: the first 401 is answered by libcurl, the second head is the 200
        let answered = try harness.submit(server.url("/digest-auth/alice/secret").absoluteString) { spec, strings in
            spec.user_password = strings.dup("alice:secret")
            spec.auth_schemes = UInt32(CT_AUTH_DIGEST)
        }
        let ok = try harness.waitForFinish(answered)
        try harness.waitForPhase(answered, CT_PHASE_DONE)
        #expect(ok.code == CT_OK && ok.httpStatus == 200)
        #expect(harness.phases(answered) == [CT_PHASE_CONNECTING, CT_PHASE_HEAD, CT_PHASE_CHALLENGED, CT_PHASE_HEAD,
                                             CT_PHASE_RECEIVING, CT_PHASE_FINISHING, CT_PHASE_DONE])

        // Basic with the wrong password: sent up front, refused, and that 401 is the result
        let refused = try harness.submit(server.url("/basic-auth/alice/secret").absoluteString) { spec, strings in
            spec.user_password = strings.dup("alice:wrong")
        }
        let denied = try harness.waitForFinish(refused)
        try harness.waitForPhase(refused, CT_PHASE_DONE)
        #expect(denied.code == CT_OK && denied.httpStatus == 401)
        #expect(harness.phases(refused) == [CT_PHASE_CONNECTING, CT_PHASE_HEAD, CT_PHASE_CHALLENGED,
                                            CT_PHASE_RECEIVING, CT_PHASE_FINISHING, CT_PHASE_DONE])
        #expect(ct_loop_illegal_transitions(harness.loop) == 0)
        harness.destroy()
    }
}
