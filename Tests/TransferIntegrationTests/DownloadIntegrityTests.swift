import Foundation
import Synchronization
import Testing
import TestSupport
import Transfer

@Suite("Download integrity and placement")
struct DownloadIntegrityTests {
    @Test("a matching expected SHA-256 places the file")
    func checksumMatches() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let count = 3 << 20
        let options = DownloadOptions(expectedSHA256: TestServer.sha256(seed: 11, count: count))
        let done = Completion<DownloadOutcome>()

        session.downloadTask(with: Request(url: server.url("/bytes/\(count)?seed=11")), to: directory.file("ok.bin"),
                             options: options, completionHandler: done.handler).resume()
        let outcome = try await done.result()

        #expect(outcome.error == nil)
        #expect(try FileDigest.sha256(of: directory.file("ok.bin")) == TestServer.sha256(seed: 11, count: count))
    }

    @Test("a checksum mismatch fails with both digests and places nothing")
    func checksumMismatch() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let count = 3 << 20
        let wrong = TestServer.sha256(seed: 99, count: count)
        let done = Completion<DownloadOutcome>()

        session.downloadTask(with: Request(url: server.url("/bytes/\(count)?seed=12")), to: directory.file("bad.bin"),
                             options: DownloadOptions(resumable: true, expectedSHA256: wrong),
                             completionHandler: done.handler).resume()
        let outcome = try await done.result()

        let error = try #require(outcome.error)
        #expect(error.code == .checksumMismatch)
        #expect(error.message.contains(wrong))
        #expect(error.message.contains(TestServer.sha256(seed: 12, count: count)))
        #expect(!exists(directory.file("bad.bin")))
        #expect(!exists(directory.file("bad.bin.part")))
        #expect(!exists(directory.file("bad.bin.part.journal")))
    }

    @Test("a resumed download with a checksum hashes the prefix on disk and matches")
    func checksumAcrossResume() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let count = 16 << 20
        let url = server.url("/bytes/\(count)?seed=13")
        let destination = directory.file("resumed.bin")
        let options = DownloadOptions(resumable: true, expectedSHA256: TestServer.sha256(seed: 13, count: count))
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }

        let first = Completion<DownloadOutcome>()
        var limited = options
        limited.speedLimit = 1 << 20
        let task = session.downloadTask(with: Request(url: url), to: destination, options: limited,
                                        completionHandler: first.handler)
        task.whenReceived(1 << 20) { $0.cancel() }
        task.resume()
        #expect(try await first.result().error?.code == .cancelled)
        let second = Completion<DownloadOutcome>()
        session.downloadTask(with: Request(url: url), to: destination, options: options,
                             completionHandler: second.handler).resume()
        let outcome = try await second.result()

        #expect(outcome.error == nil)
        #expect(server.requests.last?.header("range") != nil)
        #expect(try FileDigest.sha256(of: destination) == TestServer.sha256(seed: 13, count: count))
    }

    @Test("a bad expectedSHA256 string is an invalid request")
    func badDigestString() async throws {
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let done = Completion<DownloadOutcome>()
        session.downloadTask(with: Request(url: URL(string: "http://127.0.0.1:9/x")!), to: directory.file("x"),
                             options: DownloadOptions(expectedSHA256: "xyz"), completionHandler: done.handler).resume()
        #expect(try await done.result().error?.code == .invalidRequest)
    }

    @Test("a full disk fails with a file error and leaves nothing at the destination")
    func diskFull() async throws {
        guard getuid() == 0 else {
            print("skipped: mounting a tmpfs needs root")
            return
        }
        let directory = try TemporaryDirectory()
        let mountPoint = directory.file("small")
        try FileManager.default.createDirectory(at: mountPoint, withIntermediateDirectories: true)
        let mounted = try Command.run("/bin/mount", ["-t", "tmpfs", "-o", "size=8m", "tmpfs", mountPoint.path])
        guard mounted.status == 0 else {
            print("skipped: cannot mount a tmpfs: \(mounted.stderrText)")
            return
        }
        defer { _ = try? Command.run("/bin/umount", [mountPoint.path]) }
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let done = Completion<DownloadOutcome>()
        let destination = mountPoint.appendingPathComponent("big.bin")

        session.downloadTask(with: Request(url: server.url("/bytes/\(32 << 20)?seed=14")), to: destination,
                             completionHandler: done.handler).resume()
        let outcome = try await done.result()

        #expect(outcome.error?.code == .fileError)
        #expect(outcome.error?.systemErrno == ENOSPC)
        #expect(!exists(destination))
        #expect(!exists(destination.path + ".part"))
    }

    @Test("a hostile Content-Disposition stays inside the chosen folder",
          arguments: ["attachment; filename=\"../../etc/passwd\"", "attachment; filename=/etc/shadow",
                      "attachment; filename*=UTF-8''..%2F..%2Fevil%00name.txt", "attachment; filename=\"..\"",
                      // found by fuzz_filename: a combining mark glued to '/', and ". ." before a name
                      "attachment; filename=\"sub/\u{301}name.txt\"", "attachment; filename=\". .hidden\""])
    func hostileContentDisposition(header: String) async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let folder = directory.file("downloads")
        let done = Completion<DownloadOutcome>()
        let query = header.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""

        session.downloadTask(with: Request(url: server.url("/content-disposition?name=\(query)")),
                             destination: DownloadTask.destination(inDirectory: folder),
                             completionHandler: done.handler).resume()
        let outcome = try await done.result()

        #expect(outcome.error == nil)
        let url = try #require(outcome.url)
        #expect(url.deletingLastPathComponent().standardizedFileURL.path == folder.standardizedFileURL.path)
        #expect(!url.lastPathComponent.contains("\0") && !url.lastPathComponent.hasPrefix("."))
        #expect(exists(url))
    }
}
