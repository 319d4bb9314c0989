import Foundation
import Synchronization
import Testing
import TestSupport
@testable import Transfer

@Suite("Download resume")
struct DownloadResumeTests {
    static let size = 16 << 20

    /// Starts a download limited to 1 MiB/s on the client (the engine's token bucket, so a
    /// loaded machine cannot let it finish first) and cancels it with resume data after 1 MiB.
    func resumeData(_ session: SessionManager, _ url: URL) async throws -> Data {
        let produced = Completion<Data?>()
        let task = session.downloadTask(with: Request(url: url))
        task.setSpeedLimit(receive: 1 << 20)
        task.whenReceived(1 << 20) { task in task.cancel { produced.fulfil($0) } }
        task.resume()
        let value = await produced.wait()
        let data = try #require(value)
        return try #require(data)
    }

    @Test("resume after cancel continues with Range and If-Range and is byte-exact")
    func resumeAfterCancel() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let offsets = Locked<[Int64]>([])
        session.hooks.downloadTaskDidResume = { _, _, offset, _ in offsets.withLock { $0.append(offset) } }
        let url = server.url("/bytes/\(Self.size)?seed=3")
        let directory = try TemporaryDirectory()

        let data = try await resumeData(session, url)
        let done = Completion<DownloadOutcome>()
        let firstProgress = Locked<Int64?>(nil)
        let task = try session.downloadTask(withResumeData: data, progress: { progress in
            firstProgress.withLock { if $0 == nil { $0 = progress.completedUnitCount } }
        }, destination: { _, _ in directory.file("out.bin") }, completionHandler: done.handler)
        task.resume()
        let outcome = try await done.result()

