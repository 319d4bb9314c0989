import Foundation
import Synchronization
import Testing
import TestSupport
import Transfer
import TransferFoundation

@Suite("Download destinations")
struct DownloadDestinationTests {
    @Test("the destination closure gets the temporary file and the response; the file is moved there")
    func destinationClosure() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let seen = Locked<(URL, Int)?>(nil)
        let done = Completion<DownloadOutcome>()

        let task = session.downloadTask(with: Request(url: server.url("/bytes/100000?seed=81")), destination: { temporary, response in
            seen.withLock { $0 = (temporary, response.statusCode) }
            return directory.file("nested/dir/out.bin")
        }, completionHandler: done.handler)
        task.resume()
        let outcome = try await done.result()

        #expect(outcome.error == nil)
        #expect(outcome.url == directory.file("nested/dir/out.bin"))
        #expect(try FileDigest.sha256(of: directory.file("nested/dir/out.bin")) == TestServer.sha256(seed: 81, count: 100000))
        let (temporary, status) = try #require(seen.withLock { $0 })
        #expect(status == 200)
        #expect(!exists(temporary), "the temporary file was moved, not copied")
    }

    @Test("a download not synchronized to disk is still placed whole, with no part file left; a resumable one keeps its journal")
    func unsynchronized() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        var options = DownloadOptions()
        options.synchronizesToDisk = false
        let destination = directory.file("scratch.bin")
        let done = Completion<(HTTPResponse?, TransferError?)>()

        session.downloadTask(with: Request(url: server.url("/bytes/3000000?seed=83")), to: destination, options: options,
                             completionHandler: { response, _, error in done.fulfil((response, error)) }).resume()
        let (response, error) = try #require(await done.wait(), "the download never completed")

        #expect(error == nil)
        #expect(response?.statusCode == 200)
        #expect(try FileDigest.sha256(of: destination) == TestServer.sha256(seed: 83, count: 3_000_000))
        #expect(!exists(destination.path + ".part"))

        // Resumable wins: interrupted, it keeps the part file and its journal.
        options.resumable = true
        let resumable = directory.file("kept.bin")
        let stopped = Completion<TransferError?>()
        let task = session.downloadTask(with: Request(url: server.url("/hold/300000?gate=never&seed=84")), to: resumable,
                                        options: options, completionHandler: { _, _, error in stopped.fulfil(error) })
        task.resume()
        try await Wait.until("the first half is held") { server.heldAtGate("never") == 1 }
        task.cancel()
        let cancelled = try #require(await stopped.wait(), "the cancelled download never completed")
        #expect(cancelled?.code == .cancelled)
        #expect(exists(resumable.path + ".part"))
        #expect(exists(resumable.path + ".part.journal"))
    }

    @Test("the session's did-finish-downloading hook wins over the task's destination")
    func sessionHook() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        session.hooks.downloadTaskDidFinishDownloading = { _, _, _ in directory.file("from-hook.bin") }
        let done = Completion<DownloadOutcome>()

        session.downloadTask(with: Request(url: server.url("/bytes/5000?seed=82")),
                             destination: { _, _ in directory.file("from-task.bin") }, completionHandler: done.handler)
            .resume()
        let outcome = try await done.result()

        #expect(outcome.url == directory.file("from-hook.bin"))
        #expect(exists(directory.file("from-hook.bin")))
        #expect(!exists(directory.file("from-task.bin")))
    }

    @Test("a failed move fails the task with a file error, posts the notification and leaves no temporary file")
    func failedMove() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        // A regular file where a directory is needed: the move cannot succeed.
        try Data("x".utf8).write(to: directory.file("blocker"))
        let notified = Completion<Bool>()
        let seenTemporary = Locked<URL?>(nil)
        let done = Completion<DownloadOutcome>()
        let task = session.downloadTask(with: Request(url: server.url("/bytes/5000?seed=83")), destination: { temporary, _ in
            seenTemporary.withLock { $0 = temporary }
            return directory.file("blocker/sub/out.bin")
        }, completionHandler: done.handler)
        let observer = NotificationCenter.default.addObserver(forName: .transferDownloadDidFailToMoveFile, object: task,
                                                              queue: nil) { notification in
            notified.fulfil(notification.userInfo?[TransferNotificationKey.error] is TransferError)
        }
        defer { NotificationCenter.default.removeObserver(observer) }

        task.resume()
        let outcome = try await done.result()

        #expect(outcome.error?.code == .fileError)
        #expect(outcome.url == nil)
        #expect(await notified.wait(timeout: .seconds(10)) == true)
        let temporary = try #require(seenTemporary.withLock { $0 })
        #expect(!exists(temporary))
    }

    @Test("without a destination the temporary file lives only during the completion handler")
    func temporaryOnly() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let during = Completion<(URL, Bool)>()
        session.downloadTask(with: Request(url: server.url("/bytes/5000?seed=84")), completionHandler: { _, url, _ in
            if let url { during.fulfil((url, FileManager.default.fileExists(atPath: url.path))) }
        }).resume()

        let (url, existed) = try #require(await during.wait())
        #expect(existed)
        try await Wait.until("the temporary file is removed after the handler") {
            !FileManager.default.fileExists(atPath: url.path)
        }
    }
}
