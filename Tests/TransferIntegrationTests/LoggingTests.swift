import Foundation
import Logging
import Synchronization
import TestSupport
import Testing

@testable import Transfer

/// One record a ``CapturingLogHandler`` received.
private struct Record: Sendable {
    var level: Logger.Level
    var message: String
    var metadata: Logger.Metadata

    /// Message and metadata as one string, to search for leaked secrets.
    var rendered: String { "\(message) \(metadata.sorted { $0.key < $1.key })" }
}

/// Keeps every record, for tests.
private final class RecordStore: Sendable {
    private let records = Locked<[Record]>([])
    var all: [Record] { records.withLock { $0 } }
    func add(_ record: Record) { records.withLock { $0.append(record) } }
}

private struct CapturingLogHandler: LogHandler {
    let store: RecordStore
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String,
             file: String, function: String, line: UInt)
    {
        store.add(Record(level: level, message: message.description, metadata: metadata ?? [:]))
    }
}

private func logger(_ level: Logger.Level, into store: RecordStore) -> Logger {
    var logger = Logger(label: "transfer.test") { _ in CapturingLogHandler(store: store, logLevel: level) }
    logger.logLevel = level
    return logger
}

private func strings(_ value: Logger.MetadataValue?) -> [String] {
    guard case .array(let items) = value else { return [] }
    return items.map { "\($0)" }
}

@Suite("Logging over real sockets", .serialized)
struct LoggingTests {
    @Test("credentials are redacted in lifecycle records and in libcurl's trace; completion has status and bytes")
    func credentialsAreRedacted() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let proxy = try TestHTTPProxy(credentials: ("alice", "s3cret-proxy"))
        defer { proxy.stop() }
        let store = RecordStore()
        let session = try makeSession {
            $0.logger = logger(.trace, into: store)
            $0.proxy = .through(ProxyConfiguration(.http, host: "127.0.0.1", port: Int(proxy.port)))
            $0.httpAdditionalHeaders = ["Authorization": "Bearer s3cret-auth", "Cookie": "sid=s3cret-cookie"]
        }
        defer { session.invalidateAndCancel() }
        let proxyAuthorization = "Basic " + Data("alice:s3cret-proxy".utf8).base64EncodedString()
        // The route answers each query item as a header: the Set-Cookie value
        // is in the URL, so it is looked for only where headers are shown.
        let url = server.url("/response-headers?Set-Cookie=setcookie-value")

        let (body, response) = try await session.data(
            for: Request(url: url, headers: ["Proxy-Authorization": proxyAuthorization]))

        #expect(response.statusCode == 200)
        #expect(response.headers["Set-Cookie"] == "setcookie-value")
        try await Wait.until("the completion record") {
            store.all.contains { $0.level == .debug && $0.message.hasPrefix("completed 200") }
        }
        let records = store.all
        let leaks = records.filter {
            $0.rendered.contains("s3cret") || $0.rendered.contains(proxyAuthorization.dropFirst(6))
                || $0.rendered.contains("Set-Cookie: setcookie-value")
        }
        #expect(leaks.isEmpty, "\(leaks.map(\.rendered))")

        // Lifecycle: start and completion, at debug.
        let start = try #require(records.first { $0.level == .debug && $0.message.hasPrefix("start GET ") })
        let sent = strings(start.metadata["transfer.request.headers"])
        #expect(sent.contains("Authorization: [redacted]"))
        #expect(sent.contains("Cookie: [redacted]"))
        #expect(sent.contains("Proxy-Authorization: [redacted]"))
        let completion = try #require(records.first { $0.message.hasPrefix("completed 200") })
        #expect(completion.metadata["transfer.status"] == "200")
        #expect(completion.metadata["transfer.bytesReceived"] == "\(body.count)")
        #expect(completion.metadata["transfer.duration"] != nil)
        #expect(strings(completion.metadata["transfer.response.headers"]).contains("Set-Cookie: [redacted]"))

