import CTransfer
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

/// Results of one loop's transfers, written by on_finish (loop thread).
private final class PoolLog: Sendable {
    let codes = Locked<[UInt64: ct_code]>([:])
    let messages = Locked<[String]>([])
    let finished = Atomic<Int>(0)
    let responded = Locked<Set<UInt64>>([])
    let slots: DispatchSemaphore
    init(concurrency: Int) { slots = DispatchSemaphore(value: concurrency) }
}

private final class PoolEntry {
    let log: PoolLog
    let tag: UInt64
    init(log: PoolLog, tag: UInt64) {
        self.log = log
        self.tag = tag
    }
}

private func poolConfig(caFile: UnsafePointer<CChar>?) -> ct_loop_config {
    var config = ct_loop_config()
    ct_loop_config_init(&config)
    config.ca_file = caFile
    config.callbacks.on_response = { ctx, _ in
        guard let ctx else { return }
        let entry = Unmanaged<PoolEntry>.fromOpaque(ctx).takeUnretainedValue()
        _ = entry.log.responded.withLock { $0.insert(entry.tag) }
    }
    config.callbacks.on_finish = { ctx, result in
        guard let ctx else { return }
        let entry = Unmanaged<PoolEntry>.fromOpaque(ctx).takeRetainedValue()
        // A discard that got anything but the file counts as failed.
        let code = result.pointee.code == CT_OK && result.pointee.http_status != 200
            ? CT_E_HTTP_STATUS : result.pointee.code
        entry.log.codes.withLock { $0[entry.tag] = code }
        if code != CT_OK {
            let message = withUnsafeBytes(of: result.pointee.message) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            entry.log.messages.withLock { $0.append(message) }
        }
        ct_buffer_free(result.pointee.body)
        entry.log.finished.add(1, ordering: .releasing)
        entry.log.slots.signal()
    }
    return config
}

/// Submits a GET of `url` (body counted, not stored); returns its id or 0.
private func submitGet(_ loop: OpaquePointer, _ url: String, log: PoolLog, tag: UInt64,
                       sink: ct_sink_kind = CT_SINK_DISCARD) -> UInt64 {
    var spec = ct_transfer_spec()
    ct_transfer_spec_init(&spec)
    spec.sink_kind = sink
    return url.withCString { pointer -> UInt64 in
        spec.url = pointer
        var id: UInt64 = 0
        let box = Unmanaged.passRetained(PoolEntry(log: log, tag: tag))
        guard ct_loop_submit(loop, &spec, box.toOpaque(), &id) == CT_OK else {
            box.release()
            return 0
        }
        return id
    }
}

@Suite("Easy handle pool", .serialized,
       .enabled(if: NginxFixture.isInstalled, "nginx is not installed (apt-get install nginx)"))
struct HandlePoolTests {
    @Test("thousands of HTTP/2 discards at 64 concurrent all succeed: no pooled handle is poisoned")
    func manyHTTP2Discards() throws {
        let nginx = try NginxFixture.shared()
        let file = try nginx.ensureFile(size: 1024, seed: 12)
        let url = nginx.url(.http2, "/files/" + URL(fileURLWithPath: file.path).lastPathComponent).absoluteString
        let total = ProcessInfo.processInfo.environment["TRANSFER_TEST_SANITIZER"] == nil ? 5_000 : 600
        let log = PoolLog(concurrency: 64)
        let caFile = nginx.caFile
        let loop: OpaquePointer = try caFile.withCString { ca in
            var config = poolConfig(caFile: ca)
            var created: OpaquePointer?
            try #require(ct_loop_create(&config, &created) == CT_OK)
            return try #require(created)
        }
        defer { ct_loop_destroy(loop) }

        // When: at most 64 in flight, the next one submitted as one finishes
        for tag in 0..<total {
            try #require(log.slots.wait(timeout: .now() + 60) == .success, "a transfer finished")
            try #require(submitGet(loop, url, log: log, tag: UInt64(tag)) != 0)
        }
        try Wait.until("\(total) transfers to finish", timeout: .seconds(300), interval: .milliseconds(20)) {
            log.finished.load(ordering: .acquiring) == total
        }

        // Then
        let codes = log.codes.withLock { $0 }
        let failed = codes.values.filter { $0 != CT_OK }.count
        #expect(codes.count == total)
        #expect(failed == 0, "\(failed) failed, first: \(log.messages.withLock { $0.first ?? "" })")
    }

