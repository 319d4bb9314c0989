import CTransfer
import Foundation
import Testing
import TestSupport

@testable import Transfer

/// Issue 30, item 2: a process out of file descriptors gets its own error, naming the limit,
/// never "cannot connect". The limit is lowered in a child process (transfer-crashtest under
/// `ulimit -n`), never in this one: the tests of this process share its limit.
@Suite("Open-file limit")
struct OpenFileLimitTests {
    // Sanitizer runtimes need descriptors of their own, which the filled table leaves none of.
    @Test("a download that finds no descriptor for its socket fails with tooManyOpenFiles naming the limit",
          .disabled(if: ProcessInfo.processInfo.environment["TRANSFER_TEST_SANITIZER"] != nil,
                    "a sanitizer's runtime needs descriptors the test takes away"))
    func socketWithoutDescriptor() throws {
        guard let helper = DownloadCrashTests.helper else {
            Issue.record("transfer-crashtest not built next to the test runner")
            return
        }
        let server = try TestServer()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let destination = directory.file("limited.bin")
        let before = server.requests.count

        // The helper takes every descriptor under the limit once its session started
        // (TRANSFER_CRASHTEST_FILL_FDS), so the socket() of the download fails with EMFILE.
        let output = try Command.run(
            "/bin/sh", ["-c", "ulimit -n 128 && exec \"$0\" \"$@\"", helper,
                        server.url("/bytes/4096?seed=3").absoluteString, destination.path],
            environment: ["TRANSFER_CRASHTEST_FILL_FDS": "1"], timeout: .seconds(60))

        #expect(output.status == 1, "\(output.stdoutText) \(output.stderrText)")
        #expect(output.stdoutText.contains("TransferError.tooManyOpenFiles:"), "\(output.stdoutText)")
        #expect(output.stdoutText.contains("cannot open a socket"), "\(output.stdoutText)")
        #expect(output.stdoutText.contains("RLIMIT_NOFILE"), "\(output.stdoutText)")
        #expect(output.stdoutText.contains("all 128 descriptors"), "\(output.stdoutText)")
        #expect(!output.stdoutText.contains("Couldn't connect"), "\(output.stdoutText)")
        #expect(server.requests.count == before, "no request can have been sent")
        #expect(!FileManager.default.fileExists(atPath: destination.path))
        #expect(!FileManager.default.fileExists(atPath: destination.path + ".part"))
    }

    @Test("at the budget later downloads wait without a connection, a cancelled one leaves the queue, the rest start")
    func heldDownloadsWaitTheirTurn() async throws {
        let server = try TestServer()
        defer { server.stop() }
        var configuration = SessionConfiguration.default
        configuration.maxTotalConnections = 1   // libcurl's cap: later transfers wait as at the budget
        let session = try SessionManager(configuration: configuration)
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let (first, second, third) = (Completion<DownloadOutcome>(), Completion<DownloadOutcome>(),
                                      Completion<DownloadOutcome>())
        session.downloadTask(with: Request(url: server.url("/hold/100000?gate=budget&after=1000&seed=1")),
                             to: directory.file("a.bin"), completionHandler: first.handler).resume()
        try await Wait.until("the first download holds the one connection", timeout: .seconds(30)) {
            server.heldAtGate("budget") == 1
        }
        let held = session.downloadTask(with: Request(url: server.url("/bytes/2000?seed=2")),
                                        to: directory.file("b.bin"), completionHandler: second.handler)
        held.resume()
        session.downloadTask(with: Request(url: server.url("/bytes/3000?seed=3")),
                             to: directory.file("c.bin"), completionHandler: third.handler).resume()

        held.cancel()
        let cancelled = try await second.result()

        #expect(cancelled.error?.code == .cancelled)
        #expect(!server.requests.contains { $0.path.hasPrefix("/bytes/") }, "a held download reached the server")
        server.openGate("budget")
        let (a, c) = (try await first.result(), try await third.result())
        #expect(a.error == nil && c.error == nil, "\(String(describing: a.error)) \(String(describing: c.error))")
        #expect(try FileDigest.sha256(of: directory.file("c.bin")) == TestServer.sha256(seed: 3, count: 3000))
        #expect(!server.requests.contains { $0.target == "/bytes/2000?seed=2" })
        #expect(!FileManager.default.fileExists(atPath: directory.file("b.bin").path))
    }

    /// The open-file limit of the children below. At 256, with the runtime's own descriptors
    /// (under 40) and the reserve of 16 open, a third or less of what is left stays idle and
    /// the rest, over 130, is for running transfers: more than 256 / 3 memory transfers fit
    /// at once, which three descriptors per transfer (the rule before) did not allow.
    private static let childLimit = 256
    private static let memoryCount = 120

