import Foundation
import Testing
import TestSupport

@testable import Transfer

/// Issue 11, items 6 and 7: resume data that names files, and the private
/// temporary folder part files live in.
@Suite("Security: files and resume data")
struct SecurityFileTests {
    static let victimBytes = Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) })

    /// A file that crafted resume data tries to reach: 4 KiB of a known pattern.
    func makeVictim(in directory: TemporaryDirectory) throws -> URL {
        let victim = directory.file("victim.bin")
        try Self.victimBytes.write(to: victim)
        return victim
    }

    func document(url: URL, partialFile: String, bytesOnDisk: Int = 10, _ fields: [String: Any] = [:]) throws -> Data {
        var base: [String: Any] = ["format": "transfer.resume", "version": 1, "url": url.absoluteString,
                                   "method": "GET", "headers": [["Accept", "*/*"]], "etag": "\"e1\"",
                                   "bytesOnDisk": bytesOnDisk, "partialFile": partialFile]
        base.merge(fields) { $1 }
        return try JSONSerialization.data(withJSONObject: base)
    }

    func expectRefused(_ session: SessionManager, _ data: Data, _ comment: Comment? = nil,
                       sourceLocation: SourceLocation = #_sourceLocation)
    {
        do {
            let task = try session.downloadTask(withResumeData: data)
            task.cancel()
            Issue.record("resume data was accepted: \(comment?.rawValue ?? "")", sourceLocation: sourceLocation)
        } catch {
            #expect(error.code == .invalidResumeData, comment, sourceLocation: sourceLocation)
        }
    }

    /// The session's private folder, made as a task would make it.
    func privateFolder(_ session: SessionManager) throws -> String {
        let folder = session.temporaryDirectory.path
        try TemporaryFolder.prepare(folder)
        return folder
    }

    // MARK: - Item 6: resume data names files

    @Test("resume data naming a file outside the temporary folder is refused and the file is untouched")
    func outsideFileIsRefused() throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let victim = try makeVictim(in: directory)

        expectRefused(session, try document(url: server.url("/bytes/100"), partialFile: victim.path))

        #expect(try Data(contentsOf: victim) == Self.victimBytes)
        #expect(server.requests.isEmpty)
    }

    @Test("a symlink in the temporary folder pointing outside is refused; its target is untouched")
    func symlinkInFolderIsRefused() throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let victim = try makeVictim(in: directory)
        let folder = try privateFolder(session)
        let link = folder + "/download-\(UUID().uuidString).part"
        let linkedFolder = folder + "/dir-\(UUID().uuidString)"
        #expect(symlink(victim.path, link) == 0)
        #expect(symlink(directory.path, linkedFolder) == 0)
        defer {
            unlink(link)
            unlink(linkedFolder)
        }

        expectRefused(session, try document(url: server.url("/bytes/100"), partialFile: link), "symlinked file")
        expectRefused(session, try document(url: server.url("/bytes/100"), partialFile: linkedFolder + "/victim.bin"),
                      "symlinked folder")

        #expect(try Data(contentsOf: victim) == Self.victimBytes)
        #expect(server.requests.isEmpty)
    }

    @Test("a partial file path that climbs out of the temporary folder with .. is refused")
    func dotDotEscapeIsRefused() throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let victim = try makeVictim(in: directory)
        let folder = try privateFolder(session)
        let climbing = folder + String(repeating: "/..", count: 32) + victim.path
        #expect(FileManager.default.fileExists(atPath: climbing), "the path does reach the victim")

        expectRefused(session, try document(url: server.url("/bytes/100"), partialFile: climbing))
        expectRefused(session, try document(url: server.url("/bytes/100"), partialFile: folder + "/./x/../../victim"))

        #expect(try Data(contentsOf: victim) == Self.victimBytes)
        #expect(server.requests.isEmpty)
    }

    @Test("CR, LF or NUL in a header, the ETag, Last-Modified, the method or the URL is refused; nothing is touched")
    func injectionIsRefused() throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let folder = try privateFolder(session)
        // A genuine part file, longer than the documents claim: decoding
        // must not trim it.
        let part = folder + "/download-\(UUID().uuidString).part"
        #expect(FileManager.default.createFile(atPath: part, contents: Self.victimBytes,
                                               attributes: [.posixPermissions: 0o600]))
        defer { unlink(part) }
        let url = server.url("/bytes/4096")
        let crafted: [(String, [String: Any])] = [
            ("header value", ["headers": [["X-A", "b\r\nInjected: yes"]]]),
            ("header value LF", ["headers": [["X-A", "b\nInjected: yes"]]]),
            ("header value NUL", ["headers": [["X-A", "b\u{0}c"]]]),
            ("header name", ["headers": [["X-A\r\nInjected", "yes"]]]),
            ("header name with a space", ["headers": [["Bad Name", "yes"]]]),
            ("header not a pair", ["headers": [["X-A", "b", "c"]]]),
            ("etag", ["etag": "\"e1\"\r\nInjected: yes"]),
            ("last-modified", ["etag": NSNull(), "lastModified": "Mon\r\nInjected: yes"]),
            ("method", ["method": "GET / HTTP/1.1\r\nInjected: yes\r\nX"]),
            ("method with a space", ["method": "GET /"]),
            ("scheme", ["url": "file:///etc/passwd"]),
            ("ftp", ["url": "ftp://127.0.0.1/x"]),
        ]

        for (what, fields) in crafted {
            expectRefused(session, try document(url: url, partialFile: part, bytesOnDisk: 100, fields), "\(what)")
        }

        #expect(try Data(contentsOf: URL(fileURLWithPath: part)) == Self.victimBytes)
        #expect(server.requests.isEmpty)
    }

    @Test("a symlink planted at <destination>.part is never written through, with or without a journal")
    func symlinkedPartFileIsNotFollowed() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let victim = try makeVictim(in: directory)
        let url = server.url("/bytes/100000?seed=23")
        let destination = directory.file("out.bin")
        let plain = directory.file("plain.bin")
        #expect(symlink(victim.path, plain.path + ".part") == 0)
        #expect(symlink(victim.path, destination.path + ".part") == 0)
        // A journal that claims the victim's first 100 bytes for this URL.
        try ResumeJournal(url: url.absoluteString, etag: TestServer.etag(seed: 23, count: 100000), lastModified: nil,
                          rangeStart: -1, rangeEnd: -1, length: 100000, durable: 100)
            .write(to: destination.path + ".part.journal")

        let first = Completion<DownloadOutcome>()
        session.downloadTask(with: Request(url: url), to: plain, completionHandler: first.handler).resume()
        let plainOutcome = try await first.result()
        let second = Completion<DownloadOutcome>()
        session.downloadTask(with: Request(url: url), to: destination, options: DownloadOptions(resumable: true),
                             completionHandler: second.handler).resume()
        let resumableOutcome = try await second.result()

        #expect(try Data(contentsOf: victim) == Self.victimBytes)
        #expect(plainOutcome.error?.code == .fileError, "the symlink is refused, not followed")
        // The journal's part file is not a plain file: start clean instead.
        #expect(resumableOutcome.error == nil)
        #expect(try FileDigest.sha256(of: destination) == TestServer.sha256(seed: 23, count: 100000))
        #expect(server.requests.last?.header("range") == nil)
    }

    /// Cancels a 1 MiB/s download after 1 MiB and returns its resume data.
    func resumeData(_ task: DownloadTask) async throws -> Data {
        let produced = Completion<Data?>()
        task.setSpeedLimit(receive: 1 << 20)
        task.whenReceived(1 << 20) { task in task.cancel { produced.fulfil($0) } }
        task.resume()
        let value = await produced.wait()
        let data = try #require(value)
        return try #require(data)
    }

    @Test("a real resume still works; unconfirmed bytes are dropped only when the task runs; folder 0700, part 0600")
    func realResumeStillWorks() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let size = 4 << 20
        let url = server.url("/bytes/\(size)?seed=21")
        let directory = try TemporaryDirectory()
        let data = try await resumeData(session.downloadTask(with: Request(url: url)))
        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let part = try #require(json["partialFile"] as? String)
        let bytesOnDisk = try #require(json["bytesOnDisk"] as? Int)

        var folderInfo = stat()
        var partInfo = stat()
        #expect(lstat(session.temporaryDirectory.path, &folderInfo) == 0)
        #expect(lstat(part, &partInfo) == 0)
        #expect(folderInfo.st_mode & 0o7777 == 0o700)
        #expect(folderInfo.st_uid == geteuid())
        #expect(partInfo.st_mode & 0o7777 == 0o600)
        #expect(URL(fileURLWithPath: part).deletingLastPathComponent().path == session.temporaryDirectory.path)
        // Bytes the resume data does not vouch for: a crash after a write.
        let handle = try #require(FileHandle(forWritingAtPath: part))
        handle.seekToEndOfFile()
        handle.write(Data(repeating: 0xEE, count: 777))
        try handle.close()
        let longer = fileSize(URL(fileURLWithPath: part))

        let done = Completion<DownloadOutcome>()
        let task = try session.downloadTask(withResumeData: data, destination: { _, _ in directory.file("out.bin") },
                                            completionHandler: done.handler)
        #expect(fileSize(URL(fileURLWithPath: part)) == longer, "decoding touched the part file")
        task.resume()
        let outcome = try await done.result()

        #expect(outcome.error == nil)
        #expect(try FileDigest.sha256(of: directory.file("out.bin")) == TestServer.sha256(seed: 21, count: size))
        #expect(server.requests.last?.header("range") == "bytes=\(bytesOnDisk)-")
    }

    @Test("resume data of a download to a fixed file names a part file in the temporary folder, and resumes")
    func fixedDestinationResumeData() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let size = 4 << 20
        let url = server.url("/bytes/\(size)?seed=22")
        let directory = try TemporaryDirectory()

        let data = try await resumeData(session.downloadTask(with: Request(url: url), to: directory.file("fixed.bin"),
                                                             completionHandler: { _, _, _ in }))
        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let part = try #require(json["partialFile"] as? String)
        #expect(URL(fileURLWithPath: part).deletingLastPathComponent().path == session.temporaryDirectory.path)

        let done = Completion<DownloadOutcome>()
        let task = try session.downloadTask(withResumeData: data, destination: { _, _ in directory.file("out.bin") },
                                            completionHandler: done.handler)
        task.resume()
        let outcome = try await done.result()

        #expect(outcome.error == nil)
        #expect(try FileDigest.sha256(of: directory.file("out.bin")) == TestServer.sha256(seed: 22, count: size))
    }
}
