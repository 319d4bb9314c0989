import Foundation
import Testing
import TestSupport

@testable import Transfer

/// Issue 12, defect 5: the part file (or its whole folder) is removed while the
/// body is still arriving. The engine must say what failed (a file error with
/// the errno, naming the operation), leave no file anywhere, and never claim
/// bytes that are gone (journal, resume data, bytes on disk).
@Suite("Download: destination removed mid-download")
struct DestinationVanishedTests {
    static let size = 8 << 20
    static let firstPart = 4 << 20

    /// Starts `task`, waits until the server holds the body at `gate` and the
    /// client has the first part (so the part file exists and holds bytes).
    func startHeld(_ task: DownloadTask, server: TestServer, gate: String) async throws {
        let received = Completion<Bool>()
        task.whenReceived(Int64(Self.firstPart)) { _ in received.fulfil(true) }
        task.resume()
        let got = await received.wait()
        #expect(got == true, "the first part never arrived")
        try await Wait.until("the body is held at the gate", timeout: .seconds(30)) {
            server.heldAtGate(gate) == 1
        }
    }

    @Test("a removed destination folder fails with a file error naming the write, and leaves nothing")
    func folderRemoved() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let root = try TemporaryDirectory()
        let folder = root.file("folder")
        let destination = folder.appendingPathComponent("out.bin")
        let done = Completion<DownloadOutcome>()
        let task = session.downloadTask(
            with: Request(url: server.url("/hold/\(Self.size)?gate=g&seed=5")), to: destination,
            completionHandler: done.handler)
        try await startHeld(task, server: server, gate: "g")
        #expect(FileManager.default.fileExists(atPath: destination.path + ".part"))

        try FileManager.default.removeItem(at: folder)
        server.openGate("g")
        let outcome = try await done.result()

        let error = try #require(outcome.error)
        #expect(error.code == .fileError)
        #expect(error.systemErrno == ENOENT)
        // Old code: "cannot move the download into place: No such file or directory".
        #expect(error.message.contains("write the part file"), "\(error.message)")
        #expect(error.message.contains("removed"), "\(error.message)")
        #expect(!FileManager.default.fileExists(atPath: folder.path))
        #expect(try FileManager.default.contentsOfDirectory(atPath: root.path).isEmpty)
        #expect(outcome.url == nil)
    }

    @Test("a resumable download whose part file is removed keeps no journal claiming its bytes")
    func resumablePartRemoved() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let destination = directory.file("out.bin")
        let part = destination.path + ".part"
        let journal = part + ".journal"
        let done = Completion<DownloadOutcome>()
        // A small interval: the sync thread journals the first part before the gate.
        let options = DownloadOptions(resumable: true, journalIntervalBytes: 1 << 20)
        let task = session.downloadTask(
            with: Request(url: server.url("/hold/\(Self.size)?gate=r&seed=6")), to: destination,
            options: options, completionHandler: done.handler)
        try await startHeld(task, server: server, gate: "r")
        #expect(FileManager.default.fileExists(atPath: journal))

        #expect(unlink(part) == 0)
        server.openGate("r")
        let outcome = try await done.result()

        let error = try #require(outcome.error)
        #expect(error.code == .fileError)
        #expect(error.systemErrno == ENOENT)
        #expect(error.message.contains("removed"), "\(error.message)")
        // Old code kept a journal claiming megabytes of a file that no longer exists.
        #expect(!FileManager.default.fileExists(atPath: journal))
        #expect(!FileManager.default.fileExists(atPath: part))
        #expect(!FileManager.default.fileExists(atPath: destination.path))
    }

    @Test("cancelling for resume data after the part file was removed produces no resume data")
    func resumeDataAfterPartRemoved() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let task = session.downloadTask(with: Request(url: server.url("/hold/\(Self.size)?gate=c&seed=7")))
        try await startHeld(task, server: server, gate: "c")
        #expect(unlink(task.temporaryPath) == 0)

        let produced = Completion<Data?>()
        task.cancel { produced.fulfil($0) }
        let value = await produced.wait()

        // Old code: resume data claiming 4 MiB in a part file that is gone.
        let data = try #require(value, "the resume data handler never ran")
        #expect(data == nil)
        #expect(!FileManager.default.fileExists(atPath: task.temporaryPath))
        server.openGate("c")
    }

    @Test("a rename that fails at commit is reported as the rename, with its errno")
    func renameFailureIsNamed() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        // A non-empty directory where the file should go: rename(2) refuses it.
        let destination = directory.file("out.bin")
        try FileManager.default.createDirectory(at: destination, withIntermediateDirectories: false)
        try Data("keep".utf8).write(to: destination.appendingPathComponent("inside"))
        let done = Completion<DownloadOutcome>()
        let task = session.downloadTask(with: Request(url: server.url("/bytes/4096?seed=8")), to: destination,
                                        completionHandler: done.handler)

        task.resume()
        let outcome = try await done.result()

        let error = try #require(outcome.error)
        #expect(error.code == .fileError)
        #expect(error.systemErrno == EISDIR)
        // Old code: "cannot move the download into place: Is a directory".
        #expect(error.message.contains("cannot rename the part file"), "\(error.message)")
        #expect(!FileManager.default.fileExists(atPath: destination.path + ".part"))
        #expect(FileManager.default.fileExists(atPath: destination.appendingPathComponent("inside").path))
    }
}
