import Foundation
import Synchronization
import Testing
import TestSupport
import Transfer

/// TRANSFER_BENCH=1 adds the clock-based claims (how long the limit held, how fast the rest
/// went after the lift). Without it these tests assert only orderings and outcomes: a limited
/// transfer falls behind an unlimited one started with it, and a lifted one completes.
let benchmarking = ProcessInfo.processInfo.environment["TRANSFER_BENCH"] == "1"

@Suite("Bandwidth limits")
struct DownloadBandwidthTests {
    @Test("a per-task limit holds a transfer behind an unlimited one, and lifting it while running lets it finish")
    func perTask() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let count = 8 << 20
        let lift: Int64 = 768 << 10
        let done = Completion<DownloadOutcome>()
        let task = session.downloadTask(with: Request(url: server.url("/bytes/\(count)?seed=71")),
                                        to: directory.file("limited.bin"), completionHandler: done.handler)
        task.setSpeedLimit(receive: 64 << 10)
        // The reference: 2 MiB without a limit, from the same server and session, started with it.
        let limitedAtReference = Locked<Int64?>(nil)
        let reference = Completion<DownloadOutcome>()
        let free = session.downloadTask(with: Request(url: server.url("/bytes/\(2 << 20)?seed=70")),
                                        to: directory.file("free.bin")) { response, url, error in
            limitedAtReference.withLock { $0 = task.countOfBytesReceived }
            reference.handler(response, url, error)
        }
        let started = Date()
        let atLift = Locked<(Double, Int64)?>(nil)
        task.whenReceived(lift) { task in
            atLift.withLock { $0 = (Date().timeIntervalSince(started), task.countOfBytesReceived) }
            task.setSpeedLimit(receive: 0)
        }
        task.resume()
        free.resume()
        let freeOutcome = try await reference.result()
        let outcome = try await done.result()
        let total = Date().timeIntervalSince(started)

        #expect(freeOutcome.error == nil)
        // The limit held: the unlimited 2 MiB were done while the limited task had less than
        // 768 KiB (64 KiB/s, plus one libcurl read of up to 512 KiB before the bucket pauses it).
        let behind = try #require(limitedAtReference.withLock { $0 })
        print("per-task limit: \(behind) bytes when the unlimited reference finished")
        #expect(behind < lift, "the limited task had \(behind) bytes when the unlimited one finished")
        // Lifted, it finished, intact: 7 MiB more at the old limit would take two minutes.
        #expect(outcome.error == nil)
        let (liftTime, _) = try #require(atLift.withLock { $0 })
        #expect(try FileDigest.sha256(of: directory.file("limited.bin")) == TestServer.sha256(seed: 71, count: count))
        if benchmarking {
            #expect(liftTime > 1.0, "the limit held before it was lifted: \(liftTime) s")
            #expect(total - liftTime < 60, "\(total - liftTime) s after the lift")
        }
    }

    @Test("a session-wide limit holds running transfers behind an unlimited one and can be lifted while they run")
    func sessionWide() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        // The reference runs in a session of its own, which the limit does not cover.
        let other = try SessionManager()
        defer { other.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let count = 4 << 20
        let lift: Int64 = 1200 << 10
        session.setTotalSpeedLimit(receive: 96 << 10)
        let started = Date()
        let completions = (0..<2).map { _ in Completion<DownloadOutcome>() }
        let tasks = completions.enumerated().map { index, completion in
            session.downloadTask(with: Request(url: server.url("/bytes/\(count)?seed=\(72 + index)")),
                                 to: directory.file("shared-\(index).bin"), completionHandler: completion.handler)
        }
        let limitedAtReference = Locked<Int64?>(nil)
        let reference = Completion<DownloadOutcome>()
        let free = other.downloadTask(with: Request(url: server.url("/bytes/\(2 << 20)?seed=70")),
                                      to: directory.file("free.bin")) { response, url, error in
            limitedAtReference.withLock { $0 = tasks.reduce(Int64(0)) { $0 + $1.countOfBytesReceived } }
            reference.handler(response, url, error)
        }
        let liftedAt = Locked<Double?>(nil)
        let lifted = Atomic<Bool>(false)
        for task in tasks {
            task.observeProgress(.download, on: .global()) { _ in
                let sum = tasks.reduce(Int64(0)) { $0 + $1.countOfBytesReceived }
                if sum >= lift, !lifted.exchange(true, ordering: .relaxed) {
                    liftedAt.withLock { $0 = Date().timeIntervalSince(started) }
                    session.setTotalSpeedLimit(receive: 0)
                }
            }
            task.resume()
        }
        free.resume()
        #expect(try await reference.result().error == nil)
        for completion in completions { #expect(try await completion.result().error == nil) }
        let total = Date().timeIntervalSince(started)

        // The shared limit held: the unlimited 2 MiB were done while the two limited transfers
        // had less than 1200 KiB together (96 KiB/s, plus up to 512 KiB each before a pause).
        let behind = try #require(limitedAtReference.withLock { $0 })
        print("session-wide limit: \(behind) bytes when the unlimited reference finished")
        #expect(behind < lift, "the limited transfers had \(behind) bytes when the unlimited one finished")
        // Lifted, they finished: the 6.8 MiB left would take over a minute under the limit.
        let liftTime = try #require(liftedAt.withLock { $0 })
        for index in 0..<2 {
            #expect(try FileDigest.sha256(of: directory.file("shared-\(index).bin"))
                == TestServer.sha256(seed: UInt64(72 + index), count: count))
        }
        if benchmarking {
            // 1200 KiB under a shared 96 KiB/s: at least 1.7 s even if each first read overshoots.
            #expect(liftTime > 1.5, "\(liftTime) s")
            #expect(total - liftTime < 40, "\(total - liftTime) s after the lift")
        }
    }
}
