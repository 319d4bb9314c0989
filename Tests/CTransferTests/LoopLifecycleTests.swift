import CTransfer
import Foundation
import Synchronization
import TestSupport
import Testing

/// Counts of this process's open file descriptors and threads, from /proc.
enum ProcessResources {
    static func openFileDescriptors() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1
    }

    static func threads() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? -1
    }
}

/// Finish results collected by the C callbacks (which run on the loop thread).
final class FinishLog: Sendable {
    let codes = Locked<[UInt64: [ct_code]]>([:])
    let done = Atomic<Int>(0)
}

private func makeConfig(_ log: FinishLog?) -> ct_loop_config {
    var config = ct_loop_config()
    ct_loop_config_init(&config)
    config.callbacks.on_finish = { ctx, result in
        guard let ctx else { return }
        let entry = Unmanaged<FinishEntry>.fromOpaque(ctx).takeRetainedValue()
        entry.log.codes.withLock { $0[entry.tag, default: []].append(result.pointee.code) }
        entry.log.done.add(1, ordering: .relaxed)
        ct_buffer_free(result.pointee.body)
    }
    return config
}

private final class FinishEntry {
    let log: FinishLog
    let tag: UInt64
    init(log: FinishLog, tag: UInt64) {
        self.log = log
        self.tag = tag
    }
}

@Suite("Engine loop lifecycle")
struct LoopLifecycleTests {
    @Test("a loop starts and stops 1,000 times without leaking fds or threads")
    func startStopDoesNotLeak() throws {
        // Given one warm-up cycle (libcurl and OpenSSL initialise once)
        var config = makeConfig(nil)
        var loop: OpaquePointer?
        #expect(ct_loop_create(&config, &loop) == CT_OK)
        ct_loop_destroy(loop)
        let fdsBefore = ProcessResources.openFileDescriptors()
        let threadsBefore = ProcessResources.threads()

        // When
        let cycles = ProcessInfo.processInfo.environment["TRANSFER_TEST_SANITIZER"] == nil ? 1_000 : 200
        for _ in 0..<cycles {
            var loop: OpaquePointer?
            let code = ct_loop_create(&config, &loop)
            #expect(code == CT_OK)
            ct_loop_destroy(loop)
        }

        // Then
        #expect(ProcessResources.openFileDescriptors() == fdsBefore)
        // No more than before: a leak adds a thread per cycle. Fewer is
        // fine (a thread of an earlier test, or of the system's pools, may
        // have ended meanwhile).
        #expect(ProcessResources.threads() <= threadsBefore)
    }

    /// (The descriptor and thread counts are the process's: other tests of
    /// this suite run beside it, so they are not checked here.)
    @Test("ct_loop_stop finishes every transfer before it returns; later commands are refused; destroy frees the rest")
    func stopReleasesBeforeDestroy() throws {
        let log = FinishLog()
        var config = makeConfig(log)
        var loop: OpaquePointer?
        #expect(ct_loop_create(&config, &loop) == CT_OK)
        // A peer that takes connections into its backlog and never answers:
        // every transfer is still running when the loop stops (a closed
        // port would let some fail to connect first, when the loop thread
        // gets there before the stop).
        let silent = try LoopbackListener.open(backlog: 64)
        defer { close(silent.fd) }
        var ids: [UInt64] = []
        for tag in 0..<20 {
            var spec = ct_transfer_spec()
            ct_transfer_spec_init(&spec)
            let submitted = "http://127.0.0.1:\(silent.port)/never".withCString { url -> ct_code in
                spec.url = url
                var id: UInt64 = 0
                let box = Unmanaged.passRetained(FinishEntry(log: log, tag: UInt64(tag)))
                let code = ct_loop_submit(loop!, &spec, box.toOpaque(), &id)
                if code != CT_OK { box.release() } else { ids.append(id) }
                return code
            }
            #expect(submitted == CT_OK)
        }

        ct_loop_stop(loop!)

        // Every transfer finished once, on the thread that has now ended.
        #expect(log.done.load(ordering: .relaxed) == 20)
        #expect(log.codes.withLock { $0.values.allSatisfy { $0 == [CT_E_CANCELLED] } })
        // Commands after the stop are refused, not run on freed memory.
        var spec = ct_transfer_spec()
        ct_transfer_spec_init(&spec)
        let late = "http://127.0.0.1:9/late".withCString { url -> ct_code in
            spec.url = url
            var id: UInt64 = 0
            return ct_loop_submit(loop!, &spec, nil, &id)
        }
        #expect(late == CT_E_SHUTDOWN)
        #expect(ct_loop_cancel(loop!, ids[0], 0) == CT_E_SHUTDOWN)
        ct_loop_stop(loop!)   // a second stop does nothing
        ct_loop_destroy(loop)
    }

