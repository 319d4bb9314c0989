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
import Dispatch
import Foundation
import Transfer

let arguments = CommandLine.arguments
guard arguments.count >= 3, let url = URL(string: arguments[1]) else {
    FileHandle.standardError.write(Data("usage: transfer-crashtest URL DESTINATION [INTERVAL] [SEGMENTS] [KILL_AT] [RATE]\n".utf8))
    exit(2)
}
func argument(_ index: Int) -> Int64 { arguments.count > index ? Int64(arguments[index]) ?? 0 : 0 }
let destination = URL(fileURLWithPath: arguments[2])
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
