import Foundation
import Synchronization
import Testing
import TestSupport
import Transfer

@Suite("Segmented download")
struct DownloadSegmentedTests {
    @Test("256 MiB (32 MiB under sanitizers) over N connections is byte-exact, with one aggregated progress",
          arguments: [4, 8])
    func segmented(segments: Int) async throws {
        let server = try TestServer()
        defer { server.stop() }
        // The default of 6 connections per host would queue segments 7 and 8.
        var configuration = SessionConfiguration()
        configuration.maxConnectionsPerHost = 16
        let session = try SessionManager(configuration: configuration)
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let count = underSanitizer ? 32 << 20 : 256 << 20
        let destination = directory.file("big.bin")
        let maxSeen = Locked<Int64>(0)
        // Every range waits at the gate until all of them have arrived: none
        // can finish and leave its connection to another.
        let download = session.segmentedDownload(with: Request(url: server.url("/bytes/\(count)?seed=21&gate=seg")),
                                                 to: destination, segments: segments)
        download.observeProgress(.download, on: .global()) { progress in
            maxSeen.withLock { $0 = max($0, progress.completedUnitCount) }
        }
        download.resume()
        try await Wait.until("all \(segments) ranges are in", timeout: .seconds(30)) { server.heldAtGate("seg") == segments }
        server.openGate("seg")

        let url = try await download.value

        #expect(url == destination)
        #expect(download.segmentsUsed == segments)
        #expect(try FileDigest.sha256(of: destination) == TestServer.sha256(seed: 21, count: count))
        let ranged = server.requests.filter { $0.header("range") != nil }
        #expect(ranged.count == segments)
        #expect(Set(ranged.map(\.clientPort)).count == segments)
        #expect(download.progress(.download).completedUnitCount == Int64(count))
        #expect(maxSeen.withLock { $0 } == Int64(count))
        #expect(!exists(destination.path + ".part"))
    }

    @Test("without Accept-Ranges it falls back to one connection")
    func fallback() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let count = 16 << 20
        let download = session.segmentedDownload(with: Request(url: server.url("/bytes/\(count)?seed=22&ranges=0")),
                                                 to: directory.file("one.bin"), segments: 4)

        _ = try await download.value

        #expect(download.segmentsUsed == 1)
        #expect(try FileDigest.sha256(of: directory.file("one.bin")) == TestServer.sha256(seed: 22, count: count))
    }

    @Test("a resumable segmented download continues each range from its journal")
    func resumable() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let count = 32 << 20
        let url = server.url("/bytes/\(count)?seed=23&rate=2097152")
        let destination = directory.file("seg.bin")
        let options = DownloadOptions(resumable: true, journalIntervalBytes: 128 << 10)

        do {
            let session = try SessionManager()
            let download = session.segmentedDownload(with: Request(url: url), to: destination, segments: 4,
                                                     options: options)
            let fired = Atomic<Bool>(false)
            download.observeProgress(.download, on: .global()) { progress in
                if progress.completedUnitCount >= 4 << 20, !fired.exchange(true, ordering: .relaxed) { download.cancel() }
            }
            await #expect(throws: TransferError.self) { _ = try await download.value }
            session.invalidateAndCancel()
        }
        #expect(!exists(destination))
        #expect(exists(destination.path + ".part.segments"))
        let journals = (0..<4).map { try? String(contentsOfFile: destination.path + ".part.seg\($0).journal", encoding: .utf8) }
        #expect(journals.allSatisfy { $0 != nil })
        let before = server.requests.count

        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let download = session.segmentedDownload(with: Request(url: url), to: destination, segments: 4, options: options)
        _ = try await download.value

        #expect(try FileDigest.sha256(of: destination) == TestServer.sha256(seed: 23, count: count))
        let resumed = server.requests.dropFirst(before).compactMap { $0.header("range") }
        // Only what the journals did not confirm was asked for again.
        let requested = resumed.reduce(Int64(0)) { sum, range in
            let bounds = range.dropFirst(6).split(separator: "-").compactMap { Int64($0) }
            return sum + (bounds.count == 2 ? bounds[1] - bounds[0] + 1 : Int64(count))
        }
        #expect(requested < Int64(count), "ranges \(resumed), journals \(journals)")
        #expect(download.progress(.download).resumeOffset > 0)
        #expect(!exists(destination.path + ".part.segments"))
        #expect(!exists(destination.path + ".part.seg0.journal"))
    }

    @Test("a segmented download checks an expected SHA-256 and places nothing on mismatch")
    func segmentedChecksum() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let count = 8 << 20
        let download = session.segmentedDownload(
            with: Request(url: server.url("/bytes/\(count)?seed=24")), to: directory.file("c.bin"), segments: 4,
            options: DownloadOptions(expectedSHA256: TestServer.sha256(seed: 1, count: count)))

        await #expect(throws: TransferError.self) { _ = try await download.value }

        #expect(download.error?.code == .checksumMismatch)
        #expect(!exists(directory.file("c.bin")))
        #expect(!exists(directory.file("c.bin.part")))
    }
}
