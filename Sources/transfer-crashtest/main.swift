// transfer-crashtest: a resumable download in its own process, for the
// kill -9 tests (TransferIntegrationTests/DownloadCrashTests). Not installed.
//
//   transfer-crashtest URL DESTINATION [JOURNAL_INTERVAL_BYTES] [SEGMENTS]
//
// Exit 0 and prints "ok" when the file is in place; exit 1 with the error.
import Dispatch
import Foundation
import Transfer

let arguments = CommandLine.arguments
guard arguments.count >= 3, let url = URL(string: arguments[1]) else {
    FileHandle.standardError.write(Data("usage: transfer-crashtest URL DESTINATION [INTERVAL] [SEGMENTS]\n".utf8))
    exit(2)
}
let destination = URL(fileURLWithPath: arguments[2])
let interval = arguments.count > 3 ? Int64(arguments[3]) ?? 0 : 0
let segments = arguments.count > 4 ? Int(arguments[4]) ?? 1 : 1
let options = DownloadOptions(resumable: true, journalIntervalBytes: interval, journalIntervalMilliseconds: 50)

do {
    let session = try SessionManager()
    let done = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var failure: TransferError?  // written before signal(), read after wait()
    if segments > 1 {
        let download = session.segmentedDownload(with: Request(url: url), to: destination, segments: segments,
                                                 options: options, completionHandler: { _, _, error in
            failure = error
            done.signal()
        })
        download.resume()
    } else {
        session.downloadTask(with: Request(url: url), to: destination, options: options, completionHandler: { _, _, error in
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
