import Foundation
import Testing
import TestSupport
@testable import Transfer

/// kill -9 of a process in the middle of a resumable download, many times:
/// the journal never claims a byte that is not in the part file, nothing
/// incomplete ever appears at the destination, and a last run finishes the
/// file byte for byte.
///
/// What this cannot show is power loss (the page cache survives kill -9); the
/// journal's fdatasync-before-rename order is what covers that.
@Suite("Download crash safety")
struct DownloadCrashTests {
    static var helper: String? {
        var candidates: [String] = []
        if let runner = CommandLine.arguments.first {
            var directory = URL(fileURLWithPath: runner).deletingLastPathComponent()
            if directory.lastPathComponent == "MacOS" || directory.path.hasSuffix(".xctest/Contents") {
                directory = directory.deletingLastPathComponent()
            }
            candidates.append(directory.appendingPathComponent("transfer-crashtest").path)
        }
        candidates.append(FileManager.default.currentDirectoryPath + "/.build/debug/transfer-crashtest")
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Checks the invariant after a kill: the journal's claim is backed by the part file.
    func checkState(destination: URL, seed: UInt64, count: Int, segments: Int) throws {
        if exists(destination) {
            #expect(try FileDigest.sha256(of: destination) == TestServer.sha256(seed: seed, count: count),
                    "a file at the destination must be complete")
        }
        let part = destination.path + ".part"
        let journals = segments > 1 ? (0..<segments).map { "\(part).seg\($0).journal" } : ["\(part).journal"]
        for journalPath in journals {
            guard FileManager.default.fileExists(atPath: journalPath) else { continue }
            // The engine's own reader: nil for a torn or inconsistent journal.
            let journal = try #require(ResumeJournal.read(at: journalPath), "a journal is never torn")
            let durable = Int(journal.durable)
            let start = Int(max(0, journal.rangeStart))
            guard durable > start else { continue }
            let handle = try #require(FileHandle(forReadingAtPath: part), "a journal claiming bytes needs its part file")
            defer { try? handle.close() }
            try handle.seek(toOffset: UInt64(start))
            let bytes = try handle.read(upToCount: durable - start) ?? Data()
            #expect(bytes.count == durable - start, "the part file holds every claimed byte")
            #expect(bytes == TestServer.bytes(seed: seed, offset: start, count: durable - start),
                    "claimed bytes are the server's bytes")
        }
    }

    func killRepeatedly(segments: Int, seed: UInt64) async throws {
        guard let helper = Self.helper else {
            Issue.record("transfer-crashtest not built next to the test runner")
            return
        }
        let server = try TestServer()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let count = 24 << 20
        let url = server.url("/bytes/\(count)?seed=\(seed)")
        let destination = directory.file("crash.bin")
        let base = [url.absoluteString, destination.path, "\(256 << 10)", "\(segments)"]
        var kills = 0

        for round in 0..<10 {
            // The helper kills itself with SIGKILL when its progress passes a random point; it
            // is limited to 16 MiB/s so that point comes before the end even on a loaded machine.
            let killAt = Int.random(in: (count / 20)...(count * 9 / 10))
            let process = Process()
            process.executableURL = URL(fileURLWithPath: helper)
            process.arguments = base + ["\(killAt)", "\(16 << 20)"]
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            if process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGKILL { kills += 1 }
            try checkState(destination: destination, seed: seed, count: count, segments: segments)
            if exists(destination) && round > 2 { break }
        }
        #expect(kills > 0)
        let arguments = base

        let resumable = !exists(destination) && exists(destination.path + ".part")
        let before = server.requests.count
        let final = try Command.run(helper, arguments, timeout: .seconds(120))
        if resumable {
            // The last run continued: some request asked for a range that does not start at a boundary.
            let ranges = server.requests.dropFirst(before).compactMap { $0.header("range") }
            #expect(!ranges.isEmpty, "the last run resumed instead of starting over")
        }
        #expect(final.status == 0, "\(final.stdoutText)")
        #expect(try FileDigest.sha256(of: destination) == TestServer.sha256(seed: seed, count: count))
        #expect(!exists(destination.path + ".part.journal"))
    }

    @Test("kill -9 at random points of a plain resumable download never corrupts it")
    func plain() async throws {
        try await killRepeatedly(segments: 1, seed: 41)
    }

    @Test("kill -9 at random points of a segmented resumable download never corrupts it")
    func segmented() async throws {
        try await killRepeatedly(segments: 4, seed: 42)
    }
}
