import Foundation
import TestSupport
import Testing

@Suite("transfer --retry")
struct CLIRetryTests {
    @Test("--retry 2 gets a route that fails twice; the server saw three attempts")
    func retryTwoSucceeds() throws {
        let server = try TestServer.start()
        defer { server.stop() }

        // Retry-After: 0 keeps the test free of curl's 1 s backoff.
        let output = try CLI.run(["get", "-s", "--retry", "2", server.url("/flaky/2?key=a&retry-after=0").absoluteString])

        #expect(output.status == 0, "\(output.stderrText)")
        #expect(output.stdoutText == "attempt 3\n")
        #expect(server.hits("a") == 3)
    }

    @Test("--retry 0 makes one attempt and exits 9 on the 503")
    func retryZeroFails() throws {
        let server = try TestServer.start()
        defer { server.stop() }

        let output = try CLI.run(["get", "-s", "--retry", "0", server.url("/flaky/2?key=b&retry-after=0").absoluteString])

        #expect(output.status == 9, "\(output.stderrText)")
        #expect(server.hits("b") == 1)
    }

    @Test("--retry 1 stops after one retry: the second 503 exits 9")
    func retriesRunOut() throws {
        let server = try TestServer.start()
        defer { server.stop() }

        let output = try CLI.run(["get", "-s", "--retry", "1", server.url("/flaky/5?key=c&retry-after=0").absoluteString])

        #expect(output.status == 9, "\(output.stderrText)")
        #expect(server.hits("c") == 2)
    }

    @Test("--retry retries a POST, as curl does, and a reset connection")
    func retriesPostAndReset() throws {
        let server = try TestServer.start()
        defer { server.stop() }

        let output = try CLI.run(["post", "-s", "--retry", "1", "--retry-delay", "0.01", "--data", "x=1",
                                  server.url("/flaky/1?key=d&fail=reset").absoluteString])

        #expect(output.status == 0, "\(output.stderrText)")
        #expect(output.stdoutText == "attempt 2\n")
    }

    @Test("a Retry-After beyond --retry-max-time is not waited for")
    func retryMaxTime() throws {
        let server = try TestServer.start()
        defer { server.stop() }

        let output = try CLI.run(["get", "-s", "--retry", "3", "--retry-max-time", "5",
                                  server.url("/flaky/1?key=e&retry-after=3600").absoluteString])

        #expect(output.status == 9, "\(output.stderrText)")
        #expect(server.hits("e") == 1)
    }

    @Test("bad retry arguments are usage errors", arguments: [
        ["--retry", "-1"], ["--retry-max-time", "5"], ["--retry", "1", "--retry-delay", "-2"],
    ])
    func badArguments(_ flags: [String]) throws {
        let output = try CLI.run(["get", "-s"] + flags + ["http://127.0.0.1:1/"])
        #expect(output.status == 2, "\(output.stderrText)")
    }
}
