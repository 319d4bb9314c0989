import Foundation
import Testing
import TestSupport

/// `--digest`, `-m/--max-time` and `--speed-limit/--speed-time` (issue 15,
/// items 4 and 5), against the test server's Digest endpoint and trickle.
@Suite("CLI authentication and timeouts")
struct CLIAuthTimeoutTests {
    @Test("--digest -u answers the Digest challenge; a wrong password exits 9 after exactly two requests")
    func digest() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let right = server.url("/digest-auth/ann/s3cret?algorithm=SHA-256").absoluteString
        let wrong = server.url("/digest-auth/bob/s3cret").absoluteString

        let ok = try CLI.run(["get", "--digest", "-u", "ann:s3cret", right])
        let refused = try CLI.run(["get", "--digest", "--user", "bob:wrong", wrong])
        let usage = try CLI.run(["get", "--digest", right])

        #expect(ok.status == 0, "\(ok.stderrText)")
        #expect(String(decoding: ok.stdout, as: UTF8.self).contains("\"authenticated\":true"))
        #expect(server.requests.filter { $0.path == "/digest-auth/ann/s3cret" }.count == 2)
        #expect(refused.status == 9, "\(refused.stderrText)")
        #expect(server.requests.filter { $0.path == "/digest-auth/bob/s3cret" }.count == 2)
        #expect(usage.status == 2)
    }

    @Test("--speed-limit/--speed-time abort a trickle with exit 5; -m does too, each naming its timeout")
    func speedTimeAndMaxTime() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let trickle = server.url("/slow?rate=12&size=100").absoluteString

        let slow = try CLI.run(["get", "--speed-limit", "1000", "--speed-time", "1", trickle])
        let total = try CLI.run(["get", "-m", "1", trickle])
        let usage = try CLI.run(["get", "--speed-time", "0", trickle])

        #expect(slow.status == 5, "\(slow.stderrText)")
        #expect(slow.stderrText.contains("speed limit"), "\(slow.stderrText)")
        #expect(total.status == 5, "\(total.stderrText)")
        #expect(total.stderrText.contains("total timeout"), "\(total.stderrText)")
        #expect(usage.status == 2)
    }
}

/// Issue 30 item 1: no number given to a time flag kills the command
/// (`-m 1e300` used to end in SIGILL, exit 132, with no message).
@Suite("CLI time flags: any number, no trap")
struct CLITimeFlagTests {
    @Test("huge time values are no limit; infinity and NaN are usage errors", arguments: [
        ["-m"], ["--connect-timeout"], ["--speed-limit", "1", "--speed-time"], ["--retry", "1", "--retry-delay"],
        ["--retry", "1", "--retry-max-time"],
    ])
    func timeFlags(flag: [String]) throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let url = server.url("/bytes/100?seed=4").absoluteString

        for huge in ["1e300", "9.3e15", "1.7976931348623157e308"] {
            let run = try CLI.run(["get"] + flag + [huge, url])
            #expect(run.status == 0, "\(flag) \(huge): exit \(run.status) \(run.stderrText)")
            #expect(run.stdout == TestServer.bytes(seed: 4, count: 100))
        }
        for bad in ["inf", "nan"] {
            let run = try CLI.run(["get"] + flag + [bad, url])
            #expect(run.status == 2, "\(flag) \(bad): exit \(run.status) \(run.stderrText)")
            let named = flag.last == "-m" ? "--timeout" : flag.last!   // -m's long name
            #expect(run.stderrText.contains(named), "\(run.stderrText)")
        }
    }
}