        // libcurl's trace, at trace level: header lines both ways, redacted.
        let trace = records.filter { $0.level == .trace }.map(\.message)
        #expect(trace.contains { $0.hasPrefix("> GET http://127.0.0.1") })
        #expect(trace.contains("> Authorization: [redacted]"))
        #expect(trace.contains("> Cookie: [redacted]"))
        #expect(trace.contains("> Proxy-Authorization: [redacted]"))
        #expect(trace.contains("< Set-Cookie: [redacted]"))
        #expect(trace.contains { $0.hasPrefix("* ") })
    }

    @Test("a failure is logged at error with its code, from the fast path too; nothing below the level is built")
    func failureIsAnErrorRecord() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let store = RecordStore()
        let session = try makeSession { $0.logger = logger(.info, into: store) }
        defer { session.invalidateAndCancel() }
        #expect(!session.observation.tracesCurl && !session.observation.logsDebug)
        // A logger at info keeps data(for:) on the fast path, which logs its own failures.
        #expect(session.usesFastPath)

        _ = try await session.data(for: Request(url: server.url("/bytes/1024")))
        var thrown: TransferError?
        do {
            _ = try await session.data(for: Request(url: server.url("/truncate/4000")))
        } catch {
            thrown = error
        }

        #expect(thrown?.code == .truncatedResponse)
        try await Wait.until("the error record") { !store.all.isEmpty }
        let records = store.all
        #expect(records.count == 1, "\(records.map(\.rendered))")
        let record = try #require(records.first)
        #expect(record.level == .error)
        #expect(record.metadata["transfer.error"] == "truncatedResponse")
        #expect(record.message.contains("truncatedResponse"))
    }

    @Test("redirects are logged at debug with where they go; secret query values are redacted everywhere")
    func redirectIsLogged() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let store = RecordStore()
        let session = try makeSession { $0.logger = logger(.trace, into: store) }
        defer { session.invalidateAndCancel() }

        _ = try await session.data(for: Request(url: server.url("/redirect/1?token=s3cret&page=2")))

        try await Wait.until("the completion record") { store.all.contains { $0.message.hasPrefix("completed") } }
        let messages = store.all.map(\.message)
        let redirect = try #require(messages.first { $0.hasPrefix("redirect 302 ") })
        #expect(redirect.contains("/redirect/1?token=[redacted]&page=2 -> "))
        #expect(redirect.contains("/redirect/0?token=[redacted]&page=2"))
        // Secret query values leave no trace either: request lines, curl's notes.
        #expect(messages.contains("> GET /redirect/1?token=[redacted]&page=2 HTTP/1.1"))
        #expect(!store.all.contains { $0.rendered.contains("s3cret") }, "\(messages)")
    }
}

/// The cost of logging that is off, measured from outside: run under
/// callgrind with `TRANSFER_CALLGRIND_REQUESTS=N` and
/// `TRANSFER_CALLGRIND_LOGGER=none|info`, twice with different N; the
/// difference of the instruction counts over the difference of N is the
/// cost of one request (see the commit that added it for the command).
@Suite("Logging cost probe")
struct LoggingCostProbe {
    static let requests = ProcessInfo.processInfo.environment["TRANSFER_CALLGRIND_REQUESTS"].flatMap { Int($0) }

    @Test("sequential 1 KiB GETs from nginx all succeed, with or without a logger at info",
          .enabled(if: requests != nil, "set TRANSFER_CALLGRIND_REQUESTS to run the probe"))
    func sequentialGets() async throws {
        let count = try #require(Self.requests)
        let nginx = try NginxFixture.shared()
        let file = try nginx.ensureFile(size: 1024, seed: 3)
        let withLogger = ProcessInfo.processInfo.environment["TRANSFER_CALLGRIND_LOGGER"] == "info"
        let session = try makeSession {
            if withLogger {
                // A handler that keeps its level (swift-log's no-op one reports .critical).
                $0.logger = logger(.info, into: RecordStore())
            }
        }
        defer { session.invalidateAndCancel() }
        let request = Request(url: nginx.url(.http, file.path))

        var received = 0
        for _ in 0..<count {
            received += try await session.data(for: request).0.count
        }

        #expect(received == count * 1024)
    }
}
