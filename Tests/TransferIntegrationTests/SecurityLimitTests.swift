import Foundation
import Testing
import TestSupport
import Transfer

#if canImport(Glibc)
    import Glibc
#endif

/// Issue 11, items 10 and 11: what a server can make us spend (memory, disk)
/// is bounded by the limits and by the bytes that really came, never by what
/// the server announced. Each test performs the attack against TestServer.
@Suite("Security limits")
struct SecurityLimitTests {
    /// A data task's outcome.
    struct DataOutcome: Sendable {
        var data: Data?
        var error: TransferError?
    }

    private func fetch(_ url: URL, configuration: SessionConfiguration) async throws -> DataOutcome {
        let session = try SessionManager(configuration: configuration)
        defer { session.invalidateAndCancel() }
        let done = Completion<DataOutcome>()
        session.dataTask(with: Request(url: url)) { _, data, error in
            done.fulfil(DataOutcome(data: data, error: error))
        }.resume()
        guard let outcome = await done.wait() else { throw DownloadTestError.timedOut("data task") }
        return outcome
    }

    private func download(_ url: URL, to destination: URL, options: DownloadOptions = DownloadOptions(),
                          configuration: SessionConfiguration = .default) async throws -> DownloadOutcome
    {
        let session = try SessionManager(configuration: configuration)
        defer { session.invalidateAndCancel() }
        let done = Completion<DownloadOutcome>()
        session.downloadTask(with: Request(url: url), to: destination, options: options, progress: nil,
                             completionHandler: done.handler).resume()
        return try await done.result()
    }

    /// Bytes the file system allocated for `path` (st_blocks * 512), -1 when absent.
    private func allocatedBytes(_ path: String) -> Int64 {
        var st = stat()
        guard stat(path, &st) == 0 else { return -1 }
        return Int64(st.st_blocks) * 512
    }

    // MARK: - Item 10: decompression bombs and oversized bodies

    @Test("a gzip bomb into memory is cut at maximumResponseBodySize, not grown to its decoded size")
    func gzipBombIntoMemoryStopsAtTheBodyLimit() async throws {
        let server = try TestServer()
        defer { server.stop() }
        var configuration = SessionConfiguration()
        configuration.maximumResponseBodySize = 4 << 20
        configuration.maximumDecompressionRatio = 0  // only the size limit is under test

        // 256 MiB of zeros in ~1.7 MB of gzip.
        let outcome = try await fetch(server.url("/gzip-zeros/268435456"), configuration: configuration)

        #expect(outcome.error?.code == .responseTooLarge)
        #expect(outcome.error?.message.contains("4194304") == true)
        #expect(outcome.data == nil || outcome.data!.count <= 4 << 20)
    }

    @Test("a gzip bomb is refused by the default decompression ratio before 64 MiB are spent")
    func gzipBombTripsTheDefaultRatio() async throws {
        let server = try TestServer()
        defer { server.stop() }

        let outcome = try await fetch(server.url("/gzip-zeros/268435456"), configuration: .default)

        #expect(outcome.error?.code == .responseTooLarge)
        #expect(outcome.error?.message.contains("per byte received") == true)
    }

    @Test("a gzip bomb downloaded to a file is cut by the ratio and leaves no file behind")
    func gzipBombToFileIsCutAndRemoved() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let destination = directory.file("bomb.bin")

