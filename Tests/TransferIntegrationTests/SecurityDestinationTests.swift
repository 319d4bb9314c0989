import Foundation
import Testing
import TestSupport

@testable import Transfer

/// Issue 11, item 8: a server-chosen file name never replaces an existing
/// file unless the caller asked for it.
@Suite("Security: server-named destinations")
struct SecurityDestinationTests {
    static let existingBytes = Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) })

    @Test("destination(inDirectory:) leaves an existing file of the server's name untouched and fails with fileError")
    func inDirectoryDoesNotClobber() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let existing = directory.file("report.pdf")
        try Self.existingBytes.write(to: existing)
        let url = server.url("/content-disposition?name=attachment%3B%20filename%3D%22report.pdf%22")

        let done = Completion<DownloadOutcome>()
        let task = session.downloadTask(with: Request(url: url),
                                        destination: DownloadTask.destination(inDirectory: directory.url),
                                        completionHandler: done.handler)
        task.resume()
        let outcome = try await done.result()

        #expect(outcome.error?.code == .fileError)
        #expect(outcome.error?.systemErrno == EEXIST)
        #expect(try Data(contentsOf: existing) == Self.existingBytes)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["report.pdf"])
    }

    @Test("with replacesExistingFile the server-named file replaces the existing one")
    func inDirectoryClobbersWhenAsked() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let existing = directory.file("report.pdf")
        try Self.existingBytes.write(to: existing)
        let url = server.url("/content-disposition?name=attachment%3B%20filename%3D%22report.pdf%22")

        let done = Completion<DownloadOutcome>()
        let task = session.downloadTask(with: Request(url: url),
                                        destination: DownloadTask.destination(inDirectory: directory.url),
                                        completionHandler: done.handler)
        task.replacesExistingFile = true
        task.resume()
        let outcome = try await done.result()

        #expect(outcome.error == nil)
        #expect(outcome.url == existing)
        #expect(try String(contentsOf: existing, encoding: .utf8) == "content-disposition body\n")
    }

    @Test("moving without replacing keeps an existing file byte for byte; replacing swaps it")
    func moveWithoutReplacing() throws {
        let root = try TemporaryDirectory()
        let source = root.file("source")
        let target = root.file("target")
        try Data("new".utf8).write(to: source)
        try Data("old".utf8).write(to: target)

        #expect { try FileMover.move(from: source, to: target, replacing: false) } throws: { error in
            (error as? TransferError)?.code == .fileError && (error as? TransferError)?.systemErrno == EEXIST
        }
        #expect(try Data(contentsOf: target) == Data("old".utf8))
        #expect(FileManager.default.fileExists(atPath: source.path))

        try FileMover.move(from: source, to: target, replacing: true)
        #expect(try Data(contentsOf: target) == Data("new".utf8))
        #expect(!FileManager.default.fileExists(atPath: source.path))

        try Data("fresh".utf8).write(to: source)
        try FileMover.move(from: source, to: root.file("other"), replacing: false)
        #expect(try Data(contentsOf: root.file("other")) == Data("fresh".utf8))
        #expect(!FileManager.default.fileExists(atPath: source.path))
    }
}
