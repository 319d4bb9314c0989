import Foundation
import TestSupport
import Testing
import Transfer

#if canImport(Glibc)
    import Glibc
#endif

/// Issue 12, item 1: the commit of a download (flush, fsync, rename, folder
/// fsync) runs on the engine's file worker, not on its event loop. A test-only
/// gate (TRANSFER_TEST_COMMIT_GATE, a FIFO: ct_worker.c) holds a commit job in
/// this test's folder until the test writes a byte to it.
@Suite("Off the loop: download commits run on the file worker", .serialized)
struct OffLoopCommitTests {
    @Test("a commit held at the gate does not stall the session: a 1 KiB GET completes, then the download lands byte-exact")
    func heldCommitDoesNotStallTheSession() async throws {
        let directory = try TemporaryDirectory()
        let fifo = directory.file("commit-gate.fifo").path
        #expect(mkfifo(fifo, 0o600) == 0)
        // Read when the engine is created; only commits into `directory` are gated.
        setenv("TRANSFER_TEST_COMMIT_GATE", fifo, 1)
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try makeSession()
        unsetenv("TRANSFER_TEST_COMMIT_GATE")
        var writer: Int32 = -1
        defer {
            if writer < 0 { writer = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC) }
            if writer >= 0 {
                var byte: UInt8 = 1
                _ = write(writer, &byte, 1)   // never leave the worker held
                close(writer)
            }
            session.invalidateAndCancel()
        }

        let size = 300_000
        let destination = directory.file("held.bin")
        let downloaded = Completion<DownloadOutcome>()
        session.downloadTask(with: Request(url: server.url("/bytes/\(size)?seed=121")), to: destination) {
            response, url, error in downloaded.fulfil(DownloadOutcome(response: response, url: url, error: error))
        }.resume()

        // The commit job opens the FIFO for reading once it waits at the gate:
        // only then does a non-blocking open for writing succeed.
        try await Wait.until("the commit job waits at the gate", timeout: .seconds(60)) {
            writer = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
            return writer >= 0
        }

        let fetched = Completion<UploadOutcome>()
        session.dataTask(with: Request(url: server.url("/bytes/1024"))) { response, data, error in
            fetched.fulfil(UploadOutcome(response: response, data: data, error: error))
        }.resume()
        let get = try #require(await fetched.wait(timeout: .seconds(60)),
                               "the GET did not finish while a commit was held")
        #expect(get.error == nil)
        #expect(get.data == TestServer.bytes(seed: 0, count: 1024))
        // The order: the GET completed while the download was still finishing.
        #expect(await downloaded.wait(timeout: .zero) == nil)
        #expect(!FileManager.default.fileExists(atPath: destination.path))

        var byte: UInt8 = 1
        #expect(write(writer, &byte, 1) == 1)
        close(writer)
        writer = -1
        let outcome = try #require(await downloaded.wait())
        #expect(outcome.error == nil)
        #expect(outcome.url == destination)
        let data = try Data(contentsOf: destination)
        #expect(data == TestServer.bytes(seed: 121, count: size))
        #expect(!FileManager.default.fileExists(atPath: destination.path + ".part"))
    }

    @Test("a cancel while the commit job waits wins: the download reports once, cancelled, and nothing is put in place")
    func cancelDuringCommit() async throws {
        let directory = try TemporaryDirectory()
        let fifo = directory.file("commit-gate.fifo").path
        #expect(mkfifo(fifo, 0o600) == 0)
        setenv("TRANSFER_TEST_COMMIT_GATE", fifo, 1)
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try makeSession()
        unsetenv("TRANSFER_TEST_COMMIT_GATE")
        var writer: Int32 = -1
        defer {
            if writer < 0 { writer = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC) }
            if writer >= 0 {
                var byte: UInt8 = 1
                _ = write(writer, &byte, 1)
                close(writer)
            }
            session.invalidateAndCancel()
        }
        let destination = directory.file("cancelled-late.bin")
        let reports = Locked(0)
        let downloaded = Completion<DownloadOutcome>()
        let task = session.downloadTask(with: Request(url: server.url("/bytes/50000?seed=123")), to: destination) {
            response, url, error in
            reports.withLock { $0 += 1 }
            downloaded.fulfil(DownloadOutcome(response: response, url: url, error: error))
        }
        task.resume()
        try await Wait.until("the commit job waits at the gate", timeout: .seconds(60)) {
            writer = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
            return writer >= 0
        }
        task.cancel()
        // A GET after the cancel completes: the loop has run the cancel command.
        let fetched = Completion<UploadOutcome>()
        session.dataTask(with: Request(url: server.url("/bytes/1024")), completionHandler: fetched.handler).resume()
        #expect(try #require(await fetched.wait(timeout: .seconds(60))).error == nil)

        var byte: UInt8 = 1
        #expect(write(writer, &byte, 1) == 1)
        close(writer)
        writer = -1
        let outcome = try #require(await downloaded.wait())
        // The file was not delivered yet: the cancel wins (ct_loop.h, ct_loop_cancel).
        #expect(outcome.error?.code == .cancelled, "\(String(describing: outcome.error))")
        #expect(!FileManager.default.fileExists(atPath: destination.path))
        let again = Completion<DataOutcomeMarker>()
        session.dataTask(with: Request(url: server.url("/bytes/10"))) { _, _, _ in again.fulfil(DataOutcomeMarker()) }
            .resume()
        _ = await again.wait()
        #expect(reports.withLock { $0 } == 1)
    }

    @Test("a resumed download verifies its checksum on the worker: a corrupted prefix on disk is caught")
    func resumedChecksumCatchesCorruptPrefix() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let directory = try TemporaryDirectory()
        let count = 4 << 20
        let url = server.url("/bytes/\(count)?seed=122")
        let destination = directory.file("resumed.bin")
        let options = DownloadOptions(resumable: true, expectedSHA256: TestServer.sha256(seed: 122, count: count))
        let session = try makeSession()
        defer { session.invalidateAndCancel() }

        let first = Completion<DownloadOutcome>()
        var limited = options
        limited.speedLimit = 1 << 20
        let task = session.downloadTask(with: Request(url: url), to: destination, options: limited,
                                        completionHandler: first.handler)
        task.whenReceived(256 << 10) { $0.cancel() }
        task.resume()
        #expect(try await first.result().error?.code == .cancelled)

        // Flip one byte of the prefix the next transfer does not download again.
        let part = try FileHandle(forUpdating: URL(fileURLWithPath: destination.path + ".part"))
        try part.seek(toOffset: 1000)
        let original = try #require(try part.read(upToCount: 1)).first ?? 0
        try part.seek(toOffset: 1000)
        try part.write(contentsOf: Data([original ^ 0xff]))
        try part.close()

        let second = Completion<DownloadOutcome>()
        session.downloadTask(with: Request(url: url), to: destination, options: options,
                             completionHandler: second.handler).resume()
        let outcome = try await second.result()
        #expect(server.requests.last?.header("range") != nil)
        #expect(outcome.error?.code == .checksumMismatch, "\(String(describing: outcome.error))")
        #expect(!FileManager.default.fileExists(atPath: destination.path))
    }
}

private struct DataOutcomeMarker: Sendable {}