    @Test("shutdown finishes every queued transfer exactly once, as cancelled")
    func shutdownFinishesEverything() throws {
        let log = FinishLog()
        var config = makeConfig(log)
        var loop: OpaquePointer?
        #expect(ct_loop_create(&config, &loop) == CT_OK)
        let count = 500
        for tag in 0..<count {
            var spec = ct_transfer_spec()
            ct_transfer_spec_init(&spec)
            // A port nobody listens on; most transfers are still queued or
            // connecting when the loop is destroyed.
            let submitted = "http://127.0.0.1:9/never".withCString { url -> ct_code in
                spec.url = url
                var id: UInt64 = 0
                let box = Unmanaged.passRetained(FinishEntry(log: log, tag: UInt64(tag)))
                let code = ct_loop_submit(loop!, &spec, box.toOpaque(), &id)
                if code != CT_OK { box.release() }
                return code
            }
            #expect(submitted == CT_OK)
        }

        ct_loop_destroy(loop)

        #expect(log.done.load(ordering: .relaxed) == count)
        let codes = log.codes.withLock { $0 }
        #expect(codes.count == count)
        #expect(codes.values.allSatisfy { $0.count == 1 })
        #expect(codes.values.allSatisfy { $0[0] == CT_E_CANCELLED || $0[0] == CT_E_CANNOT_CONNECT })
    }

    @Test("bad arguments are refused with codes, not crashes")
    func badArgumentsAreRefused() throws {
        var config = makeConfig(nil)
        var loop: OpaquePointer?
        #expect(ct_loop_create(&config, &loop) == CT_OK)
        defer { ct_loop_destroy(loop) }
        var spec = ct_transfer_spec()
        ct_transfer_spec_init(&spec)
        var id: UInt64 = 0

        // no URL
        #expect(ct_loop_submit(loop!, &spec, nil, &id) == CT_E_INVALID_REQUEST)
        // header injection
        let header = strdup("X-Test: a\r\nInjected: b")
        defer { free(header) }
        var headers: [UnsafePointer<CChar>?] = [UnsafePointer(header)]
        let code = "http://127.0.0.1/".withCString { url -> ct_code in
            spec.url = url
            return headers.withUnsafeMutableBufferPointer { buffer in
                spec.headers = UnsafePointer(buffer.baseAddress)
                spec.header_count = 1
                return ct_loop_submit(loop!, &spec, nil, &id)
            }
        }
        #expect(code == CT_E_INVALID_REQUEST)
        // commands on ids never issued
        #expect(ct_loop_cancel(loop!, 0, 0) == CT_E_NOT_FOUND)
        #expect(ct_loop_pause(loop!, 999_999) == CT_E_NOT_FOUND)
        #expect(ct_loop_set_disposition(loop!, 1, CT_DISPOSITION_BECOME_FILE, nil) == CT_E_INVALID_ARGUMENT)
    }

    @Test("an idle loop does not wake up")
    func idleLoopSleeps() throws {
        var config = makeConfig(nil)
        var loop: OpaquePointer?
        #expect(ct_loop_create(&config, &loop) == CT_OK)
        defer { ct_loop_destroy(loop) }
        let before = ct_loop_wakeups(loop!)
        // Observing that nothing happens needs some time to pass: this is the
        // one wait that is the assertion itself, not synchronisation.
        Thread.sleep(forTimeInterval: 0.3)
        #expect(ct_loop_wakeups(loop!) == before)
    }

    @Test("every ct_code has a stable name")
    func codeNames() {
        #expect(String(cString: ct_code_name(CT_OK)) == "ok")
        #expect(String(cString: ct_code_name(CT_E_TIMED_OUT)) == "timed_out")
        #expect(String(cString: ct_code_name(CT_E_SERVER_TRUST)) == "server_trust")
        #expect(String(cString: ct_code_name(CT_E_EMPTY_REPLY)) == "empty_reply")
        #expect(String(cString: ct_code_name(ct_code(rawValue: 999))) == "unknown")
    }
}
