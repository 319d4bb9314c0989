import Foundation
import Testing
import TestSupport

/// Issue 30, item 2: under a low open-file limit, `--parallel` runs wait for a descriptor
/// instead of failing, and a transfer that still finds none exits 16 (too many open files)
/// naming the limit, never 4 (cannot connect). The limit is lowered in the child only:
/// `sh -c 'ulimit -n N && exec transfer …'`.
@Suite("transfer command: open-file limit", .serialized)
struct CLIOpenFileLimitTests {
    /// Runs `transfer arguments…` with the soft and hard open-file limit at `limit`.
    private func runLimited(_ limit: Int, _ arguments: [String]) throws -> Command.Output {
        // LeakSanitizer's exit-time scan needs descriptors the limit leaves
        // none of (it then fails the run itself): off in these children only.
        try Command.run("/bin/sh", ["-c", "ulimit -n \(limit) && ASAN_OPTIONS=detect_leaks=0 exec \"$0\" \"$@\"",
                                    try CLI.binary()] + arguments,
                        timeout: .seconds(Self.underSanitizer ? 600 : 120))
    }

    /// Under a sanitizer the command runs 5-20x slower and its runtime keeps
    /// descriptors of its own: fewer URLs, still far more than the budget.
    private static let underSanitizer = ProcessInfo.processInfo.environment["TRANSFER_TEST_SANITIZER"] != nil
    private static let urlCount = underSanitizer ? 40 : 200

    @Test("--parallel 200 under ulimit -n 64 downloads all 200 files: the rest wait for a descriptor")
    func parallelWithinTheLimit() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let output = directory.file("out")
        try FileManager.default.createDirectory(at: output, withIntermediateDirectories: false)
        // Distinct sizes give distinct names (-O takes the last path segment).
        let urls = (0..<Self.urlCount).map { server.url("/bytes/\(1000 + $0)?seed=\($0)").absoluteString }
        let list = directory.file("urls.txt")
        try Data(urls.joined(separator: "\n").utf8).write(to: list)

        let result = try runLimited(64, ["get", "--parallel", "\(Self.urlCount)", "--url-file", list.path,
                                         "--output-dir", output.path, "-O", "-s"])

        #expect(result.status == 0, "\(result.stderrText)")
        #expect(!result.stderrText.contains("cannot connect"), "\(result.stderrText)")
        #expect(CLI.listing(output.path).count == Self.urlCount)
        for index in [0, Self.urlCount / 2, Self.urlCount - 1] {
            let file = output.appendingPathComponent("\(1000 + index)")
            #expect(try FileDigest.sha256(of: file) == TestServer.sha256(seed: UInt64(index), count: 1000 + index))
        }
    }

    @Test("a limit too low for even one socket exits 16 naming the limit, never 4",
          .disabled(if: underSanitizer, "a sanitizer's runtime needs descriptors the limit leaves none of"))
    func noDescriptorForTheSocket() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let url = server.url("/bytes/100?seed=1").absoluteString
        // The descriptors the command needs before its socket depend on the runtime (and on
        // sanitizers): raise the limit one at a time until the transfer succeeds. The run just
        // below that is the one whose socket() found no descriptor.
        var runs: [(limit: Int, output: Command.Output)] = []
        for limit in 6...96 {
            let output = try runLimited(limit, ["get", "--discard", url])
            runs.append((limit, output))
            if output.status == 0 { break }
        }

        let succeeded = try #require(runs.last, "no run")
        #expect(succeeded.output.status == 0, "no limit up to 96 let one transfer through")
        let edge = try #require(runs.dropLast().last, "the first limit tried already succeeded")
        #expect(edge.output.status == 16, "ulimit -n \(edge.limit): \(edge.output.stderrText)")
        #expect(edge.output.stderrText.contains("too many open files: cannot open a socket"), "\(edge.output.stderrText)")
        #expect(edge.output.stderrText.contains("all \(edge.limit) descriptors"), "\(edge.output.stderrText)")
        #expect(edge.output.stderrText.contains("RLIMIT_NOFILE"), "\(edge.output.stderrText)")
        // Below the edge: the engine cannot start, or the runtime itself cannot (a signal, or
        // the loader's exit 127); never a connect failure or an internal error.
        for run in runs.dropLast() where run.output.status < 127 {
            #expect(run.output.status == 16, "ulimit -n \(run.limit): \(run.output.stderrText)")
        }
    }
}
