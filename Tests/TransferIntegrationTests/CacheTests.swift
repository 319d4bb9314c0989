import Foundation
import TestSupport
import Testing

@testable import Transfer

/// The HTTP response cache over real loopback sockets: TestServer's
/// `/cache/NAME` sets the cache fields asked for and answers validators with
/// 304; `server.requests` says what reached it.
@Suite("HTTP cache: RFC 9111 rules, cache policies, will-cache hook, stores")
struct CacheTests {
    /// A `/cache/NAME` URL with the query fields percent-encoded.
    private func url(_ server: TestServer, _ name: String, _ fields: [String: String] = [:]) -> URL {
        let query = fields.sorted { $0.key < $1.key }.map { key, value in
            let encoded = value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? value
            return "\(key)=\(encoded)"
        }.joined(separator: "&")
        return server.url("/cache/\(name)" + (query.isEmpty ? "" : "?" + query))
    }

    /// Requests for `/cache/NAME` the server received.
    private func received(_ server: TestServer, _ name: String) -> [RecordedRequest] {
        server.requests.filter { $0.path == "/cache/\(name)" }
    }

    private func session(_ cache: ResponseCache) throws -> SessionManager {
        var configuration = SessionConfiguration()
        configuration.responseCache = cache
        return try SessionManager(configuration: configuration)
    }

    /// Runs a data task to its end: the completion's values and the task (for its metrics).
    private func fetch(_ session: SessionManager, _ request: Request) async
        -> (data: Data?, response: HTTPResponse?, error: TransferError?, task: DataTask)
    {
        let box = Protected<DataTask?>(nil)
        let (data, response, error) = await withCheckedContinuation { continuation in
            let task = session.dataTask(with: request) { response, data, error in
                continuation.resume(returning: (data, response, error))
            }
            box.withLock { $0 = task }
            task.resume()
        }
        return (data, response, error, box.withLock { $0 }!)
    }

    private func fetch(_ session: SessionManager, _ url: URL) async
        -> (data: Data?, response: HTTPResponse?, error: TransferError?, task: DataTask)
    {
        await fetch(session, Request(url: url))
    }

    // MARK: - Freshness

    @Test("a fresh max-age response is served from the cache: the server sees one request")
    func maxAgeIsServedFromCache() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try session(try ResponseCache())
        defer { session.invalidateAndCancel() }
        let target = url(server, "fresh", ["cc": "max-age=600"])

        let first = await fetch(session, target)
        let second = await fetch(session, target)

