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
        #expect(try await resetAfterBodyBytes()?.code == .truncatedResponse)
        let short = try await failure("/truncate/100000")
        #expect(short?.code == .truncatedResponse, "\(String(describing: short))")
    }

    /// A reset once the client has read part of the body. The reset waits at a
    /// gate until the task reports body bytes: a reset purges what the client
    /// has not read, so without the gate a slow client (a sanitizer run) could
    /// see the reset before any body byte, which is a transport failure.
    private func resetAfterBodyBytes() async throws -> TransferError? {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession { $0.maxRedirects = 5 }
        defer { session.invalidateAndCancel() }
        let received = Locked(Int64(0))
        let done = Locked<(finished: Bool, error: TransferError?)>((false, nil))
        let task = session.dataTask(
            with: Request(url: server.url("/reset/100000?after=50000&gate=rst")),
            downloadProgress: { progress in received.withLock { $0 = progress.completedUnitCount } },
            completionHandler: { _, _, error in done.withLock { $0 = (true, error) } })
        task.resume()
        try await Wait.until("body bytes at the client", timeout: .seconds(30)) {
            received.withLock { $0 } > 0 && server.heldAtGate("rst") == 1
        }
        server.openGate("rst")
        try await Wait.until("the task to fail", timeout: .seconds(30)) { done.withLock { $0.finished } }
        return done.withLock { $0.error }
    }

    @Test("a redirect to another scheme stays a refused redirect")
    func refusedRedirect() async throws {
        let error = try await failure("/redirect-to?url=ftp://127.0.0.1/x")
        #expect(error?.code == .redirectRefused, "\(String(describing: error))")
    }
}