    /// Starts `transfer-crashtest` under `ulimit -n childLimit` in `TRANSFER_CRASHTEST_PARALLEL`
    /// `mode` (memory:N or file:N) on a task of its own; the result is the child's output.
    private func startParallel(_ mode: String, url: URL, folder: URL) throws -> Task<Command.Output, any Error> {
        guard let helper = DownloadCrashTests.helper else {
            throw TestSupportError("transfer-crashtest not built next to the test runner")
        }
        return Task.detached {
            try Command.run(
                "/bin/sh", ["-c", "ulimit -n \(Self.childLimit) && ASAN_OPTIONS=detect_leaks=0 exec \"$0\" \"$@\"",
                            helper, url.absoluteString, folder.path],
                environment: ["TRANSFER_CRASHTEST_PARALLEL": mode], timeout: .seconds(300))
        }
    }

    @Test("memory transfers count one descriptor each: more than limit / 3 run at once and all succeed")
    func memoryTransfersCountOne() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        // Each response sends half its body, then waits at the gate: all of them are running
        // (socket open, request answered) together before any ends.
        let child = try startParallel("memory:\(Self.memoryCount)",
                                      url: server.url("/hold/2000?gate=memory&after=1000&seed=4"),
                                      folder: directory.url)
        defer { server.openGate("memory") }
        let allHeld: Bool
        do {
            try await Wait.until("\(Self.memoryCount) memory transfers at the gate at once", timeout: .seconds(120)) {
                server.heldAtGate("memory") == Self.memoryCount
            }
            allHeld = true
        } catch {
            allHeld = false
        }
        let held = server.heldAtGate("memory")
        server.openGate("memory")
        let output = try await child.value

        #expect(allHeld, "\(held) of \(Self.memoryCount) at the gate at once under ulimit -n \(Self.childLimit)")
        #expect(Self.memoryCount > Self.childLimit / 3)
        #expect(output.status == 0, "\(output.stdoutText) \(output.stderrText)")
        #expect(output.stdoutText.contains("ok \(Self.memoryCount)"), "\(output.stdoutText)")
        #expect(server.requests.filter { $0.path.hasPrefix("/hold/") }.count == Self.memoryCount)
    }

    @Test("downloads count two descriptors each: many at once under a low limit, none fails with EMFILE")
    func downloadsCountTwo() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let count = 200
        // The admitted downloads hold their part file open at the gate (the head arrived, half
        // the body was written); the test lets them go once many are there together.
        let child = try startParallel("file:\(count)", url: server.url("/hold/3000?gate=files&after=1500&seed=5"),
                                      folder: directory.url)
        defer { server.openGate("files") }
        let enough = 40   // fewer than (256 − runtime − 16 − idle) / 2 always fit
        let manyHeld: Bool
        do {
            try await Wait.until("\(enough) downloads at the gate at once", timeout: .seconds(120)) {
                server.heldAtGate("files") >= enough
            }
            manyHeld = true
        } catch {
            manyHeld = false
        }
        let held = server.heldAtGate("files")
        server.openGate("files")
        let output = try await child.value

        #expect(manyHeld, "\(held) downloads at the gate at once")
        #expect(held <= count)
        #expect(output.status == 0, "\(output.stdoutText) \(output.stderrText)")
        #expect(output.stdoutText.contains("ok \(count)"), "\(output.stdoutText)")
        #expect(!output.stdoutText.contains("tooManyOpenFiles"), "\(output.stdoutText)")
        for index in [0, count / 2, count - 1] {
            let file = directory.file("\(index).bin")
            #expect(try FileDigest.sha256(of: file) == TestServer.sha256(seed: 5, count: 3000))
        }
    }

    @Test("the engine's code maps to tooManyOpenFiles, which RetryPolicy does not retry")
    func mappingAndRetry() async throws {
        #expect(Engine.errorCode(for: CT_E_TOO_MANY_OPEN_FILES) == .tooManyOpenFiles)
        #expect(!RetryPolicy.defaultRetryableErrorCodes.contains(.tooManyOpenFiles))
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let url = URL(string: "http://127.0.0.1:1/x")!
        let error = TransferError(.tooManyOpenFiles, "cannot open a socket", url: url)

        let decision = await RetryPolicy().retry(Request(url: url), for: session, dueTo: error, response: nil,
                                                 attempt: 1)

        guard case .doNotRetry = decision else {
            Issue.record("tooManyOpenFiles was retried: \(decision)")
            return
        }
    }
}