        #expect(first.error == nil && second.error == nil)
        #expect(received(server, "fresh").count == 1)
        #expect(second.data == Data("cached fresh".utf8) && second.data == first.data)
        #expect(second.response?.statusCode == 200)
        #expect(first.task.metrics?.resourceFetchType == .networkLoad)
        #expect(second.task.metrics?.resourceFetchType == .localCache)
        // The async API answers from the cache as well.
        let (data, response) = try await session.data(for: Request(url: target))
        #expect(data == Data("cached fresh".utf8) && response.statusCode == 200)
        #expect(received(server, "fresh").count == 1)
    }

    @Test("no-store is never stored: every GET reaches the server")
    func noStoreIsNotStored() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let cache = try ResponseCache()
        let session = try session(cache)
        defer { session.invalidateAndCancel() }
        let target = url(server, "nostore", ["cc": "no-store, max-age=600"])

        _ = try await session.data(for: Request(url: target))
        _ = try await session.data(for: Request(url: target))

        #expect(received(server, "nostore").count == 2)
        #expect(cache.cachedResponse(for: Request(url: target)) == nil)
    }

    @Test("an Expires date in the past makes the entry stale: it is fetched again, unconditionally")
    func pastExpiresIsRefetched() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try session(try ResponseCache())
        defer { session.invalidateAndCancel() }
        let target = url(server, "expired", ["expires": "Thu, 01 Jan 1970 00:00:00 GMT"])

        _ = try await session.data(for: Request(url: target))
        let second = await fetch(session, target)

        let seen = received(server, "expired")
        #expect(seen.count == 2)
        #expect(seen.last?.header("If-None-Match") == nil && seen.last?.header("If-Modified-Since") == nil)
        #expect(second.task.metrics?.resourceFetchType == .networkLoad)
    }

    // MARK: - Revalidation

    @Test("a stale entry with an ETag is revalidated: If-None-Match goes out, the 304 gives 200 and the stored body")
    func etagRevalidation() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try session(try ResponseCache())
        defer { session.invalidateAndCancel() }
        let target = url(server, "etag", ["cc": "no-cache", "etag": "v1"])

        let first = await fetch(session, target)
        let second = await fetch(session, target)

        let seen = received(server, "etag")
        #expect(seen.count == 2)
        #expect(seen.first?.header("If-None-Match") == nil)
        #expect(seen.last?.header("If-None-Match") == "\"v1\"")
        #expect(first.data == Data("cached etag".utf8))
        #expect(second.error == nil && second.response?.statusCode == 200)
        #expect(second.data == Data("cached etag".utf8))
        #expect(second.response?.headers["ETag"] == "\"v1\"")
        #expect(second.task.metrics?.resourceFetchType == .revalidated)
    }

    @Test("a stale entry with Last-Modified is revalidated with If-Modified-Since")
    func lastModifiedRevalidation() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try session(try ResponseCache())
        defer { session.invalidateAndCancel() }
        let target = url(server, "lm", ["cc": "max-age=0", "lm": "1"])

        _ = try await session.data(for: Request(url: target))
        let (data, response) = try await session.data(for: Request(url: target))

        let seen = received(server, "lm")
        #expect(seen.count == 2)
        #expect(seen.last?.header("If-Modified-Since") == TestServer.lastModified)
        #expect(response.statusCode == 200 && data == Data("cached lm".utf8))
    }

    // MARK: - Policies

    @Test("reloadIgnoringLocalCacheData fetches despite a fresh entry, and stores what it got")
    func reloadIgnoresTheCache() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try session(try ResponseCache())
        defer { session.invalidateAndCancel() }
        let target = url(server, "reload", ["cc": "max-age=600"])
        _ = try await session.data(for: Request(url: target))

        _ = try await session.data(for: Request(url: target, cachePolicy: .reloadIgnoringLocalCacheData))
        #expect(received(server, "reload").count == 2)

        _ = try await session.data(for: Request(url: target))
        #expect(received(server, "reload").count == 2)
    }

    @Test("returnCacheDataElseLoad uses a stale entry without asking the server")
    func returnCacheDataElseLoadUsesStaleEntry() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try session(try ResponseCache())
        defer { session.invalidateAndCancel() }
        let target = url(server, "stale", ["expires": "Thu, 01 Jan 1970 00:00:00 GMT"])
        _ = try await session.data(for: Request(url: target))

        let result = await fetch(session, Request(url: target, cachePolicy: .returnCacheDataElseLoad))

        #expect(received(server, "stale").count == 1)
        #expect(result.error == nil && result.data == Data("cached stale".utf8))
        #expect(result.task.metrics?.resourceFetchType == .localCache)
        // With nothing stored it loads.
        let other = url(server, "stale-other")
        _ = try await session.data(for: Request(url: other, cachePolicy: .returnCacheDataElseLoad))
        #expect(received(server, "stale-other").count == 1)
    }

    @Test("returnCacheDataDontLoad with nothing stored fails with resourceUnavailable and sends nothing")
    func returnCacheDataDontLoadWithoutEntryFails() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try session(try ResponseCache())
        defer { session.invalidateAndCancel() }
        let target = url(server, "dontload", ["cc": "max-age=600"])

        await #expect(throws: TransferError.self) {
            try await session.data(for: Request(url: target, cachePolicy: .returnCacheDataDontLoad))
        }
        let result = await fetch(session, Request(url: target, cachePolicy: .returnCacheDataDontLoad))

        #expect(result.error?.code == .resourceUnavailable)
        #expect(received(server, "dontload").isEmpty)
        // Once stored, the same policy is answered from the cache.
        _ = try await session.data(for: Request(url: target))
        let (data, _) = try await session.data(for: Request(url: target, cachePolicy: .returnCacheDataDontLoad))
        #expect(data == Data("cached dontload".utf8) && received(server, "dontload").count == 1)
    }

    @Test("must-revalidate forbids returnCacheDataDontLoad from using a stale entry")
    func mustRevalidateIsHonoured() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try session(try ResponseCache())
        defer { session.invalidateAndCancel() }
        let target = url(server, "mustrevalidate", ["cc": "max-age=0, must-revalidate", "etag": "m"])
        _ = try await session.data(for: Request(url: target))

        let result = await fetch(session, Request(url: target, cachePolicy: .returnCacheDataDontLoad))
        #expect(result.error?.code == .resourceUnavailable)
        // returnCacheDataElseLoad revalidates it instead of using it blindly.
        let elseLoad = await fetch(session, Request(url: target, cachePolicy: .returnCacheDataElseLoad))
        #expect(elseLoad.task.metrics?.resourceFetchType == .revalidated)
        #expect(received(server, "mustrevalidate").last?.header("If-None-Match") == "\"m\"")
    }

    // MARK: - What is stored

    @Test("the will-cache hook returning nil stores nothing")
    func hookReturningNilStoresNothing() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let cache = try ResponseCache()
        let session = try session(cache)
        defer { session.invalidateAndCancel() }
        let calls = Protected(0)
        session.hooks.dataTaskWillCacheResponse = { _, _, _, _ in
            calls.withLock { $0 += 1 }
            return nil
        }
        let target = url(server, "hooknil", ["cc": "max-age=600"])

        _ = try await session.data(for: Request(url: target))
        _ = try await session.data(for: Request(url: target))

        #expect(received(server, "hooknil").count == 2)
        #expect(calls.withLock { $0 } == 2)
        #expect(cache.cachedResponse(for: Request(url: target)) == nil)
    }

    @Test("the will-cache hook's data is what is stored and later served")
    func hookDataIsStored() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try session(try ResponseCache())
        defer { session.invalidateAndCancel() }
        session.hooks.dataTaskWillCacheResponse = { _, _, response, data in
            response.statusCode == 200 ? Data("rewritten: ".utf8) + data : data
        }
        let target = url(server, "hookdata", ["cc": "max-age=600"])

        let (first, _) = try await session.data(for: Request(url: target))
        let (second, response) = try await session.data(for: Request(url: target))

        #expect(first == Data("cached hookdata".utf8))
        #expect(second == Data("rewritten: cached hookdata".utf8) && response.statusCode == 200)
        #expect(received(server, "hookdata").count == 1)
    }

    @Test("without a cache the will-cache hook is not called, and nothing is kept")
    func hookNotCalledWithoutCache() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let calls = Protected(0)
        session.hooks.dataTaskWillCacheResponse = { _, _, _, data in
            calls.withLock { $0 += 1 }
            return data
        }
        let target = url(server, "nocache", ["cc": "max-age=600"])

        _ = try await session.data(for: Request(url: target))
        _ = try await session.data(for: Request(url: target))

        #expect(calls.withLock { $0 } == 0)
        #expect(received(server, "nocache").count == 2)
    }

    @Test("a request's own Cache-Control: no-cache revalidates a fresh entry")
    func requestNoCacheRevalidates() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try session(try ResponseCache())
        defer { session.invalidateAndCancel() }
        let target = url(server, "reqnocache", ["cc": "max-age=600", "etag": "r"])
        _ = try await session.data(for: Request(url: target))

        let result = await fetch(session, Request(url: target, headers: ["Cache-Control": "no-cache"]))

        #expect(received(server, "reqnocache").count == 2)
        #expect(received(server, "reqnocache").last?.header("If-None-Match") == "\"r\"")
        #expect(result.task.metrics?.resourceFetchType == .revalidated)
        #expect(result.data == Data("cached reqnocache".utf8))
    }

    @Test("a streamed body is cached only when kept; then a data-chunk hook gets a cached body as one chunk")
    func chunkHookSeesCachedBody() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        var configuration = SessionConfiguration()
        configuration.responseCache = try ResponseCache()
        let notKept = try SessionManager(configuration: configuration)
        defer { notKept.invalidateAndCancel() }
        notKept.hooks.dataTaskDidReceiveData = { _, _, _ in }
        let plain = url(server, "notkept", ["cc": "max-age=600"])
        _ = try await notKept.data(for: Request(url: plain))
        _ = try await notKept.data(for: Request(url: plain))
        #expect(received(server, "notkept").count == 2)

        configuration.accumulatesStreamedBody = true
        let session = try SessionManager(configuration: configuration)
        defer { session.invalidateAndCancel() }
        let chunks = Protected<[Data]>([])
        session.hooks.dataTaskDidReceiveData = { _, _, data in chunks.withLock { $0.append(data) } }
        let target = url(server, "chunks", ["cc": "max-age=600"])
        _ = try await session.data(for: Request(url: target))
        chunks.withLock { $0.removeAll() }

        let result = await fetch(session, target)

        #expect(received(server, "chunks").count == 1)
        #expect(result.task.metrics?.resourceFetchType == .localCache)
        #expect(result.data == Data("cached chunks".utf8))
        #expect(chunks.withLock { $0 } == [Data("cached chunks".utf8)])
    }

    @Test("Vary: a request with other values of the named header misses; Vary: * is not stored")
    func varyIsMatched() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try session(try ResponseCache())
        defer { session.invalidateAndCancel() }
        let target = url(server, "vary", ["cc": "max-age=600", "vary": "Accept-Language"])
        let english = Request(url: target, headers: ["Accept-Language": "en"])
        let french = Request(url: target, headers: ["Accept-Language": "fr"])

        let (first, _) = try await session.data(for: english)
        let (again, _) = try await session.data(for: english)
        #expect(received(server, "vary").count == 1 && again == first)

        let (other, _) = try await session.data(for: french)
        #expect(received(server, "vary").count == 2)
        #expect(other == Data("cached vary Accept-Language=fr".utf8))

        let star = url(server, "varystar", ["cc": "max-age=600", "vary": "*"])
        _ = try await session.data(for: Request(url: star))
        _ = try await session.data(for: Request(url: star))
        #expect(received(server, "varystar").count == 2)
    }

    @Test("a response to a request with Authorization is stored only when public")
    func authorizationNeedsPublic() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try session(try ResponseCache())
        defer { session.invalidateAndCancel() }
        let headers: HTTPHeaders = ["Authorization": "Bearer secret"]
        let privateTarget = url(server, "auth", ["cc": "max-age=600"])
        let publicTarget = url(server, "authpublic", ["cc": "public, max-age=600"])

        for _ in 0..<2 {
            _ = try await session.data(for: Request(url: privateTarget, headers: headers))
            _ = try await session.data(for: Request(url: publicTarget, headers: headers))
        }

        #expect(received(server, "auth").count == 2)
        #expect(received(server, "authpublic").count == 1)
    }

    @Test("a successful POST to a URL drops its stored GET response")
    func unsafeMethodInvalidates() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let cache = try ResponseCache()
        let session = try session(cache)
        defer { session.invalidateAndCancel() }
        let target = url(server, "post", ["cc": "max-age=600"])
        _ = try await session.data(for: Request(url: target))
        #expect(cache.cachedResponse(for: Request(url: target)) != nil)

        _ = try await session.upload(for: Request(url: target, method: .post), from: Data("x".utf8))

        #expect(cache.cachedResponse(for: Request(url: target)) == nil)
        _ = try await session.data(for: Request(url: target))
        #expect(received(server, "post").filter { $0.method == "GET" }.count == 2)
    }

    @Test("a discarding data task stores nothing: its body was not kept")
    func discardedBodyIsNotStored() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let cache = try ResponseCache()
        let session = try session(cache)
        defer { session.invalidateAndCancel() }
        let target = url(server, "discard", ["cc": "max-age=600"])

        _ = try await session.discard(for: Request(url: target))

        #expect(cache.cachedResponse(for: Request(url: target)) == nil)
        #expect(received(server, "discard").count == 1)
    }

    // MARK: - Stores

    @Test("the memory store evicts the least recently used entry past its cap")
    func memoryCapEvictsLeastRecentlyUsed() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let body = String(repeating: "x", count: 4000)
        // What one such entry costs, measured on a cache of its own.
        let probe = try ResponseCache()
        do {
            let session = try session(probe)
            defer { session.invalidateAndCancel() }
            _ = try await session.data(for: Request(url: url(server, "p", ["cc": "max-age=600", "body": body])))
        }
        let cost = probe.currentMemoryUsage
        #expect(cost > 4000)
        // Room for two entries of this size, not three.
        let cache = try ResponseCache(memoryCapacity: cost * 2 + cost / 2)
        let session = try session(cache)
        defer { session.invalidateAndCancel() }
        let a = url(server, "a", ["cc": "max-age=600", "body": body])
        let b = url(server, "b", ["cc": "max-age=600", "body": body])
        let c = url(server, "c", ["cc": "max-age=600", "body": body])

        _ = try await session.data(for: Request(url: a))
        _ = try await session.data(for: Request(url: b))
        _ = try await session.data(for: Request(url: a))   // a is now more recent than b
        _ = try await session.data(for: Request(url: c))   // evicts b
        _ = try await session.data(for: Request(url: a))
        _ = try await session.data(for: Request(url: b))

        #expect(received(server, "a").count == 1)
        #expect(received(server, "b").count == 2)
        #expect(received(server, "c").count == 1)
        #expect(cache.currentMemoryUsage <= cache.memoryCapacity)
    }

    @Test("the disk store survives a new ResponseCache on the same folder")
    func diskStoreSurvivesNewInstance() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let target = url(server, "disk", ["cc": "max-age=600", "etag": "d"])
        do {
            let session = try session(try ResponseCache(diskCapacity: 1 << 20, directory: folder.url))
            defer { session.invalidateAndCancel() }
            _ = try await session.data(for: Request(url: target))
        }
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path)
        #expect(files.count == 1 && files.allSatisfy { $0.hasSuffix(".entry") })

        let reopened = try ResponseCache(memoryCapacity: 0, diskCapacity: 1 << 20, directory: folder.url)
        #expect(reopened.currentDiskUsage > 0)
        let session = try session(reopened)
        defer { session.invalidateAndCancel() }
        let (data, response) = try await session.data(for: Request(url: target))

        #expect(received(server, "disk").count == 1)
        #expect(data == Data("cached disk".utf8) && response.headers["ETag"] == "\"d\"")
    }

    @Test("a corrupt or truncated disk entry is a miss: fetched again, replaced, no crash", arguments: [
        "garbage", "truncated", "bitflip",
    ])
    func corruptDiskEntryIsAMiss(damage: String) async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let target = url(server, "corrupt", ["cc": "max-age=600"])
        do {
            let session = try session(try ResponseCache(diskCapacity: 1 << 20, directory: folder.url))
            defer { session.invalidateAndCancel() }
            _ = try await session.data(for: Request(url: target))
        }
        let name = try #require(try FileManager.default.contentsOfDirectory(atPath: folder.path).first)
        let file = folder.file(name)
        var bytes = try Data(contentsOf: file)
        switch damage {
        case "garbage": bytes = Data("not a cache entry at all".utf8)
        case "truncated": bytes = bytes.prefix(bytes.count / 2)
        default: bytes[bytes.count / 2] ^= 0x40
        }
        try bytes.write(to: file)

        let reopened = try ResponseCache(memoryCapacity: 0, diskCapacity: 1 << 20, directory: folder.url)
        #expect(reopened.cachedResponse(for: Request(url: target)) == nil)
        let session = try session(reopened)
        defer { session.invalidateAndCancel() }
        let (data, _) = try await session.data(for: Request(url: target))

        #expect(data == Data("cached corrupt".utf8))
        #expect(received(server, "corrupt").count == 2)
        // The fresh response replaced the bad file.
        #expect(try CacheEntryCodec.decode(Data(contentsOf: file))?.entry.data == Data("cached corrupt".utf8))
    }

    @Test("the disk store keeps under its cap, dropping the least recently used file")
    func diskCapEvicts() throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let body = Data(repeating: 7, count: 3000)
        func entry(_ name: String) -> (Request, CachedResponse) {
            let url = URL(string: "http://127.0.0.1/\(name)")!
            return (Request(url: url), CachedResponse(response: HTTPResponse(url: url, statusCode: 200, headers: [:]),
                                                      data: body))
        }
        let cache = try ResponseCache(memoryCapacity: 0, diskCapacity: 7000, directory: folder.url)
        for name in ["a", "b", "c"] {
            let (request, cached) = entry(name)
            cache.storeCachedResponse(cached, for: request)
        }

        #expect(cache.currentDiskUsage <= 7000)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).count == 2)
        #expect(cache.cachedResponse(for: entry("a").0) == nil)
        #expect(cache.cachedResponse(for: entry("c").0)?.data == body)
    }

    @Test("reset() empties the response cache: the next GET reaches the server")
    func resetEmptiesTheCache() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let cache = try ResponseCache(diskCapacity: 1 << 20, directory: folder.url)
        let session = try session(cache)
        defer { session.invalidateAndCancel() }
        let target = url(server, "reset", ["cc": "max-age=600"])
        _ = try await session.data(for: Request(url: target))
        #expect(cache.currentMemoryUsage > 0 && cache.currentDiskUsage > 0)

        session.reset()

        #expect(cache.currentMemoryUsage == 0 && cache.currentDiskUsage == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty)
        _ = try await session.data(for: Request(url: target))
        #expect(received(server, "reset").count == 2)
    }

    @Test("without a cache GETs keep the fast path; with one they leave it (HEAD stays)")
    func fastPathOnlyLeftWithACache() throws {
        let plain = try SessionManager()
        defer { plain.invalidateAndCancel() }
        let cached = try session(try ResponseCache())
        defer { cached.invalidateAndCancel() }
        let get = Request(url: URL(string: "http://127.0.0.1/x")!)

        #expect(plain.responseCache == nil && plain.takesFastPath(get))
        #expect(!cached.takesFastPath(get))
        #expect(cached.takesFastPath(Request(url: get.url, method: .head)))
    }

    // MARK: - Entry decoder

    @Test("the entry decoder round-trips and refuses every truncation")
    func entryCodecRefusesTruncation() throws {
        let url = URL(string: "https://example.com/a?b=1")!
        let entry = CachedResponse(
            response: HTTPResponse(url: url, statusCode: 203, headers: ["ETag": "\"x\"", "Vary": "Accept"],
                                   httpVersion: "2"),
            data: Data("body bytes".utf8), responseTime: Date(timeIntervalSince1970: 1_700_000_000),
            varyValues: ["accept": "text/plain"])
        let encoded = CacheEntryCodec.encode(key: "GET " + url.absoluteString, entry)

        let decoded = try #require(CacheEntryCodec.decode(encoded))
        #expect(decoded.key == "GET " + url.absoluteString && decoded.entry == entry)
        for length in 0..<encoded.count {
            #expect(CacheEntryCodec.decode(encoded.prefix(length)) == nil)
        }
        #expect(CacheEntryCodec.decode(encoded + Data([0])) == nil)
    }

    @Test("the fuzz target's seeds are valid entries that re-encode to their bytes")
    func fuzzSeedsDecode() throws {
        let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fuzz/corpus/fuzz_cache_entry")
        let names = try FileManager.default.contentsOfDirectory(atPath: corpus.path).sorted()
        #expect(names.count >= 2)
        for name in names {
            let bytes = try Data(contentsOf: corpus.appendingPathComponent(name))
            let decoded = try #require(CacheEntryCodec.decode(bytes), "seed \(name) does not decode")
            #expect(CacheEntryCodec.encode(key: decoded.key, decoded.entry) == bytes)
        }
    }

    @Test("a bad capacity or directory is a typed error")
    func badConfigurationIsTypedError() throws {
        #expect(throws: TransferError.self) { try ResponseCache(memoryCapacity: -1) }
        #expect(throws: TransferError.self) { try ResponseCache(diskCapacity: 10) }
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let file = folder.file("plain")
        try Data("x".utf8).write(to: file)
        do {
            _ = try ResponseCache(diskCapacity: 10, directory: file.appendingPathComponent("sub"))
            Issue.record("a folder under a file was accepted")
        } catch {
            #expect(error.code == .fileError)
        }
    }
}
