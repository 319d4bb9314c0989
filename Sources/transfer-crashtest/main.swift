// transfer-crashtest: a resumable download in its own process, for the
// kill -9 tests (TransferIntegrationTests/DownloadCrashTests). Not installed.
//
//   transfer-crashtest URL DESTINATION [INTERVAL_BYTES] [SEGMENTS] [KILL_AT_BYTES] [BYTES_PER_SEC]
//
// With KILL_AT_BYTES > 0 the process sends itself SIGKILL once progress
// reaches that count: a kill -9 at a chosen point of the download that does
// not depend on how fast a loaded machine schedules the test. Exit 0 and
// prints "ok" when the file is in place; exit 1 with the error.
//
// With TRANSFER_CRASHTEST_FILL_FDS=1 in the environment the process opens
// descriptors until EMFILE once its session has started, so the download
// finds none left for its socket (the open-file limit tests,
// TransferIntegrationTests/OpenFileLimitTests); the download is then not
// resumable, so that no journal needs a descriptor first.
//
// With TRANSFER_CRASHTEST_PARALLEL=memory:N (or file:N) it instead starts N
// requests of URL at once, with no per-host cap: data tasks into memory, or
// downloads to DESTINATION/I.bin (a folder). It prints "ok N" once all
// succeeded, else the first error, exit 1 (the descriptor budget tests,
// TransferIntegrationTests/OpenFileLimitTests).
import Dispatch
import Foundation
import Transfer

/// Runs `count` requests of `url` at once; exits 0 when all succeeded.
func runParallel(_ mode: Substring, count: Int, url: URL, folder: URL) -> Never {
    do {
        var configuration = SessionConfiguration.default
        configuration.maxConnectionsPerHost = 0
        let session = try SessionManager(configuration: configuration)
        let group = DispatchGroup()
        let failures = Locked<[String]>([])
        for index in 0..<count {
            group.enter()
            if mode == "file" {
                session.downloadTask(with: Request(url: url), to: folder.appendingPathComponent("\(index).bin"),
                                     completionHandler: { _, _, error in
                                         if let error { failures.withLock { $0.append("\(error)") } }
                                         group.leave()
                                     }).resume()
            } else {
                session.dataTask(with: Request(url: url)) { _, _, error in
                    if let error { failures.withLock { $0.append("\(error)") } }
                    group.leave()
                }.resume()
            }
        }
        group.wait()
        let failed = failures.withLock { $0 }
        if let first = failed.first {
            print("error: \(failed.count) of \(count) failed, the first: \(first)")
            exit(1)
        }
        print("ok \(count)")
        exit(0)
    } catch {
        print("error: \(error)")
        exit(1)
    }
}

/// A value behind a lock, for the completion handlers.
final class Locked<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()
    init(_ value: Value) { self.value = value }
    func withLock<R>(_ body: (inout Value) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}

let arguments = CommandLine.arguments
guard arguments.count >= 3, let url = URL(string: arguments[1]) else {
    FileHandle.standardError.write(Data("usage: transfer-crashtest URL DESTINATION [INTERVAL] [SEGMENTS] [KILL_AT] [RATE]\n".utf8))
    exit(2)
}
func argument(_ index: Int) -> Int64 { arguments.count > index ? Int64(arguments[index]) ?? 0 : 0 }
let destination = URL(fileURLWithPath: arguments[2])
if let parallel = ProcessInfo.processInfo.environment["TRANSFER_CRASHTEST_PARALLEL"] {
    let parts = parallel.split(separator: ":")
    guard parts.count == 2, parts[0] == "memory" || parts[0] == "file", let count = Int(parts[1]), count > 0 else {
        FileHandle.standardError.write(Data("TRANSFER_CRASHTEST_PARALLEL: memory:N or file:N\n".utf8))
        exit(2)
    }
    runParallel(parts[0], count: count, url: url, folder: destination)
}
let segments = max(1, Int(argument(4)))
let killAt = argument(5)
let fillDescriptors = ProcessInfo.processInfo.environment["TRANSFER_CRASHTEST_FILL_FDS"] == "1"
let options = DownloadOptions(resumable: !fillDescriptors, speedLimit: argument(6), journalIntervalBytes: argument(3),
                              journalIntervalMilliseconds: 50)
let progress: @Sendable (TransferProgress) -> Void = { progress in
    if killAt > 0 && progress.completedUnitCount >= killAt { kill(getpid(), SIGKILL) }
}

do {
    let session = try SessionManager()
    if fillDescriptors {
        // Kept open until exit: every descriptor the limit allows is taken.
        while open("/dev/null", O_RDONLY | O_CLOEXEC) >= 0 {}
    }
    let done = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var failure: TransferError?  // written before signal(), read after wait()
    if segments > 1 {
        let download = session.segmentedDownload(with: Request(url: url), to: destination, segments: segments,
                                                 options: options, progress: progress,
                                                 completionHandler: { _, _, error in
                                                     failure = error
                                                     done.signal()
                                                 })
        download.resume()
    } else {
        session.downloadTask(with: Request(url: url), to: destination, options: options, progress: progress,
                             completionHandler: { _, _, error in
                                 failure = error
                                 done.signal()
                             }).resume()
    }
    done.wait()
    if let failure {
        print("error: \(failure)")
        exit(1)
    }
    print("ok")
    exit(0)
} catch {
    print("error: \(error)")
    exit(1)
}
