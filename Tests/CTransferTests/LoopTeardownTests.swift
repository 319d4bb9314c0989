import CTransfer
import Foundation
import Synchronization
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What the callbacks of one loop saw; they run on the loop thread.
private final class TeardownLog: Sendable {
    let loopBits = Atomic<Int>(0)
    let codes = Locked<[UInt64: [ct_code]]>([:])
    let finished = Atomic<Int>(0)
    let loopEnded = Atomic<Int>(0)
}

private final class TeardownEntry {
    let log: TeardownLog
    let tag: UInt64
    let destroysLoop: Bool
    init(log: TeardownLog, tag: UInt64, destroysLoop: Bool) {
        self.log = log
        self.tag = tag
        self.destroysLoop = destroysLoop
    }
}

/// A loopback TCP listener that never accepts: connections complete in the
/// backlog and the requests sent on them get no answer.
private final class SilentListener {
    let fd: Int32
    let port: UInt16

    init() throws {
        let listener = try LoopbackListener.open(backlog: 128)
        fd = listener.fd
        port = listener.port
    }

    deinit { close(fd) }
}

@Suite("Engine loop teardown from its own thread")
struct LoopTeardownTests {
    @Test("destroying the loop from inside on_finish is safe and every transfer still finishes exactly once")
    func destroyFromOnFinish() throws {
        let listener = try SilentListener()
        let log = TeardownLog()
        var config = ct_loop_config()
        ct_loop_config_init(&config)
        config.callbacks.on_finish = { ctx, result in
            guard let ctx else { return }
            let entry = Unmanaged<TeardownEntry>.fromOpaque(ctx).takeRetainedValue()
            entry.log.codes.withLock { $0[entry.tag, default: []].append(result.pointee.code) }
            ct_buffer_free(result.pointee.body)
            entry.log.finished.add(1, ordering: .relaxed)
            if entry.destroysLoop {
                // The owner's last reference dropped here, on the loop thread.
                ct_loop_destroy(OpaquePointer(bitPattern: entry.log.loopBits.load(ordering: .acquiring)))
            }
        }
        config.callbacks.on_loop_end = { ctx in
            guard let ctx else { return }
            Unmanaged<TeardownLog>.fromOpaque(ctx).takeRetainedValue().loopEnded.add(1, ordering: .releasing)
        }
        config.batch_ctx = Unmanaged.passRetained(log).toOpaque()
        var created: OpaquePointer?
        try #require(ct_loop_create(&config, &created) == CT_OK)
        let loop = try #require(created)
        log.loopBits.store(Int(bitPattern: UnsafeRawPointer(loop)), ordering: .releasing)

        func submit(_ url: String, tag: UInt64, destroys: Bool) -> ct_code {
            var spec = ct_transfer_spec()
            ct_transfer_spec_init(&spec)
            return url.withCString { pointer -> ct_code in
                spec.url = pointer
                var id: UInt64 = 0
                let box = Unmanaged.passRetained(TeardownEntry(log: log, tag: tag, destroysLoop: destroys))
                let code = ct_loop_submit(loop, &spec, box.toOpaque(), &id)
                if code != CT_OK { box.release() }
                return code
            }
        }

        // Given transfers in flight on loopback connections that never answer
        let hanging = 16
        for tag in 0..<hanging {
            #expect(submit("http://127.0.0.1:\(listener.port)/hang/\(tag)", tag: UInt64(tag), destroys: false) == CT_OK)
        }
        // When one transfer that fails at once destroys the loop from on_finish
        #expect(submit("unsupported-scheme://127.0.0.1/", tag: 1_000, destroys: true) == CT_OK)

        // Then the loop thread finishes everything, ends and frees itself
        try Wait.until("the loop thread to end", timeout: .seconds(30)) {
            log.loopEnded.load(ordering: .acquiring) == 1
        }
        #expect(log.finished.load(ordering: .relaxed) == hanging + 1)
        let codes = log.codes.withLock { $0 }
        #expect(codes.count == hanging + 1)
        #expect(codes.values.allSatisfy { $0.count == 1 })
        #expect(codes[1_000]?.first != CT_OK)
        #expect((0..<UInt64(hanging)).allSatisfy { codes[$0]?.first == CT_E_CANCELLED })
    }

    @Test("a loop destroyed with a full command queue still stops and finishes every transfer")
    func destroyWithQueuedCommands() throws {
        let listener = try SilentListener()
        let log = TeardownLog()
        var config = ct_loop_config()
        ct_loop_config_init(&config)
        config.callbacks.on_finish = { ctx, result in
            guard let ctx else { return }
            let entry = Unmanaged<TeardownEntry>.fromOpaque(ctx).takeRetainedValue()
            entry.log.codes.withLock { $0[entry.tag, default: []].append(result.pointee.code) }
            ct_buffer_free(result.pointee.body)
        }
        var created: OpaquePointer?
        try #require(ct_loop_create(&config, &created) == CT_OK)
        let loop = try #require(created)
        let count = 200
        let url = "http://127.0.0.1:\(listener.port)/hang"
        for tag in 0..<count {
            var spec = ct_transfer_spec()
            ct_transfer_spec_init(&spec)
            let code = url.withCString { pointer -> ct_code in
                spec.url = pointer
                var id: UInt64 = 0
                let box = Unmanaged.passRetained(TeardownEntry(log: log, tag: UInt64(tag), destroysLoop: false))
                let code = ct_loop_submit(loop, &spec, box.toOpaque(), &id)
                if code != CT_OK { box.release() }
                else { _ = ct_loop_pause(loop, id) }
                return code
            }
            #expect(code == CT_OK)
        }

        ct_loop_destroy(loop)

        let codes = log.codes.withLock { $0 }
        #expect(codes.count == count)
        #expect(codes.values.allSatisfy { $0 == [CT_E_CANCELLED] })
    }
}
