import Foundation
import Testing
import TestSupport
import Transfer

@Suite("Segmented download floor")
struct DownloadSegmentFloorTests {
    @Test("the default floor of 1 MiB per connection splits a 3 MiB file into 3 ranges when 4 are asked")
    func defaultFloorUsesFewerSegments() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let count = 3 << 20
        let destination = directory.file("three.bin")

        let download = session.segmentedDownload(
            with: Request(url: server.url("/bytes/\(count)?seed=41")), to: destination, segments: 4)
        _ = try await download.value

        #expect(DownloadOptions().minimumSegmentSize == 1 << 20)
        #expect(download.segmentsUsed == 3)
        #expect(server.requests.filter { $0.header("range") != nil }.count == 3)
        #expect(try FileDigest.sha256(of: destination) == TestServer.sha256(seed: 41, count: count))
    }

    @Test("a lower floor splits a 256 KiB file over all 4 connections")
    func configurableFloor() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let count = 256 << 10
        let destination = directory.file("small.bin")
        var options = DownloadOptions()
        options.minimumSegmentSize = 64 << 10

        let download = session.segmentedDownload(
            with: Request(url: server.url("/bytes/\(count)?seed=42")), to: destination, segments: 4,
            options: options)
        _ = try await download.value

        #expect(download.segmentsUsed == 4)
        let ranged = server.requests.filter { $0.header("range") != nil }
        #expect(ranged.count == 4)
        #expect(try FileDigest.sha256(of: destination) == TestServer.sha256(seed: 42, count: count))
    }

    @Test("a file shorter than two segments goes over one connection, and says so")
    func belowTwoSegmentsIsOneConnection() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let count = (1 << 20) + 4096
        let destination = directory.file("one.bin")

        let download = session.segmentedDownload(
            with: Request(url: server.url("/bytes/\(count)?seed=43")), to: destination, segments: 8)
        _ = try await download.value

        #expect(download.segmentsUsed == 1)
        #expect(server.requests.filter { $0.header("range") != nil }.isEmpty)
        #expect(try FileDigest.sha256(of: destination) == TestServer.sha256(seed: 43, count: count))
    }
}
