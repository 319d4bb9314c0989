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

    func log(event: LogEvent) {
        // The logger's own metadata (a request id) and the record's, as a handler merges them.
        let merged = self.metadata.merging(event.metadata ?? [:]) { $1 }
        store.add(Record(level: event.level, message: event.message.description, metadata: merged))
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

    @Test("a failure thrown to the caller is logged at debug, never error; a logger at info gets nothing and keeps the fast path")
    func failureIsADebugRecord() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        // At info: no record at all, and data(for:) stays on the fast path.
        let quiet = RecordStore()
        let fast = try makeSession { $0.logger = logger(.info, into: quiet) }
        defer { fast.invalidateAndCancel() }
        #expect(!fast.observation.tracesCurl && !fast.observation.logsDebug)
        #expect(fast.usesFastPath)
        await #expect(throws: TransferError.self) {
            _ = try await fast.data(for: Request(url: server.url("/truncate/4000")))
        }
        #expect(quiet.all.isEmpty, "\(quiet.all.map(\.rendered))")

        // At debug: the failure is a debug record with its code.
        let store = RecordStore()
        let session = try makeSession { $0.logger = logger(.debug, into: store) }
        defer { session.invalidateAndCancel() }
        var thrown: TransferError?
        do {
            _ = try await session.data(for: Request(url: server.url("/truncate/4000")))
        } catch {
            thrown = error
        }
        #expect(thrown?.code == .truncatedResponse)
        try await Wait.until("the failure record") { store.all.contains { $0.metadata["transfer.error"] != nil } }
        let record = try #require(store.all.first { $0.metadata["transfer.error"] != nil })
        #expect(record.level == .debug)
        #expect(record.metadata["transfer.error"] == "truncatedResponse")
        #expect(record.message.contains("truncatedResponse"))
        #expect(!store.all.contains { $0.level >= .warning }, "\(store.all.map(\.rendered))")
    }

    @Test("a request's own logger gets every record of that request, with its request-id metadata; the session's gets none")
    func perRequestLogger() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let sessionStore = RecordStore()
        let session = try makeSession { $0.logger = logger(.debug, into: sessionStore) }
        defer { session.invalidateAndCancel() }
        let requestStore = RecordStore()
        var requestLogger = logger(.trace, into: requestStore)
        requestLogger[metadataKey: "request-id"] = "req-42"

        // A redirect, a success, and the trace: every line of the request.
        var request = Request(url: server.url("/redirect-to?url=/bytes/64"),
                              headers: ["Authorization": "Bearer S3CRET-REQUEST"])
        request.logger = requestLogger
        #expect(request == Request(url: request.url, headers: request.headers), "a logger is not part of equality")
        let (_, response) = try await session.data(for: request)
        #expect(response.statusCode == 200)
        try await Wait.until("the completion record") {
            requestStore.all.contains { $0.message.hasPrefix("completed 200") }
        }
        let records = requestStore.all
        #expect(records.contains { $0.message.hasPrefix("start GET") })
        #expect(records.contains { $0.message.hasPrefix("redirect 302") })
        #expect(records.contains { $0.level == .trace })
        for record in records {
            #expect(record.metadata["request-id"] == "req-42", "\(record.rendered)")
        }
        #expect(leaks(requestStore, ["S3CRET-REQUEST"]).isEmpty, "\(leaks(requestStore, ["S3CRET-REQUEST"]))")
        #expect(sessionStore.all.isEmpty, "\(sessionStore.all.map(\.rendered))")

        // A failure goes to the request's logger too, at debug.
        var failing = Request(url: server.url("/truncate/4000"))
        failing.logger = requestLogger
        await #expect(throws: TransferError.self) { _ = try await session.data(for: failing) }
        try await Wait.until("the failure record") {
            requestStore.all.contains { $0.metadata["transfer.error"] == "truncatedResponse" }
        }
        #expect(requestStore.all.allSatisfy { $0.level < .warning })
        #expect(sessionStore.all.isEmpty)
    }

    @Test("a request logger at info keeps the request on the fast path; one at debug does not")
    func requestLoggerAndFastPath() throws {
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        let store = RecordStore()
        var request = Request(url: URL(string: "http://127.0.0.1:1/")!)
        #expect(session.takesFastPath(request))
        request.logger = logger(.info, into: store)
        #expect(session.takesFastPath(request))
        request.logger = logger(.debug, into: store)
        #expect(!session.takesFastPath(request))
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

// MARK: - Issue 25 item 4: redaction at the point of emission

/// `text` percent-encoded for use as one query value.
private func queryValue(_ text: String) -> String {
    text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
}

/// Records that contain any of `secrets`, rendered.
private func leaks(_ store: RecordStore, _ secrets: [String]) -> [String] {
    store.all.map(\.rendered).filter { text in secrets.contains { text.contains($0) } }
}

extension LoggingTests {
    @Test("error messages are redacted where logged: a refused OAuth callback redirect (hook and engine), a cache miss with a URL password and token")
    func errorMessagesAreRedacted() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let secrets = ["S3CRET-ACCESS", "S3CRET-CODE", "S3CRET-PASSWORD", "S3CRET-TOKEN"]
        let callback = "com.example.app:/cb?accessToken=S3CRET-ACCESS&code=S3CRET-CODE"
        let url = server.url("/redirect-to?url=\(queryValue(callback))")

        for manual in [true, false] {
            let store = RecordStore()
            let session = try makeSession { $0.logger = logger(.trace, into: store) }
            defer { session.invalidateAndCancel() }
            // A redirect hook makes the task follow redirects in Swift (TransferTask.followRedirect).
            if manual { session.hooks.taskWillPerformHTTPRedirection = { _, _, _, request in request } }

            await #expect(throws: TransferError.self) { try await session.data(for: Request(url: url)) }

            try await Wait.until("the error record") { store.all.contains { $0.metadata["transfer.error"] != nil } }
            let error = try #require(store.all.first { $0.metadata["transfer.error"] != nil })
            #expect(error.message.contains("redirect"), "\(error.message)")
            #expect(leaks(store, secrets).isEmpty, "manual \(manual): \(leaks(store, secrets))")
        }

        // The cache's message quotes the URL (ResponseCache+Rules): user info and token.
        let store = RecordStore()
        let cache = try ResponseCache()
        let session = try makeSession {
            $0.logger = logger(.debug, into: store)
            $0.responseCache = cache
        }
        defer { session.invalidateAndCancel() }
        let port = server.url("/").port ?? 0
        let secretURL = try #require(URL(string: "http://alice:S3CRET-PASSWORD@127.0.0.1:\(port)/json?access_token=S3CRET-TOKEN"))
        await #expect(throws: TransferError.self) {
            try await session.data(for: Request(url: secretURL, cachePolicy: .returnCacheDataDontLoad))
        }
        try await Wait.until("the error record") { store.all.contains { $0.metadata["transfer.error"] != nil } }
        #expect(store.all.contains {
            $0.metadata["transfer.error"] != nil && $0.message.contains("access_token=[redacted]")
        })
        #expect(leaks(store, secrets).isEmpty, "\(leaks(store, secrets))")
    }

    @Test("camelCase and OAuth query names are redacted in every record and trace line; other parameters stay")
    func oauthQueryNamesAreRedacted() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let store = RecordStore()
        let session = try makeSession { $0.logger = logger(.trace, into: store) }
        defer { session.invalidateAndCancel() }
        let names = ["accessToken", "refreshToken", "authToken", "code", "state", "id_token", "Refresh-Token",
                     "ACCESS_TOKEN", "clientSecret"]
        let secrets = names.indices.map { "S3CRET\($0)X" }
        let query = zip(names, secrets).map { "\($0)=\($1)" }.joined(separator: "&")

        _ = try await session.data(for: Request(url: server.url("/redirect/1?\(query)&page=2")))

        try await Wait.until("the completion record") { store.all.contains { $0.message.hasPrefix("completed") } }
        #expect(leaks(store, secrets).isEmpty, "\(leaks(store, secrets))")
        let redirect = try #require(store.all.first { $0.message.hasPrefix("redirect 302 ") })
        #expect(redirect.message.contains("accessToken=[redacted]&refreshToken=[redacted]"), "\(redirect.message)")
        #expect(redirect.message.contains("&page=2"))
    }

    @Test("X-Api-Key, X-Auth-Token and other credential-like headers are redacted at debug and trace, both ways")
    func credentialLikeHeadersAreRedacted() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let store = RecordStore()
        let session = try makeSession { $0.logger = logger(.trace, into: store) }
        defer { session.invalidateAndCancel() }
        let secrets = ["S3CRET-API-KEY", "S3CRET-AUTH-TOKEN", "S3CRET-SESSION", "S3CRET-REPLY"]
        let request = Request(url: server.url("/response-headers?X-Refresh-Token=S3CRET-REPLY"),
                              headers: ["X-Api-Key": "S3CRET-API-KEY", "X-Auth-Token": "S3CRET-AUTH-TOKEN",
                                        "X-Session-Id": "S3CRET-SESSION", "X-Trace": "visible"])

        let (_, response) = try await session.data(for: request)

        #expect(response.headers["X-Refresh-Token"] == "S3CRET-REPLY")
        try await Wait.until("the completion record") { store.all.contains { $0.message.hasPrefix("completed") } }
        #expect(leaks(store, secrets).isEmpty, "\(leaks(store, secrets))")
        let trace = store.all.filter { $0.level == .trace }.map(\.message)
        #expect(trace.contains("> X-Api-Key: [redacted]"))
        #expect(trace.contains("> X-Auth-Token: [redacted]"))
        #expect(trace.contains("> X-Trace: visible"))
        #expect(trace.contains("< X-Refresh-Token: [redacted]"))
        let start = try #require(store.all.first { $0.message.hasPrefix("start GET ") })
        #expect(strings(start.metadata["transfer.request.headers"]).contains("X-Api-Key: [redacted]"))
    }

    @Test("a Location trace line loses its user info and secret query values; the redirect record too")
    func locationLinesAreRedacted() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let store = RecordStore()
        let session = try makeSession { $0.logger = logger(.trace, into: store) }
        defer { session.invalidateAndCancel() }
        let port = server.url("/").port ?? 0
        let location = "http://bob:S3CRET-LOCATION-PW@127.0.0.1:\(port)/json?refreshToken=S3CRET-LOCATION-TOKEN#access_token=S3CRET-FRAGMENT"
        let secrets = ["S3CRET-LOCATION-PW", "S3CRET-LOCATION-TOKEN", "S3CRET-FRAGMENT"]

        _ = try await session.data(for: Request(url: server.url("/redirect-to?url=\(queryValue(location))")))

        try await Wait.until("the completion record") { store.all.contains { $0.message.hasPrefix("completed") } }
        #expect(leaks(store, secrets).isEmpty, "\(leaks(store, secrets))")
        let trace = store.all.filter { $0.level == .trace }.map(\.message)
        #expect(trace.contains("< Location: http://[redacted]@127.0.0.1:\(port)/json?refreshToken=[redacted]#access_token=[redacted]"),
                "\(trace.filter { $0.contains("Location") })")
    }

    @Test("header and query names added to the configuration are redacted too")
    func addedNamesAreRedacted() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let store = RecordStore()
        let session = try makeSession {
            $0.logger = logger(.trace, into: store)
            $0.logRedaction.headerNames.insert("X-Tenant")
            $0.logRedaction.queryParameterNames.insert("ticket")
        }
        defer { session.invalidateAndCancel() }
        let secrets = ["S3CRET-TENANT", "S3CRET-TICKET"]

        _ = try await session.data(for: Request(url: server.url("/redirect/1?Ticket=S3CRET-TICKET"),
                                                headers: ["X-Tenant": "S3CRET-TENANT"]))

        try await Wait.until("the completion record") { store.all.contains { $0.message.hasPrefix("completed") } }
        #expect(leaks(store, secrets).isEmpty, "\(leaks(store, secrets))")
        #expect(store.all.contains { $0.message == "> X-Tenant: [redacted]" })
        #expect(store.all.contains { $0.message.contains("Ticket=[redacted]") })
        #expect(session.configuration.logRedaction != LogRedaction.standard)
    }
}
