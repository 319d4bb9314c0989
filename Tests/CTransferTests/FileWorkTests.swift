import CTransfer
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A test gate of the file worker (ct_worker.c): a FIFO in the test's folder, named by an
/// environment variable read when the loop is created. A gated job opens it for reading and
/// waits for one byte.
final class WorkerGate {
    let path: String
    private var writer: Int32 = -1

    init(in folder: TemporaryDirectory, _ name: String) {
        path = folder.file(name).path
        #expect(mkfifo(path, 0o600) == 0)
    }

    /// Waits until a job is held at the gate (only then does a non-blocking open for writing
    /// succeed: the job has the FIFO open for reading).
    func waitHeld(_ what: String) throws {
        try Wait.until(what, timeout: .seconds(30)) {
            writer = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
            return writer >= 0
        }
    }

    /// Lets the held job go.
    func release() {
        guard writer >= 0 else { return }
        var byte: UInt8 = 1
        #expect(write(writer, &byte, 1) == 1)
        close(writer)
        writer = -1
    }

    deinit { release() }
}

/// Issue 12: the file work of a download (the first journal and the digest of a resumed
/// prefix at its head, the settle of a failed download, the commit) runs on the worker, and a
/// cancel during the commit wins until the file is put in place.
@Suite("File work on the worker", .serialized)
struct FileWorkTests {
    /// A loop whose worker is gated by `variable` = `gate`.
    private func harness(_ variable: String, _ gate: WorkerGate) throws -> PhaseHarness {
        setenv(variable, gate.path, 1)
        defer { unsetenv(variable) }
        return try PhaseHarness()
    }

    private func download(_ harness: PhaseHarness, _ url: String, to path: String, journal: String? = nil,
                          resume: Int64 = 0, sha256: [UInt8]? = nil) throws -> UInt64 {
        let digest = sha256.map { bytes -> UnsafeMutablePointer<UInt8> in
            let p = UnsafeMutablePointer<UInt8>.allocate(capacity: 32)
            p.initialize(from: bytes, count: 32)
            return p
        }
        defer { digest?.deallocate() }   // the engine copies it at submit
        return try harness.submit(url) { spec, strings in
            spec.sink_kind = CT_SINK_FILE
            spec.sink_path = strings.dup(path)
            if let journal { spec.journal_path = strings.dup(journal) }
            spec.resume_offset = resume
            spec.expected_sha256 = digest.map { UnsafePointer($0) }
        }
    }

    /// A memory GET on the same loop runs to completion (the loop is not blocked).
    private func quickGet(_ harness: PhaseHarness, _ server: TestServer) throws {
        let id = try harness.submit(server.url("/bytes/1024").absoluteString)
        let outcome = try harness.waitForFinish(id)
        #expect(outcome.code == CT_OK)
        #expect(outcome.body == TestServer.bytes(seed: 0, count: 1024))
    }

    @Test("the first journal is written on the worker before any body byte: the loop serves a GET meanwhile")
    func headJournalOffLoop() throws {
        let server = try TestServer.start()
        defer { _ = server.stop() }
        let folder = try TemporaryDirectory()
        let gate = WorkerGate(in: folder, "file-gate.fifo")
        let harness = try harness("TRANSFER_TEST_FILE_GATE", gate)
        let path = folder.file("journaled.bin").path
        let journal = folder.file("journaled.journal").path
        let count = 300_000

        // Given a journaled download whose head's file work is held on the worker
        let id = try download(harness, server.url("/bytes/\(count)?seed=31").absoluteString, to: path,
                              journal: journal)
        try gate.waitHeld("the head job at the gate")
        // When another transfer runs meanwhile, it completes; the download has written nothing
        try quickGet(harness, server)
        #expect(harness.results(id).isEmpty)
        #expect(!FileManager.default.fileExists(atPath: journal))
        #expect(((try? FileManager.default.attributesOfItem(atPath: path + ".part"))?[.size] as? Int ?? 0) == 0)

        // Then, released, the download completes whole and its journal is gone
        gate.release()
        let outcome = try harness.waitForFinish(id)
        #expect(outcome.code == CT_OK, "\(outcome.message)")
        #expect(FileManager.default.contents(atPath: path) == TestServer.bytes(seed: 31, count: count))
        #expect(!FileManager.default.fileExists(atPath: journal))
        #expect(ct_loop_illegal_transitions(harness.loop) == 0)
        harness.destroy()
    }

