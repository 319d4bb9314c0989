import Foundation
import Synchronization
import Testing
import TestSupport
import Transfer

@Suite("Bandwidth limits")
struct DownloadBandwidthTests {
    @Test("a per-task limit holds, and lifting it while running lets the task finish at full speed")
    func perTask() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        // A low limit, so that "much faster than the old limit" holds even on a loaded machine.
        let count = 8 << 20
        let done = Completion<DownloadOutcome>()
        let task = session.downloadTask(with: Request(url: server.url("/bytes/\(count)?seed=71")),
                                        to: directory.file("limited.bin"), completionHandler: done.handler)
        task.setSpeedLimit(receive: 64 << 10)
        let started = Date()
        let atLift = Locked<(Double, Int64)?>(nil)
        task.whenReceived(600 << 10) { task in
            atLift.withLock { $0 = (Date().timeIntervalSince(started), task.countOfBytesReceived) }
            task.setSpeedLimit(receive: 0)
        }
        task.resume()
        let outcome = try await done.result()
        let total = Date().timeIntervalSince(started)

        #expect(outcome.error == nil)
        let (liftTime, _) = try #require(atLift.withLock { $0 })
        // 600 KiB at 64 KiB/s; one libcurl read (512 KiB) may pass before the bucket pauses the transfer.
        #expect(liftTime > 1.0, "the limit held before it was lifted: \(liftTime) s")
        // The remaining 7.4 MiB would take two minutes at the old limit.
        // Under a sanitizer the test server itself is too slow for an upper bound to mean anything.
        if !underSanitizer { #expect(total - liftTime < 60, "\(total - liftTime) s after the lift") }
        #expect(try FileDigest.sha256(of: directory.file("limited.bin")) == TestServer.sha256(seed: 71, count: count))
    }

    @Test("a session-wide limit is shared by running transfers and can be changed while they run")
    func sessionWide() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let count = 4 << 20
        session.setTotalSpeedLimit(receive: 96 << 10)
        let started = Date()
        let completions = (0..<2).map { _ in Completion<DownloadOutcome>() }
        let tasks = completions.enumerated().map { index, completion in
            session.downloadTask(with: Request(url: server.url("/bytes/\(count)?seed=\(72 + index)")),
                                 to: directory.file("shared-\(index).bin"), completionHandler: completion.handler)
        }
        let liftedAt = Locked<Double?>(nil)
        let lifted = Atomic<Bool>(false)
        for task in tasks {
            task.observeProgress(.download, on: .global()) { _ in
                let sum = tasks.reduce(Int64(0)) { $0 + $1.countOfBytesReceived }
                if sum >= 1200 << 10, !lifted.exchange(true, ordering: .relaxed) {
                    liftedAt.withLock { $0 = Date().timeIntervalSince(started) }
                    session.setTotalSpeedLimit(receive: 0)
                }
            }
            task.resume()
        }
        for completion in completions { #expect(try await completion.result().error == nil) }
        let total = Date().timeIntervalSince(started)

        let lift = try #require(liftedAt.withLock { $0 })
        // 1200 KiB under a shared 96 KiB/s: at least 1.7 s even if each transfer's first libcurl
        // read (up to 512 KiB) overshoots, about 12 s when reads are small ...
        #expect(lift > 1.5, "\(lift) s")
        // ... and the 6.8 MiB left would take over a minute under it.
        if !underSanitizer { #expect(total - lift < 40, "\(total - lift) s after the lift") }
        for index in 0..<2 {
            #expect(try FileDigest.sha256(of: directory.file("shared-\(index).bin"))
                == TestServer.sha256(seed: UInt64(72 + index), count: count))
        }
    }
}