    @Test("a handle cancelled while pending is not reused: the transfers after it succeed")
    func cancelWhilePendingThenReuse() throws {
        let nginx = try NginxFixture.shared()
        let listener = try AcceptingListener()
        let log = PoolLog(concurrency: 1)
        var config = poolConfig(caFile: nil)
        config.max_connections_per_host = 1     // the second transfer waits: pending
        var created: OpaquePointer?
        try #require(ct_loop_create(&config, &created) == CT_OK)
        let loop = try #require(created)
        defer { ct_loop_destroy(loop) }
        let hang = "http://127.0.0.1:\(listener.port)/hang"

        // Given one transfer holding the only connection to a silent server
        let holder = submitGet(loop, hang, log: log, tag: 1)
        try #require(holder != 0)
        try Wait.until("the holder to connect", timeout: .seconds(10)) { listener.acceptedCount() >= 1 }
        // and one that curl parks as pending behind it (two loop passes:
        // the command, then curl's zero timeout that runs the new handle)
        let wakeups = ct_loop_wakeups(loop)
        let pending = submitGet(loop, hang, log: log, tag: 2)
        try #require(pending != 0)
        try Wait.until("curl to run the new transfer", timeout: .seconds(10)) {
            ct_loop_wakeups(loop) >= wakeups + 2
        }

        // When both are cancelled (their handles leave the multi unfinished)
        #expect(ct_loop_cancel(loop, pending, 0) == CT_OK)
        #expect(ct_loop_cancel(loop, holder, 0) == CT_OK)
        try Wait.until("both cancellations", timeout: .seconds(10)) { log.finished.load(ordering: .acquiring) == 2 }

        // Then the next transfers, which take handles from the pool, succeed
        let file = try nginx.ensureFile(size: 4096, seed: 13)
        let name = URL(fileURLWithPath: file.path).lastPathComponent
        for tag in 3..<7 {
            try #require(submitGet(loop, nginx.url(.http, "/files/" + name).absoluteString, log: log,
                                   tag: UInt64(tag), sink: CT_SINK_MEMORY) != 0)
        }
        try Wait.until("the transfers after the cancellations", timeout: .seconds(30)) {
            log.finished.load(ordering: .acquiring) == 6
        }
        let codes = log.codes.withLock { $0 }
        #expect(codes[1] == CT_E_CANCELLED && codes[2] == CT_E_CANCELLED)
        #expect((3..<7).allSatisfy { codes[UInt64($0)] == CT_OK },
                "\(log.messages.withLock { $0 })")
    }
}

extension HandlePoolTests {
    @Test("a handle cancelled mid-stream on a shared HTTP/2 connection is not reused: the transfers after it succeed")
    func cancelOnSharedConnectionThenReuse() throws {
        let nginx = try NginxFixture.shared()
        let big = URL(fileURLWithPath: try nginx.ensureFile(size: 4 << 20, seed: 14).path).lastPathComponent
        let small = URL(fileURLWithPath: try nginx.ensureFile(size: 4096, seed: 13).path).lastPathComponent
        let slow = nginx.url(.http2, "/slow/files/" + big).absoluteString + "?rate=65536"
        let log = PoolLog(concurrency: 1)
        let loop: OpaquePointer = try nginx.caFile.withCString { ca in
            var config = poolConfig(caFile: ca)
            config.max_connections_per_host = 1     // every stream on one connection
            var created: OpaquePointer?
            try #require(ct_loop_create(&config, &created) == CT_OK)
            return try #require(created)
        }
        defer { ct_loop_destroy(loop) }

        // Given two slow streams running on one HTTP/2 connection
        let holder = submitGet(loop, slow, log: log, tag: 1)
        let victim = submitGet(loop, slow, log: log, tag: 2)
        try #require(holder != 0 && victim != 0)
        try Wait.until("both streams to get their response", timeout: .seconds(20)) {
            log.responded.withLock { $0.isSuperset(of: [1, 2]) }
        }

        // When one is cancelled while the other still uses the connection
        #expect(ct_loop_cancel(loop, victim, 0) == CT_OK)
        try Wait.until("the cancellation", timeout: .seconds(10)) { log.finished.load(ordering: .acquiring) == 1 }

        // Then the next transfers, which take handles from the pool, succeed
        for tag in 3..<7 {
            try #require(submitGet(loop, nginx.url(.http2, "/files/" + small).absoluteString, log: log,
                                   tag: UInt64(tag), sink: CT_SINK_MEMORY) != 0)
        }
        try Wait.until("the transfers after the cancellation", timeout: .seconds(30)) {
            log.finished.load(ordering: .acquiring) == 5
        }
        #expect(ct_loop_cancel(loop, holder, 0) == CT_OK)
        try Wait.until("the holder's cancellation", timeout: .seconds(10)) {
            log.finished.load(ordering: .acquiring) == 6
        }
        let codes = log.codes.withLock { $0 }
        #expect(codes[1] == CT_E_CANCELLED && codes[2] == CT_E_CANCELLED)
        #expect((3..<7).allSatisfy { codes[UInt64($0)] == CT_OK }, "\(log.messages.withLock { $0 })")
    }
}

/// A loopback listener that accepts connections (counting them) and never
/// answers: requests on them wait until cancelled.
private final class AcceptingListener: Sendable {
    private final class Accepted: Sendable {
        let fds = Locked<[Int32]>([])
    }

    let port: UInt16
    private let fd: Int32
    private let accepted = Accepted()

    init() throws {
        let listener = try LoopbackListener.open(backlog: 16)
        fd = listener.fd
        port = listener.port
        let accepted = self.accepted
        Thread {
            while true {
                let client = accept(listener.fd, nil, nil)
                if client < 0 {
                    if errno == EINTR { continue }
                    return                       // the listener was shut down
                }
                accepted.fds.withLock { $0.append(client) }
            }
        }.start()
    }

    func acceptedCount() -> Int { accepted.fds.withLock { $0.count } }

    deinit {
        shutdown(fd, Int32(SHUT_RDWR))          // wakes accept() with an error
        close(fd)
        for client in accepted.fds.withLock({ $0 }) { close(client) }
    }
}
