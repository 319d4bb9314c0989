import Foundation
import TestSupport
import Testing
import TransferFoundation

@testable import Transfer

/// `data(for:)` without observers skips the task layer; these prove it gives
/// what the task path gives, and that observing switches back to the task path.
@Suite("Fast path of data(for:)")
struct FastPathTests {
    /// A session on the task path: any hook turns the fast path off.
    private static func taskPathSession() throws -> SessionManager {
        let session = try SessionManager()
        var hooks = SessionHooks()
        hooks.taskDidComplete = { _, _, _ in }
        session.hooks = hooks
        return session
    }

    private struct Seen: Equatable {
        var body: Data?
        var status: Int?
        var headers: [String]
        var version: String?
        /// The response's URL: the request's, or the last hop's after redirects.
        var url: String?
        var errorCode: String?
        var errorStatus: Int?
        var errorResponseStatus: Int?
    }

    private static func observe(_ session: SessionManager, _ request: Request) async -> Seen {
        do {
            let (data, response) = try await session.data(for: request)
            // Date differs between two responses; everything else must not.
            let headers = response.headers.filter { $0.name.lowercased() != "date" }.map { "\($0.name): \($0.value)" }
            return Seen(body: data, status: response.statusCode, headers: headers, version: response.httpVersion,
                        url: response.url.absoluteString)
        } catch {
            return Seen(body: nil, status: nil, headers: [], version: nil, errorCode: error.code.name,
                        errorStatus: error.httpStatus, errorResponseStatus: error.response?.statusCode)
        }
    }

    @Test("returns the same body, response and errors as the task path")
    func sameAsTaskPath() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let fast = try SessionManager()
        defer { fast.invalidateAndCancel() }
        let slow = try Self.taskPathSession()
        defer { slow.invalidateAndCancel() }
        let fastOpen = fast.fastPathOpen.load(ordering: .relaxed)
        let slowOpen = slow.fastPathOpen.load(ordering: .relaxed)
        #expect(fastOpen)
        #expect(!slowOpen)

