import Foundation
import Testing
import TestSupport

@Suite("transfer command: resume, checksum, segments")
struct CLIDownloadOptionTests {
    @Test("--resume keeps the part file on SIGINT and a second run completes it with a range request")
    func resumeAcrossRuns() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let path = directory.file("big.bin").path
        let count = 3 * 1024 * 1024
        let url = server.url("/bytes/\(count)?seed=12&rate=2097152").absoluteString
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try CLI.binary())
        process.arguments = ["get", "-s", "--resume", "-o", path, url]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        try process.run()
        // The journal is brought up to date about once a second: wait for it and a MiB.
        try Wait.until("a MiB and a journal on disk", timeout: .seconds(15)) {
            let size = (try? FileManager.default.attributesOfItem(atPath: path + ".part")[.size] as? NSNumber)?.intValue
            return (size ?? 0) >= 1 << 20 && FileManager.default.fileExists(atPath: path + ".part.journal")
        }
        kill(process.processIdentifier, SIGINT)
        #expect(exited.wait(timeout: .now() + 10) == .success)
        #expect(process.terminationStatus == 14)
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(FileManager.default.fileExists(atPath: path + ".part"))

        // The same URL and destination: the journal belongs to them.
        let second = try CLI.run(["get", "-s", "--resume", "-o", path, url])

        #expect(second.status == 0, "\(second.stderrText)")
        #expect(try FileDigest.sha256(of: URL(fileURLWithPath: path)) == TestServer.sha256(seed: 12, count: count))
        let last = try #require(server.requests.last)
        #expect(last.header("Range")?.hasPrefix("bytes=") == true, "\(last.headers)")
        #expect(last.header("Range") != "bytes=0-")
        #expect(CLI.listing(directory.path) == ["big.bin"])
    }

    @Test("--sha256: a match places the file, a mismatch exits 13 and places nothing")
    func checksum() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let url = server.url("/bytes/100000?seed=3").absoluteString
        let digest = TestServer.sha256(seed: 3, count: 100_000)
        let wrong = String(repeating: "0", count: 64)

        let good = try CLI.run(["get", "--sha256", digest, "-o", directory.file("good").path, url])
        let bad = try CLI.run(["get", "--sha256", wrong, "-o", directory.file("bad").path, url])
        let badStdout = try CLI.run(["get", "--sha256", wrong, url])

        #expect(good.status == 0, "\(good.stderrText)")
        #expect(bad.status == 13, "\(bad.stderrText)")
        #expect(bad.stderrText.contains("checksum mismatch"))
        #expect(badStdout.status == 13)
        #expect(badStdout.stdout.isEmpty)
        #expect(CLI.listing(directory.path) == ["good"])
    }

    @Test("--segments 4 assembles the file exactly, and falls back when ranges are ignored")
    func segments() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let count = 5 * 1024 * 1024 + 5  // over 1 MiB per connection, or the library uses one

        let ranged = try CLI.run(["get", "--segments", "4", "-o", directory.file("a").path,
                                  server.url("/bytes/\(count)?seed=8").absoluteString])
        let plain = try CLI.run(["get", "--segments", "4", "-o", directory.file("b").path,
                                 server.url("/bytes/\(count)?seed=8&ranges=0").absoluteString])

        #expect(ranged.status == 0, "\(ranged.stderrText)")
        #expect(plain.status == 0, "\(plain.stderrText)")
        #expect(try FileDigest.sha256(of: directory.file("a")) == TestServer.sha256(seed: 8, count: count))
        #expect(try FileDigest.sha256(of: directory.file("b")) == TestServer.sha256(seed: 8, count: count))
        #expect(server.requests.filter { $0.header("Range") != nil }.count >= 4, "\(server.requests.map { "\($0.method) \($0.target) \($0.headers)" })")
    }
}
