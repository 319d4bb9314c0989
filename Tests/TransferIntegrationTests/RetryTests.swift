import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing
import TransferFoundation

@testable import Transfer

/// A retry policy without real waits between attempts (the backoff is tested
/// on its own in RetryPolicyTests).
private func quickPolicy(attempts: Int = 3, methods: Set<HTTPMethod> = RetryPolicy.defaultRetryableMethods)
    -> RetryPolicy
{
    RetryPolicy(maximumAttempts: attempts, initialDelay: .milliseconds(1), maximumDelay: .milliseconds(2),
                retryableMethods: methods)
}

private func retrySession(_ interceptor: (any RequestInterceptor)?) throws -> SessionManager {
    try makeSession { $0.interceptor = interceptor }
}

/// What a data task's completion handler delivered, once.
private final class RetryCompletion: Sendable {
    private let value = Locked<(HTTPResponse?, Data?, TransferError?)?>(nil)
    var result: (HTTPResponse?, Data?, TransferError?)? { value.withLock { $0 } }
    var handler: DataTask.CompletionHandler {
        { response, data, error in self.value.withLock { $0 = (response, data, error) } }
    }

    /// Waits for the completion (bounded) and returns it.
    func wait(_ what: String = "the completion") async throws -> (HTTPResponse?, Data?, TransferError?) {
        try await Wait.until(what, timeout: .seconds(20)) { result != nil }
        guard let result else { throw CancellationError() }   // unreachable: the wait threw
        return result
    }
}

/// Names in a folder, hidden ones included.
private enum CLIListing {
    static func names(_ path: String) -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
    }
}

private func body(_ data: Data?) -> String { String(decoding: data ?? Data(), as: UTF8.self) }

@Suite("Retries and interceptors over real sockets", .serialized)
struct RetryTests {
    // MARK: RetryPolicy

    @Test("a route that fails twice is fetched on the third attempt, and the attempts are visible")
    func failsTwiceThenSucceeds() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try retrySession(quickPolicy(attempts: 3))
        defer { session.invalidateAndCancel() }
        let done = RetryCompletion()

        let task = session.dataTask(with: Request(url: server.url("/flaky/2?key=a")), completionHandler: done.handler)
        task.resume()
        let (response, data, error) = try await done.wait()

