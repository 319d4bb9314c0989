import CTransfer
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("Become-download disposition", .serialized)
struct BecomeFileTests {
    @Test("a part file that cannot be opened fails as a file error naming the step and errno, not as cancelled")
    func unopenablePartFile() throws {
        let server = try TestServer.start()
        defer { _ = server.stop() }
        let harness = try PhaseHarness()
        let folder = try TemporaryDirectory()
        let missing = folder.url.appendingPathComponent("no-such-folder/body.part").path

        // Given a data transfer waiting for its disposition
        let id = try harness.submit(server.url("/bytes/5000").absoluteString,
                                    flags: UInt32(CT_FLAG_AWAIT_DISPOSITION))
        try harness.waitForPhase(id, CT_PHASE_DECIDING)

        // When it is told to become a download into a folder that does not exist
        #expect(ct_loop_set_disposition(harness.loop, id, CT_DISPOSITION_BECOME_FILE, missing) == CT_OK)
        let outcome = try harness.waitForFinish(id)

        // Then it fails as a file error with the errno and the operation
        #expect(outcome.code == CT_E_SINK_IO)
        #expect(outcome.sysErrno == ENOENT)
        #expect(outcome.message.hasPrefix("cannot open the part file"))
        #expect(!outcome.message.contains("cancelled"))
        let finishing = harness.trace(id).first { $0.to == CT_PHASE_FINISHING }
        #expect(finishing?.why == "failed")
        #expect(!FileManager.default.fileExists(atPath: missing))
        harness.destroy()
    }

    @Test("a part file that can be opened receives the whole body")
    func becomesFile() throws {
        let server = try TestServer.start()
        defer { _ = server.stop() }
        let harness = try PhaseHarness()
        let folder = try TemporaryDirectory()
        let part = folder.url.appendingPathComponent("body.part").path

        let id = try harness.submit(server.url("/bytes/300000?seed=4").absoluteString,
                                    flags: UInt32(CT_FLAG_AWAIT_DISPOSITION))
        try harness.waitForPhase(id, CT_PHASE_DECIDING)
        #expect(ct_loop_set_disposition(harness.loop, id, CT_DISPOSITION_BECOME_FILE, part) == CT_OK)
        let outcome = try harness.waitForFinish(id)

        #expect(outcome.code == CT_OK)
        #expect(outcome.body.isEmpty)
        #expect(FileManager.default.contents(atPath: part) == TestServer.bytes(seed: 4, count: 300_000))
        harness.destroy()
    }
}
