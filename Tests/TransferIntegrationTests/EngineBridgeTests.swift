import CTransfer
import Foundation
import Logging
import TestSupport
import Testing

@testable import Transfer

/// Every C callback of a transfer lands on the one ``EngineTarget`` it was
/// submitted with, through that type's own methods. The trace and redirect
/// callbacks used to cast the context to the task path's private target
/// type, so a fast-path request (another `EngineTarget` subclass) that
/// followed a redirect had a closure read out of its own unrelated fields;
/// these run exactly those requests (CI runs them under ASan too).
@Suite("Engine bridge: one target type for every callback", .serialized)
struct EngineBridgeTests {
    /// A target that records what the engine tells it.
    private final class RecordingTarget: EngineTarget, @unchecked Sendable {
        // @unchecked Sendable: all state behind `seen`.
        struct Seen {
            var redirects: [String] = []
            var requestLines: [String] = []
            var traceLines = 0
            var status: Int?
            var code: ct_code?
        }

        let seen = Locked(Seen())

        override func engineWillFollowRedirect(status: Int, from: UnsafePointer<CChar>,
                                               to location: UnsafePointer<CChar>)
        {
            let hop = "\(status) \(String(cString: from)) -> \(String(cString: location))"
            seen.withLock { $0.redirects.append(hop) }
        }

        override func engineDidTrace(_ kind: TraceLineKind, line: UnsafeRawBufferPointer) {
            let text = String(decoding: line, as: UTF8.self)
            seen.withLock {
                $0.traceLines += 1
                if kind == .headerOut, text.hasPrefix("GET ") { $0.requestLines.append(text) }
            }
        }

        override func engineDidFinish(_ result: EngineResult) {
            result.discardBody()   // the body is the target's to free
            let r = result.pointer.pointee
            seen.withLock {
                $0.status = Int(r.http_status)
                $0.code = r.code
            }
        }
    }

    /// Counts the trace-level records a session's logger receives.
    private struct CountingHandler: LogHandler {
        let count: Locked<Int>
        var logLevel: Logger.Level = .trace
        var metadata: Logger.Metadata = [:]
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String,
                 file: String, function: String, line: UInt)
        {
            if level == .trace { count.withLock { $0 += 1 } }
        }
    }

    @Test("a target's own redirect and trace methods see every hop, with tracing on and off", arguments: [false, true])
    func targetSeesEveryHop(tracing: Bool) async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        let target = RecordingTarget()
        let strings = CStrings()
        var spec = try session.fastSpec(for: Request(url: server.url("/redirect/3")), strings: strings,
                                        discardsBody: false, collectsMetrics: true)
        if tracing { spec.flags.insert(.trace) }

        _ = try session.engine.submit(&spec, target: target).get()

        try await Wait.until("the transfer's finish", timeout: .seconds(30)) {
            target.seen.withLock { $0.code != nil }
        }
        let seen = target.seen.withLock { $0 }
        #expect(seen.code == CT_OK)
        #expect(seen.status == 200)
        #expect(seen.redirects == [
            "302 \(server.url("/redirect/3").absoluteString) -> /redirect/2",
            "302 \(server.url("/redirect/2").absoluteString) -> /redirect/1",
            "302 \(server.url("/redirect/1").absoluteString) -> /redirect/0",
        ])
        if tracing {
            #expect(seen.requestLines == ["GET /redirect/3 HTTP/1.1", "GET /redirect/2 HTTP/1.1",
                                          "GET /redirect/1 HTTP/1.1", "GET /redirect/0 HTTP/1.1"])
        } else {
            #expect(seen.traceLines == 0)
        }
        withExtendedLifetime(strings) {}
    }

    @Test("fast-path, batch and task-path requests follow redirects, with tracing on and off")
    func everyPathFollowsRedirects() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let traced = Locked(0)
        let plain = try makeSession()
        defer { plain.invalidateAndCancel() }
        let tracing = try makeSession {
            var logger = Logger(label: "transfer.test") { _ in CountingHandler(count: traced) }
            logger.logLevel = .trace
            $0.logger = logger
        }
        defer { tracing.invalidateAndCancel() }
        let fastPathOpen = plain.fastPathOpen.load(ordering: .relaxed)
        #expect(fastPathOpen)
        let expected = Data(#"{"redirects":"done"}"#.utf8)

        for session in [plain, tracing] {
            // One request, then a batch, each through three redirects.
            let (body, response) = try await session.data(for: Request(url: server.url("/redirect/3")))
            #expect(response.statusCode == 200)
            #expect(body == expected)
            let batch = await session.data(for: (0..<8).map { Request(url: server.url("/redirect/\($0 % 4)")) })
            for result in batch {
                let (body, response) = try result.get()
                #expect(response.statusCode == 200)
                #expect(body == expected)
            }
        }
        // The tracing session's requests went through libcurl's trace.
        #expect(traced.withLock { $0 } > 0)
    }
}
