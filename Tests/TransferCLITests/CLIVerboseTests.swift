import Foundation
import Testing
import TestSupport

@Suite("transfer command: -v")
struct CLIVerboseTests {
    @Test("-v describes the request, the response head and the result on stderr, with Set-Cookie redacted")
    func verboseDescribesTheTransfer() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let url = server.url("/response-headers?Set-Cookie=s3cret-cookie&X-Note=visible").absoluteString

        let output = try CLI.run(["get", "-v", "--progress", "none", url])

        #expect(output.status == 0, "\(output.stderrText)")
        let lines = output.stderrText.split(separator: "\n").map(String.init)
        #expect(lines.first == "* GET \(url)")
        #expect(lines.contains { $0.hasPrefix("< HTTP/1.1 200 ") })
        #expect(lines.contains("< X-Note: visible"))
        #expect(lines.contains("< Set-Cookie: [redacted]"))
        #expect(!lines.contains { $0.hasPrefix("< Set-Cookie: s3cret") })
        #expect(lines.contains { $0.hasPrefix("* \(url): 17 bytes in ") })
    }

    @Test("without -v nothing describes the transfer")
    func quietWithoutVerbose() throws {
        let server = try TestServer.start()
        defer { server.stop() }

        let output = try CLI.run(["get", "--progress", "none", server.url("/bytes/10").absoluteString])

        #expect(output.status == 0, "\(output.stderrText)")
        #expect(!output.stderrText.contains("* GET"))
        #expect(!output.stderrText.contains("< HTTP/"))
    }
}
