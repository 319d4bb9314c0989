// bench-urlsession: the common scenarios through URLSession from
// FoundationNetworking, used the way a Swift-on-Linux program would:
// data(for:), download(for:) then a move, upload(for:fromFile:), and a data
// delegate that counts and drops bytes for the discard variant.
//
// FoundationNetworking has no way to trust a private CA on Linux (its
// CA-file variable is read on Android only), so the harness runs this client
// for HTTPS in a private mount namespace where the system bundle is the test CA.
import BenchCommon
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Counts the bytes of data tasks and drops them; completion through a continuation.
final class DropDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {  // state behind `lock`
    private let lock = NSLock()
    private var bytes: Int64 = 0
    private var continuation: CheckedContinuation<(Int64, Int), any Error>?

    func wait(for task: URLSessionDataTask) async throws -> (Int64, Int) {
        try await withCheckedThrowingContinuation { continuation in
            lock.lock()
            self.continuation = continuation
            lock.unlock()
            task.resume()
        }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        lock.lock()
        bytes += Int64(data.count)
        lock.unlock()
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        lock.lock()
        let continuation = self.continuation
        self.continuation = nil
        let total = bytes
        lock.unlock()
        if let error {
            continuation?.resume(throwing: error)
        } else {
            continuation?.resume(returning: (total, (task.response as? HTTPURLResponse)?.statusCode ?? 0))
        }
    }
}

func status(_ response: URLResponse) -> Int { (response as? HTTPURLResponse)?.statusCode ?? 0 }

/// download(for:) to the session's temporary file, then moved to `path`.
func download(_ session: URLSession, _ url: URL, to path: String, expected: Int64?, tally: Tally) async throws {
    let (temporary, response) = try await session.download(for: URLRequest(url: url))
    let destination = URL(fileURLWithPath: path)
    try? FileManager.default.removeItem(at: destination)
    try FileManager.default.moveItem(at: temporary, to: destination)
    tally.record(status: status(response), bytes: fileSize(path), expected: expected)
}

await benchMain(client: "urlsession") { options in
    if options.pin != nil {
        return unsupported(client: "urlsession", options: options, why: "no public-key pinning on Linux")
    }
    if options.scenario == .segmented {
        return unsupported(client: "urlsession", options: options, why: "no segmented downloads")
    }
    if options.scenario == .soak {
        return unsupported(client: "urlsession", options: options, why: "the soak measures the Transfer library only")
    }
    if options.checkOnly { return 0 }
    let configuration = URLSessionConfiguration.default
    configuration.httpMaximumConnectionsPerHost = max(6, options.concurrency)
    configuration.timeoutIntervalForRequest = 600
    configuration.timeoutIntervalForResource = 3600
    configuration.urlCache = nil
    configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
    let dropDelegate = DropDelegate()
    let session = URLSession(configuration: configuration,
                             delegate: options.scenario == .downloadDiscard ? dropDelegate : nil,
                             delegateQueue: nil)
    let tally = Tally()
    let start = monotonicSeconds()
    switch options.scenario {
    case .download:
        do {
            try await download(session, try options.target, to: try options.requireOutput(),
                               expected: options.expectBytes, tally: tally)
        } catch {
            tally.fail(error)
        }
    case .downloadDiscard:
        do {
            let (bytes, code) = try await dropDelegate.wait(for: session.dataTask(with: try options.target))
            tally.record(status: code, bytes: bytes, expected: options.expectBytes)
        } catch {
            tally.fail(error)
        }
    case .many, .tlsConnections:
        var request = URLRequest(url: try options.target)
        if options.scenario == .tlsConnections { request.setValue("close", forHTTPHeaderField: "Connection") }
        let shared = request
        await forEachBounded(count: options.count, concurrency: options.concurrency, tally: tally) { _ in
            let (data, response) = try await session.data(for: shared)
            tally.record(status: status(response), bytes: Int64(data.count), expected: options.expectBytes)
        }
    case .upload:
        let input = try options.requireInput()
        var request = URLRequest(url: try options.target)
        request.httpMethod = "POST"
        request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
        do {
            let (_, response) = try await session.upload(for: request, fromFile: URL(fileURLWithPath: input))
            tally.record(status: status(response), bytes: fileSize(input), expected: nil)
        } catch {
            tally.fail(error)
        }
    case .parallelDownloads:
        let urls = options.urls
        await forEachBounded(count: urls.count, concurrency: options.concurrency, tally: tally) { index in
            try await download(session, urls[index], to: try options.outputPath(index: index),
                               expected: options.expectBytes, tally: tally)
        }
    case .segmented, .soak:
        break
    }
    let wall = monotonicSeconds() - start
    session.invalidateAndCancel()
    return report(client: "urlsession", options: options, wall: wall, tally: tally)
}
