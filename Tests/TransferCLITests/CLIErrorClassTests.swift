import Foundation
import Testing
import TestSupport

/// Issue 12, defect 2: the exit codes of docs/CLI.md for responses libcurl
/// refuses, from our own misbehaving server over loopback.
@Suite("transfer command: error classes", .serialized)
struct CLIErrorClassTests {
    @Test("bad status lines, a bad Location, huge headers and bad chunking exit 11",
          arguments: ["/malformed/status-word", "/malformed/status-low", "/malformed/http3", "/garbage",
                      "/malformed/bad-location", "/malformed/huge-head", "/malformed/huge-line",
                      "/malformed/bad-chunk"])
    func malformedResponseExits11(path: String) throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let output = try CLI.run(["get", "-o", directory.file("out.bin").path, server.url(path).absoluteString])
        #expect(output.status == 11, "\(output.stderrText)")
        #expect(output.stderrText.contains("truncated response"), "\(output.stderrText)")
        #expect(!output.stderrText.lowercased().contains("out of memory"), "\(output.stderrText)")
    }
}