        for path in ["/gzip-zeros/268435456", "/gzip-zeros/268435456?chunked=1"] {
            let outcome = try await download(server.url(path), to: destination)

            #expect(outcome.error?.code == .responseTooLarge, "\(path)")
            #expect(!exists(destination), "\(path)")
            #expect(!exists(destination.path + ".part"), "\(path)")
        }
    }

    @Test("an honest small gzip body still decodes")
    func smallGzipBodyDecodes() async throws {
        let server = try TestServer()
        defer { server.stop() }

        let outcome = try await fetch(server.url("/gzip-zeros/500000"), configuration: .default)

        #expect(outcome.error == nil)
        #expect(outcome.data == Data(count: 500_000))
    }

    @Test("a plain body over the limit fails at the announced Content-Length")
    func plainBodyOverTheLimitWithContentLength() async throws {
        let server = try TestServer()
        defer { server.stop() }
        var configuration = SessionConfiguration()
        configuration.maximumResponseBodySize = 1 << 20

        let outcome = try await fetch(server.url("/bytes/3000000?seed=5"), configuration: configuration)

        #expect(outcome.error?.code == .responseTooLarge)
        #expect(outcome.error?.message.contains("announced") == true)
    }

    @Test("a chunked body without Content-Length is cut when it grows past the limit")
    func plainBodyOverTheLimitWithoutContentLength() async throws {
        let server = try TestServer()
        defer { server.stop() }
        var configuration = SessionConfiguration()
        configuration.maximumResponseBodySize = 1 << 20

        let over = try await fetch(server.url("/chunked/3000000?seed=6&chunk=65536"), configuration: configuration)
        let under = try await fetch(server.url("/chunked/1048576?seed=6&chunk=65536"), configuration: configuration)

        #expect(over.error?.code == .responseTooLarge)
        #expect(over.error?.message.contains("larger than the limit") == true)
        #expect(under.error == nil)
        #expect(under.data == TestServer.bytes(seed: 6, count: 1 << 20))
    }

    @Test("maximumFileSize refuses a download whose body passes it, and nothing is placed")
    func downloadOverMaximumFileSize() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        var options = DownloadOptions()
        options.maximumFileSize = 1 << 20

        let announced = try await download(server.url("/bytes/3000000?seed=7"), to: directory.file("a.bin"),
                                           options: options)
        let chunked = try await download(server.url("/chunked/3000000?seed=7&chunk=65536"),
                                         to: directory.file("b.bin"), options: options)

        #expect(announced.error?.code == .responseTooLarge)
        #expect(chunked.error?.code == .responseTooLarge)
        for name in ["a.bin", "a.bin.part", "b.bin", "b.bin.part"] {
            #expect(!exists(directory.file(name)), "\(name)")
        }
    }

    // MARK: - Item 11: a lying Content-Length

    @Test("a 10 GiB Content-Length followed by 5 bytes leaves no large allocation, kept or removed")
    func lyingContentLengthAllocatesNothingLarge() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let claim = "/truncate/10737418240?send=5&seed=9"

        // Resumable: the part file is kept for a later resume.
        let kept = directory.file("kept.bin")
        let keptOutcome = try await download(server.url(claim), to: kept, options: DownloadOptions(resumable: true))
        // Not resumable: the part file goes.
        let gone = directory.file("gone.bin")
        let goneOutcome = try await download(server.url(claim), to: gone)

        #expect(keptOutcome.error?.code == .truncatedResponse)
        #expect(!exists(kept))
        #expect(fileSize(URL(fileURLWithPath: kept.path + ".part")) == 5)
        let allocated = allocatedBytes(kept.path + ".part")
        #expect(allocated >= 0 && allocated < 1 << 20, "part file holds \(allocated) allocated bytes")
        #expect(goneOutcome.error?.code == .truncatedResponse)
        #expect(!exists(gone))
        #expect(!exists(gone.path + ".part"))
    }

    @Test("a 10 GiB Content-Length into memory is refused by the default limit at the head")
    func lyingContentLengthIntoMemory() async throws {
        let server = try TestServer()
        defer { server.stop() }

        let outcome = try await fetch(server.url("/truncate/10737418240?send=5"), configuration: .default)

        #expect(outcome.error?.code == .responseTooLarge)
    }

    @Test("a segmented download whose HEAD claims 10 GiB keeps a sparse part file, not a 10 GiB allocation")
    func segmentedLyingHeadAllocatesNothingLarge() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let destination = directory.file("segmented.bin")

        // HEAD: 10 GiB with ranges; every GET: a short 200 (the range ignored).
        let download = session.segmentedDownload(
            with: Request(url: server.url("/truncate/10737418240?send=5&ranges=1")), to: destination, segments: 4,
            options: DownloadOptions(resumable: true))
        var failure: TransferError?
        do { _ = try await download.value } catch { failure = error as? TransferError }

        #expect(failure != nil)
        #expect(!exists(destination))
        let allocated = allocatedBytes(destination.path + ".part")
        #expect(allocated < 1 << 20, "part file holds \(allocated) allocated bytes")
    }

    @Test("a segmented download larger than maximumFileSize fails before any range is fetched")
    func segmentedOverMaximumFileSize() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let destination = directory.file("segmented.bin")
        var options = DownloadOptions()
        options.maximumFileSize = 1 << 20

        let download = session.segmentedDownload(with: Request(url: server.url("/bytes/8000000?seed=3")),
                                                 to: destination, segments: 4, options: options)
        var failure: TransferError?
        do { _ = try await download.value } catch { failure = error as? TransferError }

        #expect(failure?.code == .responseTooLarge)
        #expect(!exists(destination))
        #expect(!exists(destination.path + ".part"))
        #expect(server.requests.filter { $0.header("range") != nil }.isEmpty)
    }
}
