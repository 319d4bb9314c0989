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