        #expect(outcome.error == nil)
        #expect(try FileDigest.sha256(of: directory.file("out.bin")) == TestServer.sha256(seed: 3, count: Self.size))
        let offset = try #require(offsets.withLock { $0.first })
        #expect(offset >= 1 << 20)
        #expect((firstProgress.withLock { $0 } ?? 0) >= offset)
        let last = try #require(server.requests.last)
        #expect(last.header("range") == "bytes=\(offset)-")
        #expect(last.header("if-range") == TestServer.etag(seed: 3, count: Self.size))
    }

    @Test("a server that ignores Range makes the resumed download restart from zero, exactly")
    func serverIgnoresRange() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let offsets = Locked<[Int64]>([])
        session.hooks.downloadTaskDidResume = { _, _, offset, _ in offsets.withLock { $0.append(offset) } }
        let url = server.url("/bytes/\(Self.size)?seed=4&ranges=0")
        let directory = try TemporaryDirectory()

        let data = try await resumeData(session, url)
        let done = Completion<DownloadOutcome>()
        let task = try session.downloadTask(withResumeData: data, destination: { _, _ in directory.file("out.bin") },
                                            completionHandler: done.handler)
        task.resume()
        let outcome = try await done.result()

        #expect(outcome.error == nil)
        #expect(offsets.withLock { $0 } == [0])
        #expect(try FileDigest.sha256(of: directory.file("out.bin")) == TestServer.sha256(seed: 4, count: Self.size))
    }

    @Test("a changed ETag between attempts restarts from zero, exactly")
    func changedValidator() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let url = server.url("/bytes/\(Self.size)?seed=5")
        let directory = try TemporaryDirectory()
        var data = try await resumeData(session, url)
        // The file changed on the server: the resume data's ETag is stale now.
        var json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        json["etag"] = "\"stale\""
        data = try JSONSerialization.data(withJSONObject: json)

        let done = Completion<DownloadOutcome>()
        let task = try session.downloadTask(withResumeData: data, destination: { _, _ in directory.file("out.bin") },
                                            completionHandler: done.handler)
        task.resume()
        let outcome = try await done.result()

        #expect(outcome.error == nil)
        #expect(outcome.response?.statusCode == 200)
        #expect(server.requests.last?.header("if-range") == "\"stale\"")
        #expect(try FileDigest.sha256(of: directory.file("out.bin")) == TestServer.sha256(seed: 5, count: Self.size))
    }

    @Test("corrupt and foreign resume data are refused with invalidResumeData")
    func invalidResumeData() throws {
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let samples = [Data("not json".utf8), Data(#"{"format":"other","version":1}"#.utf8),
                       Data(#"{"format":"transfer.resume","version":99,"url":"http://x/","method":"GET","headers":[],"bytesOnDisk":1,"partialFile":"/nonexistent"}"#.utf8),
                       Data(#"{"format":"transfer.resume","version":1,"url":"http://127.0.0.1/","method":"GET","headers":[],"bytesOnDisk":10,"partialFile":"/nonexistent/part"}"#.utf8)]
        for sample in samples {
            #expect(throws: TransferError.self) { _ = try session.downloadTask(withResumeData: sample) }
            do {
                _ = try session.downloadTask(withResumeData: sample)
            } catch {
                #expect(error.code == .invalidResumeData)
            }
        }
    }

    @Test("a resumable download continues from its journal in a new session and removes it on success")
    func journalAcrossSessions() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let destination = directory.file("big.bin")
        let url = server.url("/bytes/\(Self.size)?seed=6")
        let options = DownloadOptions(resumable: true, journalIntervalBytes: 256 << 10)

        // First "process": stopped after 2 MiB.
        do {
            let session = try SessionManager()
            let done = Completion<DownloadOutcome>()
            var limited = options
            limited.speedLimit = 2 << 20
            let task = session.downloadTask(with: Request(url: url), to: destination, options: limited,
                                            completionHandler: done.handler)
            task.whenReceived(2 << 20) { $0.cancel() }
            task.resume()
            let outcome = try await done.result()
            #expect(outcome.error?.code == .cancelled)
            session.invalidateAndCancel()
        }
        #expect(!exists(destination))
        let durable = try #require(ResumeJournal.read(at: destination.path + ".part.journal")).durable
        #expect(durable >= 2 << 20)
        #expect(fileSize(URL(fileURLWithPath: destination.path + ".part")) >= durable)

        // Second "process": continues from the journal.
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let offsets = Locked<[Int64]>([])
        session.hooks.downloadTaskDidResume = { _, _, offset, _ in offsets.withLock { $0.append(offset) } }
        let done = Completion<DownloadOutcome>()
        session.downloadTask(with: Request(url: url), to: destination, options: options, completionHandler: done.handler)
            .resume()
        let outcome = try await done.result()

        #expect(outcome.error == nil)
        #expect(offsets.withLock { $0 } == [durable])
        #expect(server.requests.last?.header("range") == "bytes=\(durable)-")
        #expect(try FileDigest.sha256(of: destination) == TestServer.sha256(seed: 6, count: Self.size))
        #expect(!exists(destination.path + ".part.journal"))
        #expect(!exists(destination.path + ".part"))
    }

    @Test("a connection reset mid-body keeps a journal that a later run resumes from, exactly")
    func resetThenResume() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let destination = directory.file("reset.bin")
        let options = DownloadOptions(resumable: true)
        let resetURL = server.url("/reset/\(Self.size)?seed=7&after=3000000")

        let first = Completion<DownloadOutcome>()
        session.downloadTask(with: Request(url: resetURL), to: destination, options: options,
                             completionHandler: first.handler).resume()
        let failed = try await first.result()
        #expect(failed.error != nil)
        #expect(!exists(destination))
        let journalPath = destination.path + ".part.journal"
        var journal = try #require(ResumeJournal.read(at: journalPath))
        let durable = journal.durable
        #expect(journal.url == resetURL.absoluteString)
        #expect(durable > 0 && durable <= 3_000_000)

        // The same bytes served by a healthy route: point the journal at it.
        let goodURL = server.url("/bytes/\(Self.size)?seed=7")
        journal.url = goodURL.absoluteString
        try journal.write(to: journalPath)
        let second = Completion<DownloadOutcome>()
        session.downloadTask(with: Request(url: goodURL), to: destination, options: options,
                             completionHandler: second.handler).resume()
        let outcome = try await second.result()

        #expect(outcome.error == nil)
        #expect(server.requests.last?.header("range") == "bytes=\(durable)-")
        #expect(try FileDigest.sha256(of: destination) == TestServer.sha256(seed: 7, count: Self.size))
    }

    @Test("an ETag holding a bare CR is no validator: it never reaches the journal or If-Range")
    func etagWithCarriageReturnIsDropped() async throws {
        // Found by fuzz_header_cb: the engine kept the CR, and a resume sent
        // it back in If-Range (a header split on the way to the server).
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let destination = directory.file("etag.bin")

        let done = Completion<DownloadOutcome>()
        session.downloadTask(with: Request(url: server.url("/etag-cr")), to: destination,
                             options: DownloadOptions(resumable: true), completionHandler: done.handler).resume()
        let outcome = try await done.result()

        #expect(outcome.error != nil)
        let journal = try #require(ResumeJournal.read(at: destination.path + ".part.journal"))
        #expect(journal.etag == nil)
        let bytes = try String(contentsOfFile: destination.path + ".part.journal", encoding: .utf8)
        #expect(!bytes.contains("\r") && !bytes.contains("X-Injected"))
    }
}

@Suite("Download resume edge cases")
struct DownloadResumeEdgeTests {
    @Test("a part file the journal says is complete (killed before the rename) is finished, not refetched or 416")
    func completePartFile() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let count = 1 << 20
        let url = server.url("/bytes/\(count)?seed=91")
        let destination = directory.file("done.bin")
        try TestServer.bytes(seed: 91, count: count).write(to: URL(fileURLWithPath: destination.path + ".part"))
        try ResumeJournal(url: url.absoluteString, etag: TestServer.etag(seed: 91, count: count),
                          lastModified: TestServer.lastModified, rangeStart: -1, rangeEnd: -1, length: Int64(count),
                          durable: Int64(count))
            .write(to: destination.path + ".part.journal")
        let done = Completion<DownloadOutcome>()

        session.downloadTask(with: Request(url: url), to: destination, options: DownloadOptions(resumable: true),
                             completionHandler: done.handler).resume()
        let outcome = try await done.result()

        #expect(outcome.error == nil)
        #expect(outcome.response?.statusCode == 206)
        #expect(server.requests.last?.header("range") == "bytes=\(count - 1)-")
        #expect(try FileDigest.sha256(of: destination) == TestServer.sha256(seed: 91, count: count))
    }

    @Test("a torn or foreign journal is ignored and the download starts clean")
    func tornJournal() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let count = 1 << 20
        let url = server.url("/bytes/\(count)?seed=92")
        let destination = directory.file("torn.bin")
        try Data(repeating: 0xAA, count: count / 2).write(to: URL(fileURLWithPath: destination.path + ".part"))
        // A journal torn by a crash mid-write: its first half.
        let journalPath = destination.path + ".part.journal"
        try ResumeJournal(url: url.absoluteString, etag: TestServer.etag(seed: 92, count: count), lastModified: nil,
                          rangeStart: -1, rangeEnd: -1, length: Int64(count), durable: Int64(count / 2))
            .write(to: journalPath)
        #expect(truncate(journalPath, off_t(fileSize(URL(fileURLWithPath: journalPath)) / 2)) == 0)
        #expect(ResumeJournal.read(at: journalPath) == nil)
        let done = Completion<DownloadOutcome>()

        session.downloadTask(with: Request(url: url), to: destination, options: DownloadOptions(resumable: true),
                             completionHandler: done.handler).resume()
        let outcome = try await done.result()

        #expect(outcome.error == nil)
        #expect(server.requests.last?.header("range") == nil)
        #expect(try FileDigest.sha256(of: destination) == TestServer.sha256(seed: 92, count: count))
    }
}
