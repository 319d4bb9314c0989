import Foundation
import Testing
import TestSupport

/// Issue 11 item 9 through the command line: `-H` credentials, cookies, proxy
/// credentials and `--user` do not follow a redirect to another origin.
/// (Nothing is refused here: the redirect is followed without them, exit 0.)
@Suite("transfer command: redirects and credentials")
struct CLISecurityRedirectTests {
    @Test("-H Authorization/Cookie/Proxy-Authorization and --user stay behind when a redirect changes port")
    func credentialsStayWithTheFirstOrigin() throws {
        let origin = try TestServer.start()
        defer { origin.stop() }
        let other = try TestServer.start()
        defer { other.stop() }
        let url = origin.url("/redirect-to?url=\(other.url("/echo").absoluteString)").absoluteString

        let output = try CLI.run(["get", "-H", "Authorization: Bearer top-secret", "-H", "Cookie: sid=s3cret",
                                  "-H", "Proxy-Authorization: Basic cHJveHk6c2VjcmV0", url])
        let withUser = try CLI.run(["get", "--user", "ann:s3cret", url])

        #expect(output.status == 0, "\(output.stderrText)")
        #expect(withUser.status == 0, "\(withUser.stderrText)")
        let hops = other.requests.filter { $0.path == "/echo" }
        #expect(hops.count == 2)
        for hop in hops {
            #expect(hop.header("Authorization") == nil)
            #expect(hop.header("Cookie") == nil)
            #expect(hop.header("Proxy-Authorization") == nil)
        }
        // The first hop did carry them: they were stripped, not lost.
        let first = origin.requests.filter { $0.path == "/redirect-to" }
        #expect(first.first?.header("Cookie") == "sid=s3cret")
        #expect(first.last?.header("Authorization") == "Basic " + Data("ann:s3cret".utf8).base64EncodedString())
    }
}