        #expect(error == nil)
        #expect(response?.statusCode == 200)
        #expect(body(data) == "attempt 3\n")
        #expect(server.hits("a") == 3)
        #expect(task.attemptCount == 3)
        #expect(task.metrics?.attempts == 3)
        #expect(task.attemptMetrics.count == 2)   // the two failed ones; the last is `metrics`
    }

    @Test("when the attempts run out, the last 503 is the result")
    func attemptsRunOut() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try retrySession(quickPolicy(attempts: 2))
        defer { session.invalidateAndCancel() }

        let (data, response) = try await session.data(for: Request(url: server.url("/flaky/5?key=b")))

        #expect(response.statusCode == 503)
        #expect(body(data) == "attempt 2 failed\n")
        #expect(server.hits("b") == 2)
    }

    @Test("a task without an interceptor makes one attempt")
    func noInterceptorOneAttempt() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try retrySession(nil)
        defer { session.invalidateAndCancel() }
        let done = RetryCompletion()

        let task = session.dataTask(with: Request(url: server.url("/flaky/1?key=c")), completionHandler: done.handler)
        task.resume()
        let (response, _, _) = try await done.wait()

        #expect(response?.statusCode == 503)
        #expect(server.hits("c") == 1)
        #expect(task.attemptCount == 1)
        #expect(task.metrics?.attempts == 1)
    }

    @Test("a 503 with Retry-After: 0 is retried at once")
    func retryAfterZero() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        // A backoff of an hour: only the header can make the retry come now.
        let session = try retrySession(RetryPolicy(initialDelay: .seconds(3600), jitter: 0))
        defer { session.invalidateAndCancel() }

        let (data, response) = try await session.data(for: Request(url: server.url("/flaky/1?key=d&retry-after=0")))

        #expect(response.statusCode == 200)
        #expect(body(data) == "attempt 2\n")
    }

    @Test("a 503 with a Retry-After date in the past is retried now")
    func retryAfterPastDate() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try retrySession(RetryPolicy(initialDelay: .seconds(3600), jitter: 0))
        defer { session.invalidateAndCancel() }
        let past = "Sun, 06 Nov 1994 08:49:37 GMT"

        let (data, response) = try await session.data(
            for: Request(url: server.url("/flaky/1?key=e&retry-after=\(past.replacingOccurrences(of: " ", with: "%20"))")))

        #expect(response.statusCode == 200)
        #expect(body(data) == "attempt 2\n")
    }

    @Test("an absurd Retry-After is not waited for: the 503 is the result", arguments: [
        "999999999999", "Fri, 31 Dec 9999 23:59:59 GMT", "99999999999999999999999999",
    ])
    func absurdRetryAfter(_ value: String) async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try retrySession(quickPolicy())
        defer { session.invalidateAndCancel() }
        let done = RetryCompletion()
        let encoded = value.replacingOccurrences(of: " ", with: "%20")

        let task = session.dataTask(with: Request(url: server.url("/flaky/1?key=f&retry-after=\(encoded)")),
                                    completionHandler: done.handler)
        task.resume()
        let (response, _, error) = try await done.wait()

        #expect(error == nil)
        #expect(response?.statusCode == 503)
        #expect(response?.headers["Retry-After"] == value)
        #expect(server.hits("f") == 1)
        #expect(task.attemptCount == 1)
    }

    @Test("a POST is not retried by default, and is when the policy names it")
    func postNotRetriedByDefault() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let byDefault = try retrySession(quickPolicy())
        defer { byDefault.invalidateAndCancel() }
        let withPost = try retrySession(quickPolicy(methods: [.post]))
        defer { withPost.invalidateAndCancel() }
        var post = Request(url: server.url("/flaky/1?key=g"), method: .post)
        post.body = .data(Data("payload".utf8))

        let (_, refused) = try await byDefault.data(for: post)
        #expect(refused.statusCode == 503)
        #expect(server.hits("g") == 1)

        post.url = server.url("/flaky/1?key=h")
        let (data, accepted) = try await withPost.data(for: post)
        #expect(accepted.statusCode == 200)
        #expect(body(data) == "attempt 2\n")
        // The body went out again with the second attempt.
        let posts = server.requests.filter { $0.target == "/flaky/1?key=h" }
        #expect(posts.count == 2)
        #expect(posts.allSatisfy { $0.header("content-length") == "7" })
    }

    @Test("a streamed body is not retried: it cannot be sent twice")
    func streamedBodyNotRetried() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try retrySession(quickPolicy(methods: [.put]))
        defer { session.invalidateAndCancel() }
        let done = RetryCompletion()
        var request = Request(url: server.url("/flaky/1?key=i"), method: .put)
        request.body = .stream(BodyStreamProvider { InputStream(data: Data("streamed".utf8)) }, length: 8)

        let task = session.dataTask(with: request, completionHandler: done.handler)
        task.resume()
        let (response, _, _) = try await done.wait()

        #expect(response?.statusCode == 503)
        #expect(server.hits("i") == 1)
    }

    @Test("a connection reset before the answer is retried")
    func resetThenSuccess() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try retrySession(quickPolicy())
        defer { session.invalidateAndCancel() }

        let (data, response) = try await session.data(for: Request(url: server.url("/flaky/1?key=j&fail=reset")))

        #expect(response.statusCode == 200)
        #expect(body(data) == "attempt 2\n")
    }

    @Test("a connection closed with no response is emptyResponse; the default policy retries it")
    func emptyReply() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let plain = try retrySession(nil)
        defer { plain.invalidateAndCancel() }
        let error = await #expect(throws: TransferError.self) {
            _ = try await plain.data(for: Request(url: server.url("/flaky/1?key=e1&fail=close")))
        }
        #expect(error?.code == .emptyResponse)
        #expect(server.hits("e1") == 1)

        let session = try retrySession(quickPolicy())
        defer { session.invalidateAndCancel() }
        let (data, response) = try await session.data(for: Request(url: server.url("/flaky/1?key=e2&fail=close")))
        #expect(response.statusCode == 200)
        #expect(body(data) == "attempt 2\n")
        #expect(server.hits("e2") == 2)
    }

    @Test("a refused connection is retried until the attempts run out, then fails with cannotConnect")
    func refusedConnection() async throws {
        let (fd, port) = try LoopbackListener.open(backlog: 1)
        close(fd)   // nothing listens there now: connections are refused
        let counter = Locked(0)
        let counting = Interceptor(retriers: [quickPolicy(attempts: 2)])
        let session = try retrySession(Interceptor(adapter: { request, _ in
            counter.withLock { $0 += 1 }
            return request
        }, retrier: { request, session, error, response, attempt in
            await counting.retry(request, for: session, dueTo: error, response: response, attempt: attempt)
        }))
        defer { session.invalidateAndCancel() }

        var thrown: TransferError?
        do {
            _ = try await session.data(for: Request(url: URL(string: "http://127.0.0.1:\(port)/")!))
        } catch {
            thrown = error
        }

        #expect(thrown?.code == .cannotConnect)
        #expect(counter.withLock { $0 } == 2)
    }

    // MARK: Adapters

    @Test("the adapter runs before each attempt: the server sees each attempt's header")
    func adapterRunsPerAttempt() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let counter = Locked(0)
        let adapter = Interceptor(adapter: { request, _ in
            var adapted = request
            adapted.headers["X-Attempt"] = "\(counter.withLock { $0 += 1; return $0 })"
            return adapted
        })
        let session = try retrySession(Interceptor(adapters: [adapter], retriers: [quickPolicy()]))
        defer { session.invalidateAndCancel() }

        let (_, response) = try await session.data(for: Request(url: server.url("/flaky/2?key=k")))

        #expect(response.statusCode == 200)
        let seen = server.requests.filter { $0.target == "/flaky/2?key=k" }.map { $0.header("X-Attempt") }
        #expect(seen == ["1", "2", "3"])
    }

    @Test("the session's interceptor runs before the request's")
    func sessionThenRequest() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try retrySession(Interceptor(adapter: { request, _ in
            var adapted = request
            adapted.headers["X-Order"] = "session"
            return adapted
        }))
        defer { session.invalidateAndCancel() }
        var request = Request(url: server.url("/echo"))
        request.interceptor = Interceptor(adapter: { request, _ in
            var adapted = request
            adapted.headers["X-Order"] = (adapted.headers["X-Order"] ?? "") + ",request"
            return adapted
        })

        let (data, _) = try await session.data(for: request)

        let echo = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let headers = try #require(echo["headers"] as? [String: String])
        #expect(headers["x-order"] == "session,request")
    }

    @Test("an adapter that throws fails the task with requestAdaptationFailed, and nothing is sent")
    func adapterThrows() async throws {
        struct Refused: Error {}
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try retrySession(Interceptor(adapter: { _, _ in throw Refused() }))
        defer { session.invalidateAndCancel() }

        var thrown: TransferError?
        do {
            _ = try await session.data(for: Request(url: server.url("/flaky/0?key=l")))
        } catch {
            thrown = error
        }

        #expect(thrown?.code == .requestAdaptationFailed)
        #expect(thrown?.underlyingError is Refused)
        #expect(server.hits("l") == 0)
    }

    @Test("doNotRetryWithError fails the task with requestRetryFailed and the response")
    func retrierFails() async throws {
        struct GaveUp: Error {}
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try retrySession(Interceptor(retrier: { _, _, _, _, _ in .doNotRetryWithError(GaveUp()) }))
        defer { session.invalidateAndCancel() }

        var thrown: TransferError?
        do {
            _ = try await session.data(for: Request(url: server.url("/flaky/1?key=m")))
        } catch {
            thrown = error
        }

        #expect(thrown?.code == .requestRetryFailed)
        #expect(thrown?.underlyingError is GaveUp)
        #expect(thrown?.response?.statusCode == 503)
    }

    // MARK: Cancellation

    @Test("a cancel during the retry delay ends the task as cancelled at once")
    func cancelDuringDelay() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let decided = Locked(false)
        let session = try retrySession(Interceptor(retrier: { _, _, _, _, _ in
            decided.withLock { $0 = true }
            return .retryAfter(.seconds(3600))
        }))
        defer { session.invalidateAndCancel() }
        let done = RetryCompletion()
        let task = session.dataTask(with: Request(url: server.url("/flaky/1?key=n")), completionHandler: done.handler)
        task.resume()
        try await Wait.until("the retrier decided on the first attempt", timeout: .seconds(20)) {
            decided.withLock { $0 }
        }

        task.cancel()
        // Bounded well below the hour the retrier asked for.
        let (_, _, error) = try await done.wait("the cancelled task's completion")

        #expect(error?.code == .cancelled)
        #expect(task.state == .completed)
        #expect(server.hits("n") == 1)
    }

    @Test("a cancel while the adapter waits ends the task as cancelled, and nothing is sent")
    func cancelDuringAdapt() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let entered = Locked(false)
        let session = try retrySession(Interceptor(adapter: { request, _ in
            entered.withLock { $0 = true }
            try await Task.sleep(for: .seconds(3600))
            return request
        }))
        defer { session.invalidateAndCancel() }
        let done = RetryCompletion()
        let task = session.dataTask(with: Request(url: server.url("/flaky/0?key=o")), completionHandler: done.handler)
        task.resume()
        try await Wait.until("the adapter started", timeout: .seconds(20)) { entered.withLock { $0 } }

        task.cancel()
        let (_, _, error) = try await done.wait("the cancelled task's completion")

        #expect(error?.code == .cancelled)
        #expect(server.hits("o") == 0)
    }

    // MARK: Downloads

    @Test("a retried download to a file holds the last attempt's body only")
    func downloadRetried() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try retrySession(quickPolicy())
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let destination = directory.file("body.txt")

        let (file, response) = try await session.download(for: Request(url: server.url("/flaky/1?key=p")),
                                                          to: destination)

        #expect(response.statusCode == 200)
        #expect(try String(contentsOf: file, encoding: .utf8) == "attempt 2\n")
        #expect(!FileManager.default.fileExists(atPath: destination.path + ".part"))
    }

    @Test("a download cancelled while the retrier decides leaves nothing at its destination")
    func downloadCancelledBetweenAttempts() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let deciding = Locked(false)
        // Still deciding when the cancel comes (the wait ends with the cancel).
        let session = try retrySession(Interceptor(retrier: { _, _, _, _, _ in
            deciding.withLock { $0 = true }
            try? await Task.sleep(for: .seconds(3600))
            return .doNotRetry
        }))
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let destination = directory.file("body.txt")
        let finished = Locked<TransferError??>(nil)
        let task = session.downloadTask(with: Request(url: server.url("/flaky/1?key=q")), to: destination) {
            _, _, error in finished.withLock { $0 = .some(error) }
        }
        task.resume()
        try await Wait.until("the retrier is deciding", timeout: .seconds(20)) { deciding.withLock { $0 } }

        task.cancel()
        try await Wait.until("the completion", timeout: .seconds(20)) { finished.withLock { $0 } != nil }

        #expect(finished.withLock { $0 ?? nil }?.code == .cancelled)
        #expect(CLIListing.names(directory.url.path).isEmpty)
    }

    @Test("an upload from a file is sent again by a retry")
    func fileUploadRetried() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try retrySession(quickPolicy())
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let file = directory.file("body.bin")
        try Data(repeating: 0x61, count: 100_000).write(to: file)
        let done = RetryCompletion()

        let task = session.uploadTask(with: Request(url: server.url("/flaky/1?key=r"), method: .put), fromFile: file,
                                      completionHandler: done.handler)
        task.resume()
        let (response, data, error) = try await done.wait()

        #expect(error == nil)
        #expect(response?.statusCode == 200)
        #expect(body(data) == "attempt 2\n")
        let puts = server.requests.filter { $0.target == "/flaky/1?key=r" }
        #expect(puts.map { $0.header("content-length") } == ["100000", "100000"])
    }

    // MARK: AuthenticationInterceptor

    @Test("a 401 refreshes the token once for five concurrent requests, which all succeed with the new one")
    func refreshOnceForFive() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let plain = try makeSession()
        defer { plain.invalidateAndCancel() }
        let refreshURL = server.url("/flaky/0?key=refresh")
        let authenticator = BearerAuthenticator { _, _ in
            _ = try await plain.data(for: Request(url: refreshURL))
            return BearerToken(accessToken: "new")
        }
        let interceptor = AuthenticationInterceptor(authenticator: authenticator,
                                                    credential: BearerToken(accessToken: "old"))
        let session = try retrySession(interceptor)
        defer { session.invalidateAndCancel() }

        // All five are sent with the old token before any refusal comes back: the
        // server holds the 401s at a gate until the five are in (a request adapted
        // after a refusal would wait for the refresh and never carry the old token).
        let requests = Task {
            try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<5 {
                    group.addTask {
                        try await session.data(for: Request(url: server.url("/bearer/new?gate=old-five"))).1.statusCode
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
        }
        try await Wait.until("five requests with the old token held", timeout: .seconds(20)) {
            server.heldAtGate("old-five") >= 5
        }
        server.openGate("old-five")
        let statuses = try await requests.value

        #expect(statuses == [200, 200, 200, 200, 200])
        #expect(server.hits("refresh") == 1)
        #expect(interceptor.refreshCount == 1)
        let tokens = server.requests.filter { $0.path == "/bearer/new" }.map { $0.header("Authorization") ?? "" }
        #expect(tokens.filter { $0 == "Bearer old" }.count == 5)
        #expect(tokens.filter { $0 == "Bearer new" }.count == 5)
    }

    @Test("a failed refresh fails every waiting request with a typed error")
    func refreshFailsAll() async throws {
        struct Expired: Error {}
        let server = try await TestServer.start()
        defer { server.stop() }
        let authenticator = BearerAuthenticator { _, _ in throw Expired() }
        let interceptor = AuthenticationInterceptor(authenticator: authenticator,
                                                    credential: BearerToken(accessToken: "old"))
        let session = try retrySession(interceptor)
        defer { session.invalidateAndCancel() }

        // The three are refused together: the server holds the 401s until all are in.
        let requests = Task {
            await withTaskGroup(of: TransferError?.self) { group in
                for _ in 0..<3 {
                    group.addTask {
                        do {
                            _ = try await session.data(for: Request(url: server.url("/bearer/new?gate=old-three")))
                            return nil
                        } catch let error as TransferError {
                            return error
                        } catch {
                            return TransferError(.internalError, "\(error)")
                        }
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
        }
        try await Wait.until("three requests with the old token held", timeout: .seconds(20)) {
            server.heldAtGate("old-three") >= 3
        }
        server.openGate("old-three")
        let errors = await requests.value

        #expect(errors.count == 3)
        for error in errors {
            #expect(error?.code == .requestRetryFailed)
            guard case .refreshFailed(let cause)? = error?.underlyingError as? AuthenticationError else {
                Issue.record("expected AuthenticationError.refreshFailed, got \(String(describing: error))")
                continue
            }
            #expect(cause is Expired)
        }
        #expect(interceptor.refreshCount == 1)
    }
}