        let requests = [
            Request(url: server.url("/bytes/3000?seed=5")),
            Request(url: server.url("/status/404")),
            Request(url: server.url("/truncate/4000?send=1000")),
            Request(url: server.url("/redirect/2")),
            Request(url: server.url("/response-headers?X-One=1&X-Two=two")),
            Request(url: URL(string: "ftp://127.0.0.1/file")!),
            Request(url: server.url("/bytes/10"), headers: ["Bad Name": "x"]),
        ]
        for request in requests {
            let viaFast = await Self.observe(fast, request)
            let viaTasks = await Self.observe(slow, request)

            #expect(viaFast == viaTasks, "\(request.url)")
        }
        let body = await Self.observe(fast, requests[0])
        #expect(body.body == TestServer.bytes(seed: 5, count: 3000))
        #expect(await Self.observe(fast, requests[2]).errorCode == "truncatedResponse")
        #expect(await Self.observe(fast, requests[1]).status == 404)
        // The engine says in C whether the URL changed: the request's own URL
        // when it did not, the last hop's when redirects were followed.
        #expect(body.url == requests[0].url.absoluteString)
        let redirected = await Self.observe(fast, requests[3])
        #expect(redirected.status == 200)
        #expect(redirected.url == server.url("/redirect/0").absoluteString, "\(redirected)")
    }

    @Test("a TLS failure is the same typed error on both paths")
    func tlsFailure() async throws {
        let nginx = try NginxFixture.shared()
        let url = nginx.url(.https, "/")
        let fast = try SessionManager()   // the system CA bundle: the test CA is unknown
        defer { fast.invalidateAndCancel() }
        let slow = try Self.taskPathSession()
        defer { slow.invalidateAndCancel() }

        let viaFast = await Self.observe(fast, Request(url: url))
        let viaTasks = await Self.observe(slow, Request(url: url))

        #expect(viaFast.errorCode == "tlsFailure")
        #expect(viaFast == viaTasks)
    }

    @Test("cancelling the awaiting Swift task cancels the request in the engine")
    func cancellation() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }

        let waiting = Task { () -> TransferError? in
            do throws(TransferError) {
                _ = try await session.data(for: Request(url: server.url("/hold/100000?gate=fast")))
                return nil
            } catch {
                return error
            }
        }
        try await Wait.until("the request held at the gate", timeout: .seconds(10)) { server.heldAtGate("fast") == 1 }
        waiting.cancel()
        let error = await waiting.value

        #expect(error?.code == .cancelled)
        try await Wait.until("the engine to drop the transfer", timeout: .seconds(10)) {
            session.engine.activeCount == 0
        }
    }

    @Test("a task cancelled before the call never reaches the server")
    func cancelledBeforeStart() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }

        let waiting = Task { () -> TransferError? in
            withUnsafeCurrentTask { $0?.cancel() }
            do throws(TransferError) {
                _ = try await session.data(for: Request(url: server.url("/bytes/10")))
                return nil
            } catch {
                return error
            }
        }

        #expect(await waiting.value?.code == .cancelled)
        #expect(server.requestCount == 0)
    }

    @Test("invalidateAndCancel reaches requests on the fast path")
    func invalidation() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()

        let waiting = Task { () -> TransferError? in
            do throws(TransferError) {
                _ = try await session.data(for: Request(url: server.url("/hold/100000?gate=inv")))
                return nil
            } catch {
                return error
            }
        }
        try await Wait.until("the request held at the gate", timeout: .seconds(10)) { server.heldAtGate("inv") == 1 }
        session.invalidateAndCancel()

        #expect(await waiting.value?.code == .cancelled)
        await #expect(throws: TransferError.self) { try await session.data(for: Request(url: server.url("/bytes/1"))) }
    }

    @Test("an observer of the completion notification, with no opt-in, hears requests that stay on the fast path")
    func plainObserverHearsFastPath() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let single = server.url("/bytes/100?seed=11")
        let batched = (0..<3).map { server.url("/bytes/\(10 + $0)?seed=12") }
        let heard = Locked<[(url: URL, status: Int?, metrics: Bool, object: Bool)]>([])
        // Registered with NotificationCenter directly: no TransferNotifications call
        let observer = NotificationCenter.default.addObserver(forName: .transferTaskDidComplete, object: nil,
                                                              queue: nil) { note in
            guard let request = note.userInfo?[TransferNotificationKey.request] as? Request,
                request.url == single || batched.contains(request.url)
            else { return }
            let response = note.userInfo?[TransferNotificationKey.response] as? HTTPResponse
            heard.withLock {
                $0.append((request.url, response?.statusCode, note.userInfo?[TransferNotificationKey.metrics] is TaskMetrics,
                           note.object != nil))
            }
        }
        defer { NotificationCenter.default.removeObserver(observer) }

        #expect(session.takesFastPath(Request(url: single)))
        let (data, _) = try await session.data(for: Request(url: single))
        let results = await session.data(for: batched.map { Request(url: $0) })

        #expect(data.count == 100)
        #expect(results.allSatisfy { (try? $0.get()) != nil })
        try await Wait.until("a completion for each request", timeout: .seconds(10)) { heard.withLock { $0.count } == 4 }
        let seen = heard.withLock { $0 }
        #expect(Set(seen.map(\.url)) == Set([single] + batched))
        #expect(seen.allSatisfy { $0.status == 200 && $0.metrics && !$0.object })
        // Still the fast path: nothing opted in
        #expect(session.usesFastPath)
    }

    @Test("a notification observer switches requests back to the task path and hears them")
    func notificationObserverSeesRequests() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let url = server.url("/bytes/100?seed=9")
        let heard = Locked<[String]>([])
        let token = TransferNotifications.observe(.transferTaskDidComplete) { note in
            guard let task = note.object as? TransferTask, task.originalRequest.url == url else { return }
            heard.withLock { $0.append(task.originalRequest.url.absoluteString) }
        }

        let (data, _) = try await session.data(for: Request(url: url))
        token.cancel()

        #expect(data.count == 100)
        try await Wait.until("the completion notification", timeout: .seconds(10)) { heard.withLock { $0.count } == 1 }
    }

    @Test("a hook set on the session sees requests of data(for:)")
    func hookSeesRequests() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let completed = Locked(0)
        var hooks = SessionHooks()
        hooks.taskDidComplete = { _, _, error in if error == nil { completed.withLock { $0 += 1 } } }
        session.hooks = hooks

        _ = try await session.data(for: Request(url: server.url("/bytes/10")))

        try await Wait.until("the taskDidComplete hook", timeout: .seconds(10)) { completed.withLock { $0 } == 1 }
        session.hooks = SessionHooks()
        let reopened = session.fastPathOpen.load(ordering: .relaxed)
        #expect(reopened)
    }

    @Test("response headers parsed lazily read the same as eager ones")
    func lazyHeaders() {
        let raw = "Content-Type: text/plain; charset=UTF-8\r\nX-A:  1 \r\nx-a: 2\r\n"
        let lazy = HTTPResponse(url: URL(string: "http://h/")!, statusCode: 200, rawHeaderBlock: raw, httpVersion: "1.1")
        let eager = HTTPResponse(url: URL(string: "http://h/")!, statusCode: 200,
                                 headers: HTTPHeaders(rawHeaderBlock: raw), httpVersion: "1.1")

        #expect(lazy == eager)
        #expect(lazy.headers.values(for: "X-A") == ["1", "2"])
        #expect(lazy.mimeType == "text/plain")
        #expect(lazy.textEncodingName == "utf-8")
        var changed = lazy
        changed.headers["X-A"] = "3"
        #expect(changed.headers["x-a"] == "3")
        #expect(lazy.headers["x-a"] == "1")
    }
}
