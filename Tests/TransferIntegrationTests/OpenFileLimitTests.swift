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
