import Foundation
import TestSupport
import Testing
import Transfer

/// Issue 12, defect 2: every CURLcode goes through the one table of
/// ct_error.c. Each case makes our own server misbehave on a real loopback
/// socket and checks the class the session reports.
@Suite("Error classes over real sockets", .serialized)
struct ErrorClassTests {
    private func failure(_ path: String, follow: Bool = true) async throws -> TransferError? {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession { $0.maxRedirects = follow ? 5 : 0 }
        defer { session.invalidateAndCancel() }
        do {
            _ = try await session.data(for: Request(url: server.url(path)))
            return nil
        } catch let error as TransferError {
            return error
        }
    }

    @Test("a status line libcurl refuses is a bad response, not an invalid request",
          arguments: ["/malformed/status-word", "/malformed/status-low", "/malformed/http3", "/garbage"])
    func refusedStatusLine(path: String) async throws {
        let error = try await failure(path)
        #expect(error?.code == .badResponse, "\(String(describing: error))")
    }

    @Test("an unparseable Location is a bad response")
    func unparseableLocation() async throws {
        let error = try await failure("/malformed/bad-location")
        #expect(error?.code == .badResponse, "\(String(describing: error))")
    }

    @Test("a header section or line over libcurl's limit is a bad response, not out of memory",
          arguments: ["/malformed/huge-head", "/malformed/huge-line"])
    func hugeHeaders(path: String) async throws {
        let error = try await failure(path)
        #expect(error?.code == .badResponse, "\(String(describing: error))")
        #expect(error?.message.lowercased().contains("out of memory") == false, "\(String(describing: error))")
    }

    @Test("malformed chunked framing is a bad response; a reset inside the body stays truncated")
    func chunkedFraming() async throws {
        let bad = try await failure("/malformed/bad-chunk")
        #expect(bad?.code == .badResponse, "\(String(describing: bad))")
        let reset = try await failure("/reset/100000")
        #expect(reset?.code == .truncatedResponse, "\(String(describing: reset))")
        let short = try await failure("/truncate/100000")
        #expect(short?.code == .truncatedResponse, "\(String(describing: short))")
    }

    @Test("a redirect to another scheme stays a refused redirect")
    func refusedRedirect() async throws {
        let error = try await failure("/redirect-to?url=ftp://127.0.0.1/x")
        #expect(error?.code == .redirectRefused, "\(String(describing: error))")
    }
}
