// bench-ahc: the common scenarios through AsyncHTTPClient, used the way its
// documentation shows: the async API for bodies in memory or streamed,
// FileDownloadDelegate for downloads to a file.
import AsyncHTTPClient
import BenchCommon
import FoundationEssentials
import Glibc
import NIOCore
import NIOHTTP1
import NIOSSL

#if canImport(Glibc)
    import Glibc
#endif

/// A file read in 1 MiB blocks as ByteBuffers, for a streamed upload body.
struct FileChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let path: String
    static let blockSize = 1 << 20

    struct AsyncIterator: AsyncIteratorProtocol {
        var fd: Int32
        let allocator = ByteBufferAllocator()
        mutating func next() async throws -> ByteBuffer? {
            guard fd >= 0 else { return nil }
            var buffer = allocator.buffer(capacity: FileChunks.blockSize)
            let count = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: FileChunks.blockSize) { raw in
                Swift.max(0, read(fd, raw.baseAddress, FileChunks.blockSize))
            }
            if count == 0 {
                close(fd)
                fd = -1
                return nil
            }
            return buffer
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(fd: open(path, O_RDONLY)) }
}

func makeClient(_ options: Options) -> HTTPClient {
    var tls = TLSConfiguration.makeClientConfiguration()
    if let ca = options.cacert { tls.trustRoots = .file(ca) }
    var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
    configuration.decompression = .disabled
    configuration.timeout = .init(connect: .seconds(30), read: .seconds(600))
    configuration.connectionPool = .init(
        idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: max(8, options.concurrency))
    return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
}

func versionString(_ version: HTTPVersion) -> String {
    version.major == 2 ? "2" : "\(version.major).\(version.minor)"
}

/// GET url, body collected in memory (or counted and dropped when `drop`).
func get(_ client: HTTPClient, _ url: URL, close: Bool, drop: Bool, expected: Int64?, tally: Tally) async throws {
    var request = HTTPClientRequest(url: url.absoluteString)
    if close { request.headers.add(name: "Connection", value: "close") }
    let response = try await client.execute(request, timeout: .seconds(600))
    var bytes: Int64 = 0
    if drop {
        for try await chunk in response.body { bytes += Int64(chunk.readableBytes) }
    } else {
        let body = try await response.body.collect(upTo: 1 << 30)
        bytes = Int64(body.readableBytes)
    }
    tally.record(status: Int(response.status.code), bytes: bytes, expected: expected,
                 httpVersion: versionString(response.version))
}

/// GET url with FileDownloadDelegate straight to `path`.
func download(_ client: HTTPClient, _ url: URL, to path: String, expected: Int64?, tally: Tally) async throws {
    let delegate = try FileDownloadDelegate(path: path)
    let request = try HTTPClient.Request(url: url.absoluteString)
    let progress = try await client.execute(request: request, delegate: delegate).futureResult.get()
    let onDisk = fileSize(path)
    let status = Int(progress.head.status.code)
    tally.record(status: status, bytes: onDisk == Int64(progress.receivedBytes) ? onDisk : -1,
                 expected: expected ?? Int64(progress.totalBytes ?? progress.receivedBytes),
                 httpVersion: versionString(progress.head.version))
}

await benchMain(client: "ahc") { options in
    if options.pin != nil {
        return unsupported(client: "ahc", options: options, why: "no public-key pinning API")
    }
    if options.scenario == .segmented {
        return unsupported(client: "ahc", options: options, why: "no segmented downloads")
    }
    if options.scenario == .soak {
        return unsupported(client: "ahc", options: options, why: "the soak measures the Transfer library only")
    }
    if options.checkOnly { return 0 }
    let client = makeClient(options)
    let tally = Tally()
    var extra: [String: Any] = [:]
    let start = monotonicSeconds()
    switch options.scenario {
    case .download:
        let path = try options.requireOutput()
        do { try await download(client, try options.target, to: path, expected: options.expectBytes, tally: tally) } catch {
            tally.fail(error)
        }
    case .downloadDiscard:
        do { try await get(client, try options.target, close: false, drop: true, expected: options.expectBytes, tally: tally) } catch {
            tally.fail(error)
        }
    case .many, .tlsConnections:
        let url = try options.target
        let close = options.scenario == .tlsConnections
        if let rate = options.rate {
            // Open loop: latency from when each request was due.
            let latencies = Latencies()
            await forEachAtRate(count: options.count, rate: rate, maxOutstanding: options.maxOutstanding,
                                tally: tally, latencies: latencies) { _ in
                try await get(client, url, close: close, drop: false, expected: options.expectBytes, tally: tally)
            }
            extra = latencies.fields
        } else {
            await forEachBounded(count: options.count, concurrency: options.concurrency, tally: tally) { _ in
                try await get(client, url, close: close, drop: false, expected: options.expectBytes, tally: tally)
            }
        }
    case .upload:
        let input = try options.requireInput()
        var request = HTTPClientRequest(url: try options.target.absoluteString)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/octet-stream")
        let size = fileSize(input)
        request.body = .stream(FileChunks(path: input), length: .known(size))
        do {
            let response = try await client.execute(request, timeout: .seconds(600))
            _ = try await response.body.collect(upTo: 1 << 20)
            tally.record(status: Int(response.status.code), bytes: size, expected: nil,
                         httpVersion: versionString(response.version))
        } catch {
            tally.fail(error)
        }
    case .parallelDownloads:
        let urls = options.urls
        await forEachBounded(count: urls.count, concurrency: options.concurrency, tally: tally) { index in
            try await download(client, urls[index], to: try options.outputPath(index: index),
                               expected: options.expectBytes, tally: tally)
        }
    case .segmented, .soak:
        break
    }
    let wall = monotonicSeconds() - start
    try await client.shutdown()
    return report(client: "ahc", options: options, wall: wall, tally: tally, extra: extra)
}
