import Foundation
import TestSupport
import Testing
import Transfer

/// Issue 30 item 5, HTTP/2: a misbehaving h2 server of our own (`Tests/Fixtures/faultserver.py`
/// on Python's `h2` package, TLS with ALPN h2 only). The server prints what it did (which
/// stream on which connection, the GOAWAY, the reset), so each test checks that the fault
/// really happened as well as the outcome. Every session has a total timeout, so a hang ends
/// as a failed expectation.
@Suite("HTTP/2 faults", .serialized)
struct HTTP2FaultTests {
    private let factory: CertificateFactory

    init() throws {
        factory = try CertificateFactory.shared()
    }

    private func server(_ mode: String, _ arguments: [String] = []) throws -> FaultServer {
        try FaultServer(mode: mode, certificateChain: try factory.serverChainFile(for: factory.leaf).path,
                        key: factory.leaf.keyFile.path, arguments: arguments)
    }

    private func session(_ configure: (inout SessionConfiguration) -> Void = { _ in }) throws -> SessionManager {
        try makeSession {
            $0.caFile = factory.root.certificateFile.path
            $0.httpVersion = .http2
            $0.timeoutIntervalForResource = underSanitizer ? 600 : 60
            configure(&$0)
        }
    }

    /// Fetches every path at once; each path's body or error.
    private func fetchAll(_ session: SessionManager, _ server: FaultServer, _ paths: [String])
        async -> [String: Result<Data, TransferError>]
    {
        await withTaskGroup(of: (String, Result<Data, TransferError>).self) { group in
            for path in paths {
                group.addTask {
                    do {
                        let (data, response) = try await session.data(for: Request(url: server.url(path)))
                        guard response.statusCode == 200 else {
                            return (path, .failure(TransferError(.unacceptableStatusCode, "\(response.statusCode)")))
                        }
                        return (path, .success(data))
                    } catch {
                        return (path, .failure(error as? TransferError ?? TransferError(.internalError, "\(error)")))
                    }
                }
            }
            var results: [String: Result<Data, TransferError>] = [:]
            for await (path, result) in group { results[path] = result }
            return results
        }
    }

    private func error(_ result: Result<Data, TransferError>?) -> TransferError? {
        if case .failure(let error) = result { return error }
        return nil
    }

    @Test("GOAWAY with streams in flight: unprocessed ones are retried on a new connection, the processed one fails")
    func goawayWithStreamsInFlight() async throws {
        let server = try server("h2-goaway", ["--wait", "3"])
        defer { server.stop() }
        let session = try session()
        defer { session.invalidateAndCancel() }
        // One request first, so that the three that follow share its connection.
        let (warm, _) = try await session.data(for: Request(url: server.url("/warm")))
        #expect(warm == FaultServer.body(for: "/warm"))

        let paths = ["/g1", "/g2", "/g3"]
        let results = await fetchAll(session, server, paths)

        let goaway = try #require(server.events.first { $0.hasPrefix("GOAWAY") }, "\(server.output)")
        // "GOAWAY last_stream_id=N with K streams in flight: /gA /gB /gC", lowest stream first.
        let inFlight = goaway.split(separator: ":").last.map { $0.split(separator: " ").map(String.init) } ?? []
        #expect(inFlight.count == 3, "\(goaway)")
        let processed = try #require(inFlight.first)
        let failed = error(results[processed])
        #expect(failed?.code == .truncatedResponse, "\(processed): \(String(describing: failed))")
        for path in inFlight.dropFirst() {
            #expect(try results[path]?.get() == FaultServer.body(for: path),
                    "\(path): \(String(describing: results[path]))")
            let retried = server.events.contains {
                $0.hasPrefix("stream ") && $0.contains(" \(path) on connection ")
                    && !$0.hasSuffix(" on connection 1")
            }
            #expect(retried, "\(path) was not retried on a new connection: \(server.events)")
        }
    }

    @Test("RST_STREAM on one stream fails that request only; the others on the connection complete")
    func resetOneStream() async throws {
        let server = try server("h2-rst")
        defer { server.stop() }
        let session = try session()
        defer { session.invalidateAndCancel() }
        _ = try await session.data(for: Request(url: server.url("/warm")))

        // /rst downloads to a file; the server resets it once some of its body arrived.
        let directory = try TemporaryDirectory()
        let destination = directory.file("rst.bin")
        let done = Completion<DownloadOutcome>()
        let task = session.downloadTask(with: Request(url: server.url("/rst")), to: destination, resumable: false,
                                        completionHandler: done.handler)
        task.whenReceived(1) { _ in server.openGate() }
        task.resume()
        let paths = ["/a", "/b", "/c"]
        let results = await fetchAll(session, server, paths)
        let failed = try await done.result().error

        #expect(server.events.contains { $0.hasPrefix("reset stream") }, "\(server.output)")
        #expect(failed?.code == .truncatedResponse, "\(String(describing: failed))")
        #expect(!FileManager.default.fileExists(atPath: destination.path))
        #expect(!FileManager.default.fileExists(atPath: destination.path + ".part"))
        for path in paths {
            #expect(try results[path]?.get() == FaultServer.body(for: path),
                    "\(path): \(String(describing: results[path]))")
        }
        // All on the one connection: the reset did not take the others down.
        #expect(!server.events.contains("connection 2"), "\(server.events)")
    }

    @Test("a SETTINGS flood is refused by nghttp2's flood guard: transport, named, no hang")
    func settingsFlood() async throws {
        let server = try server("h2-settings-flood")
        defer { server.stop() }
        let session = try session()
        defer { session.invalidateAndCancel() }

        let results = await fetchAll(session, server, ["/flood"])

        // The server notes the flood after writing it, which may be after the
        // client already gave up: wait for the note, do not race it.
        try await Wait.until("the server's note of the flood", timeout: .seconds(10)) {
            server.events.contains { $0.contains("SETTINGS frames") }
        }
        let failed = error(results["/flood"])
        #expect(failed?.code == .transport, "\(String(describing: results["/flood"]))")
        #expect(failed?.message.lowercased().contains("flood") == true, "\(String(describing: failed))")
    }

    @Test("a peer that never grants flow-control window for a request body: the idle timeout fires, timedOut")
    func noFlowControlWindow() async throws {
        let server = try server("h2-no-window")
        defer { server.stop() }
        let session = try session { $0.timeoutIntervalForRequest = 1 }
        defer { session.invalidateAndCancel() }
        var request = Request(url: server.url("/upload"))
        request.method = .post
        request.body = .data(Data(repeating: 7, count: 256 * 1024))  // 4 × the window the server grants

        let outcome: TransferError?
        do {
            _ = try await session.data(for: request)
            outcome = nil
        } catch {
            outcome = error
        }

        #expect(server.events.contains { $0.contains("/upload") }, "\(server.output)")
        #expect(outcome?.code == .timedOut, "\(String(describing: outcome))")
        #expect(outcome?.message.contains("idle timeout") == true, "\(String(describing: outcome))")
    }

    @Test("max_concurrent_streams of 1 with 64 requests queued: every one completes")
    func oneStreamAtATime() async throws {
        let server = try server("h2-one-stream")
        defer { server.stop() }
        let session = try session()
        defer { session.invalidateAndCancel() }
        let count = underSanitizer ? 16 : 64
        let paths = (0..<count).map { "/q/\($0)" }

        let results = await fetchAll(session, server, paths)

        for path in paths {
            #expect(try results[path]?.get() == FaultServer.body(for: path),
                    "\(path): \(String(describing: results[path]))")
        }
    }
}
