import CTransfer
import Foundation
import TestSupport
import Testing

/// Issue 14: a file sink's write buffer follows the transfer's rate. It starts at 64 KiB and
/// doubles (up to 2 MiB) only while it fills within 100 ms, so a slow download never holds
/// more than 64 KiB and only a fast bulk one grows. Over TLS every chunk is one record
/// (at most 16 KiB), so every byte goes through the buffer.
@Suite("Adaptive file sink buffer", .serialized, .enabled(if: NginxFixture.isInstalled))
struct SinkBufferTests {
    private func download(_ harness: PhaseHarness, _ url: URL, to path: String, caFile: String) throws -> PhaseOutcome {
        let id = try harness.submit(url.absoluteString) { spec, strings in
            spec.sink_kind = CT_SINK_FILE
            spec.sink_path = strings.dup(path)
            spec.ca_file = strings.dup(caFile)
        }
        return try harness.waitForFinish(id)
    }

    @Test("a fast bulk download over TLS grows the buffer past 64 KiB, never past 2 MiB, and is byte-exact")
    func fastGrows() throws {
        let nginx = try NginxFixture.shared()
        let size = ProcessInfo.processInfo.environment["TRANSFER_TEST_SANITIZER"] == nil ? 64 << 20 : 16 << 20
        let (path, digest) = try nginx.ensureFile(size: size)
        let folder = try TemporaryDirectory()
        let harness = try PhaseHarness()
        defer { harness.destroy() }
        let file = folder.file("fast.bin").path

        let outcome = try download(harness, nginx.url(.https, path), to: file, caFile: nginx.caFile)

        #expect(outcome.code == CT_OK, "\(outcome.message)")
        #expect(outcome.writeBufferPeak > 64 << 10)
        #expect(outcome.writeBufferPeak <= 2 << 20)
        #expect(try FileDigest.sha256(of: URL(fileURLWithPath: file)) == digest)
    }

    @Test("a slow download over TLS keeps the 64 KiB it started with")
    func slowStaysSmall() throws {
        let nginx = try NginxFixture.shared()
        let (path, digest) = try nginx.ensureFile(size: 192 << 10, seed: 7)
        let folder = try TemporaryDirectory()
        let harness = try PhaseHarness()
        defer { harness.destroy() }
        let file = folder.file("slow.bin").path

        // 96 KiB/s: each 64 KiB takes about 0.6 s to arrive, far over the 100 ms that grow it.
        let outcome = try download(harness, nginx.slowURL(.https, path, bytesPerSecond: 96 << 10), to: file,
                                   caFile: nginx.caFile)

        #expect(outcome.code == CT_OK, "\(outcome.message)")
        #expect(outcome.writeBufferPeak == 64 << 10)
        #expect(try FileDigest.sha256(of: URL(fileURLWithPath: file)) == digest)
    }
}