    @Test("the settle of a cancelled download runs on the worker: the loop serves a GET meanwhile")
    func settleOffLoop() throws {
        let server = try TestServer.start()
        defer { _ = server.stop() }
        let folder = try TemporaryDirectory()
        let gate = WorkerGate(in: folder, "file-gate.fifo")
        let harness = try harness("TRANSFER_TEST_FILE_GATE", gate)
        let path = folder.file("stalled.bin").path
        let journal = folder.file("stalled.journal").path

        // Given a journaled download receiving a body that stalls
        let id = try download(harness, server.url("/stall?size=50000").absoluteString, to: path, journal: journal)
        try gate.waitHeld("the head job at the gate")
        gate.release()
        try Wait.until("the first journal", timeout: .seconds(30)) { FileManager.default.fileExists(atPath: journal) }
        // When it is cancelled, keeping its part file, and the settle is held
        #expect(ct_loop_cancel(harness.loop, id, 1) == CT_OK)
        try gate.waitHeld("the settle job at the gate")
        try quickGet(harness, server)
        #expect(harness.results(id).isEmpty)

        // Then, released, it reports cancelled with its part file and journal kept
        gate.release()
        let outcome = try harness.waitForFinish(id)
        #expect(outcome.code == CT_E_CANCELLED)
        #expect(FileManager.default.fileExists(atPath: path + ".part"))
        #expect(FileManager.default.fileExists(atPath: journal))
        #expect(!FileManager.default.fileExists(atPath: path))
        harness.destroy()
    }

    @Test("a cancel during the commit wins: cancelled, nothing in place, the part file kept whole for resume",
          arguments: [true, false])
    func cancelDuringCommit(keep: Bool) throws {
        let server = try TestServer.start()
        defer { _ = server.stop() }
        let folder = try TemporaryDirectory()
        let gate = WorkerGate(in: folder, "commit-gate.fifo")
        let harness = try harness("TRANSFER_TEST_COMMIT_GATE", gate)
        let path = folder.file("late.bin").path
        let count = 200_000

        // Given a download whose whole body came and whose commit is held
        let id = try download(harness, server.url("/bytes/\(count)?seed=32").absoluteString, to: path)
        try gate.waitHeld("the commit job at the gate")
        // When it is cancelled (a GET after it shows the loop ran the cancel), then released
        #expect(ct_loop_cancel(harness.loop, id, keep ? 1 : 0) == CT_OK)
        try quickGet(harness, server)
        gate.release()
        let outcome = try harness.waitForFinish(id)

        // Then it ends once, cancelled; the destination was never written
        #expect(outcome.code == CT_E_CANCELLED)
        #expect(!FileManager.default.fileExists(atPath: path))
        if keep {
            #expect(FileManager.default.contents(atPath: path + ".part") == TestServer.bytes(seed: 32, count: count))
            #expect(outcome.bytesOnDisk == Int64(count))
        } else {
            #expect(!FileManager.default.fileExists(atPath: path + ".part"))
        }
        try harness.waitForPhase(id, CT_PHASE_DONE)
        harness.destroy()
        #expect(harness.results(id).count == 1)
    }

    @Test("a resumed download with a checksum reads its prefix once, at the head, and its digest is right")
    func resumedDigestReadsPrefixOnce() throws {
        let server = try TestServer.start()
        defer { _ = server.stop() }
        let folder = try TemporaryDirectory()
        let harness = try PhaseHarness()
        let path = folder.file("resumed.bin").path
        let count = 600_000
        let prefix = 250_000
        let body = TestServer.bytes(seed: 33, count: count)
        try body.prefix(prefix).write(to: URL(fileURLWithPath: path + ".part"))
        let digest = hexBytes(TestServer.sha256(seed: 33, count: count))

        let before = ct_loop_checksum_bytes_read(harness.loop)
        let id = try download(harness, server.url("/bytes/\(count)?seed=33").absoluteString, to: path,
                              resume: Int64(prefix), sha256: digest)
        let outcome = try harness.waitForFinish(id)

        #expect(outcome.code == CT_OK, "\(outcome.message)")
        #expect(FileManager.default.contents(atPath: path) == body)
        #expect(ct_loop_checksum_bytes_read(harness.loop) - before == UInt64(prefix))

        // A wrong prefix on disk is caught by the same digest
        var corrupt = body.prefix(prefix)
        corrupt[1000] ^= 0xff
        try corrupt.write(to: URL(fileURLWithPath: path + ".part"))
        try FileManager.default.removeItem(atPath: path)
        let bad = try download(harness, server.url("/bytes/\(count)?seed=33").absoluteString, to: path,
                               resume: Int64(prefix), sha256: digest)
        #expect(try harness.waitForFinish(bad).code == CT_E_CHECKSUM)
        #expect(!FileManager.default.fileExists(atPath: path))
        harness.destroy()
    }

    private func hexBytes(_ hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            out.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return out
    }
}
