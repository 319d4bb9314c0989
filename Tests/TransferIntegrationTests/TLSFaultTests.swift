import Foundation
import TestSupport
import Testing
import Transfer

/// Issue 30 item 5, TLS: faults inside the TLS layer from a server of our own
/// (`Tests/Fixtures/faultserver.py` over memory BIOs, so each record is ours to cut).
/// Every session has a total timeout, so a hang ends as a failed expectation, never as a
/// stuck suite; no assertion is on elapsed time.
@Suite("TLS faults", .serialized)
struct TLSFaultTests {
    private let factory: CertificateFactory

    init() throws {
        factory = try CertificateFactory.shared()
    }

    private func server(_ mode: String) throws -> FaultServer {
        try FaultServer(mode: mode, certificateChain: try factory.serverChainFile(for: factory.leaf).path,
                        key: factory.leaf.keyFile.path)
    }

    private func session(caFile: String? = nil, _ configure: (inout SessionConfiguration) -> Void = { _ in })
        throws -> SessionManager
    {
        try makeSession {
            $0.caFile = caFile ?? factory.root.certificateFile.path
            $0.timeoutIntervalForResource = underSanitizer ? 600 : 60
            configure(&$0)
        }
    }

    /// Downloads `url` to `destination`; the error, or nil on success.
    private func downloadFailure(_ session: SessionManager, _ url: URL, to destination: URL) async -> TransferError? {
        do {
            _ = try await session.download(for: Request(url: url), to: destination)
            return nil
        } catch {
            return error
        }
    }

    private func exists(_ url: URL) -> Bool { FileManager.default.fileExists(atPath: url.path) }

    @Test("a reset in the middle of a TLS record is a truncated body; nothing is left under the name")
    func resetInsideRecord() async throws {
        let server = try server("tls-reset-record")
        defer { server.stop() }
        let session = try session()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let destination = directory.file("cut.bin")

        // The server cuts the record once some body arrived: a reset throws away what
        // the client has not read yet, which would turn this into a failure before the head.
        let done = Completion<DownloadOutcome>()
        let task = session.downloadTask(with: Request(url: server.url("/cut")), to: destination, resumable: false,
                                        completionHandler: done.handler)
        task.whenReceived(1) { _ in server.openGate() }
        task.resume()
        let error = try await done.result().error

        #expect(server.events.contains { $0.hasPrefix("reset inside") }, "\(server.output)")
        #expect(error?.code == .truncatedResponse, "\(String(describing: error))")
        #expect(!exists(destination))
        #expect(!exists(URL(fileURLWithPath: destination.path + ".part")))
    }

    /// curl 7.88 (the reference, and the libcurl underneath) reads an EOF without
    /// close_notify as the end of a close-delimited body: `curl` exits 0 against this very
    /// server. libcurl maps OpenSSL's "unexpected eof while reading" to a clean end of
    /// stream in its own read path, below the SSL_CTX hook, so the engine cannot tell the
    /// two closes apart. Documented in docs/FAILURE-MODES.md: a body without length or
    /// chunking over TLS can be cut by a forged FIN; a body with a length cannot.
    @Test("no close_notify: a close-delimited body completes as curl's does; a body with a length is truncated")
    func closeWithoutCloseNotify() async throws {
        let cut = try server("tls-no-notify")
        defer { cut.stop() }
        let clean = try server("tls-clean-close")
        defer { clean.stop() }
        let session = try session()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let expected = FileDigest.sha256(FaultServer.body(for: "/body", size: 50_000))

        // Ended by close_notify: a complete body.
        let (file, response) = try await session.download(for: Request(url: clean.url("/body")),
                                                          to: directory.file("clean.bin"))
        #expect(response.statusCode == 200)
        #expect(try FileDigest.sha256(of: file) == expected)

        // Ended by a bare TCP close: the same bytes, reported complete (curl's behaviour).
        let (cutFile, _) = try await session.download(for: Request(url: cut.url("/body")),
                                                      to: directory.file("cut.bin"))
        #expect(cut.events.contains("closed without close_notify"), "\(cut.output)")
        #expect(try FileDigest.sha256(of: cutFile) == expected)

        // With a Content-Length the same close is a truncated body, and nothing is placed.
        let destination = directory.file("length.bin")
        let error = await downloadFailure(session, cut.url("/length"), to: destination)
        #expect(error?.code == .truncatedResponse, "\(String(describing: error))")
        #expect(!exists(destination))
        #expect(!exists(URL(fileURLWithPath: destination.path + ".part")))
    }

    @Test("a handshake that stalls after ServerHello ends with the connect timeout, timedOut")
    func handshakeStallsAfterServerHello() async throws {
        let server = try server("tls-stall-hello")
        defer { server.stop() }
        let session = try session { $0.connectTimeout = 1 }
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let destination = directory.file("never.bin")

        let error = await downloadFailure(session, server.url("/"), to: destination)

        #expect(server.events.contains { $0.hasPrefix("stalled after ServerHello") }, "\(server.output)")
        #expect(error?.code == .timedOut, "\(String(describing: error))")
        #expect(error?.message.contains("connect timeout") == true, "\(String(describing: error))")
        #expect(!exists(destination))
    }

    /// OpenSSL's default verify depth is 100, so 50 intermediates verify (as `curl --cacert`
    /// does against the same server); a deeper chain would end in tlsFailure. Either way the
    /// handshake is bounded: the chain is about 25 KB, under OpenSSL's 100 KB limit.
    @Test("a chain of 50 intermediates is verified like curl's, in bounded time")
    func fiftyIntermediates() async throws {
        let directory = try TemporaryDirectory()
        let chain = try CertificateFactory.longChain(intermediates: 50, in: directory.url)
        let server = try FaultServer(mode: "tls-ok", certificateChain: chain.chainFile.path, key: chain.keyFile.path)
        defer { server.stop() }
        let session = try session(caFile: chain.rootFile.path)
        defer { session.invalidateAndCancel() }

        let (data, response) = try await session.data(for: Request(url: server.url("/")))

        #expect(response.statusCode == 200)
        #expect(data == Data("ok\n".utf8))
    }
}
