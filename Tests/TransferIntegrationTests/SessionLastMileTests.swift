import Dispatch
import Foundation
import TestSupport
import Testing
import Transfer
import TransferFoundation

/// Issue 17 items 1, 2, 6, 7, 8, 9 and 10, and issue 15 item 7's `validate()`,
/// over loopback: TestServer for HTTP, `openssl s_server` with the test PKI for TLS.
@Suite("SessionManager parity, the last mile", .serialized)
struct SessionLastMileTests {
    private struct Completion: Sendable {
        var response: HTTPResponse?
        var value: (any Sendable)?
        var data: Data?
        var error: TransferError?
    }

    /// A task's serialized completion, bounded.
    private func serialized(_ session: SessionManager, _ request: Request,
                            configure: @escaping @Sendable (DataTask) -> Void = { _ in }) async throws -> Completion
    {
        try await awaitCompletion { done in
            let task = session.dataTask(with: request) { (response: HTTPResponse?, value: (any Sendable)?,
                                                          error: TransferError?) in
                done(Completion(response: response, value: value, error: error))
            }
            configure(task)
            task.resume()
        }
    }

    /// A task's raw (`Data`) completion, bounded.
    private func raw(_ session: SessionManager, _ request: Request,
                     configure: @escaping @Sendable (DataTask) -> Void = { _ in }) async throws -> Completion
    {
        try await awaitCompletion { done in
            let task = session.dataTask(with: request) { response, data, error in
                done(Completion(response: response, data: data, error: error))
            }
            configure(task)
            task.resume()
        }
    }

    private func tlsServer(_ extra: [String] = []) throws -> (OpenSSLServer, CertificateFactory) {
        let pki = try CertificateFactory.shared()
        let server = try OpenSSLServer(certificateFile: try pki.serverChainFile(for: pki.leaf),
                                       keyFile: pki.leaf.keyFile, extraArguments: extra)
        return (server, pki)
    }

    // MARK: - Item 1: reachabilityManager

    @Test("the manager owns a reachability monitor, idle until started, whose changes reach a block and a notification")
    func reachabilityManager() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }

        let owned = session.reachabilityManager
        #expect(owned === session.reachabilityManager)
        #expect(owned.target == .defaultRoute)
        #expect(owned.status == .unknown)   // nothing watched until asked

        let center = NotificationCenter()
        session.reachabilityManager = NetworkReachability(target: .address("127.0.0.1"), notificationCenter: center)
        let fromBlock = Locked<[ReachabilityStatus]>([])
        let fromNotification = Locked<[ReachabilityStatus]>([])
        let observer = center.addObserver(forName: .transferReachabilityDidChange, object: nil, queue: nil) { note in
            if let status = note.userInfo?[NetworkReachability.statusUserInfoKey] as? ReachabilityStatus {
                fromNotification.withLock { $0.append(status) }
            }
        }
        defer { center.removeObserver(observer) }
        session.reachabilityManager.setStatusChangeHandler { status in fromBlock.withLock { $0.append(status) } }

        try session.reachabilityManager.startMonitoring()
        defer { session.reachabilityManager.stopMonitoring() }

        #expect(await Wait.poll(timeout: .seconds(10)) { !fromNotification.withLock { $0 }.isEmpty })
        let expected = session.reachabilityManager.currentStatus()
        #expect(fromBlock.withLock { $0 }.first == expected)
        #expect(fromNotification.withLock { $0 }.first == expected)
        #expect(session.reachabilityManager.status == expected)
        let (_, response) = try await session.data(for: Request(url: server.url("/bytes/16")))
        #expect(response.statusCode == 200)
    }

    // MARK: - Items 2, 6 and 9: response serializer, notification userInfo and order

    @Test("did-complete is posted after the completion handler is queued, with the serializer and the serialized response")
    func completionNotificationOrderAndUserInfo() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        session.responseSerializer = JSONResponseSerializer()
        // The completion queue is held: a queued handler keeps the group entered.
        let held = DispatchQueue(label: "held-completions")
        held.suspend()
        let group = DispatchGroup()
        session.completionQueue = held
        session.completionGroup = group
        let target = Locked<Int?>(nil)
        struct Seen: Sendable {
            var handlerQueued: Bool
            var serializerIsJSON: Bool
            var name: String?
            var hasData: Bool
        }
        let seen = Locked<Seen?>(nil)
        let observer = NotificationCenter.default.addObserver(forName: .transferTaskDidComplete, object: nil,
                                                              queue: nil) { note in
            guard let task = note.object as? TransferTask, task.taskIdentifier == target.withLock({ $0 }) else { return }
            let info = note.userInfo ?? [:]
            let value = info[TransferNotificationKey.serializedResponse] as? JSONValue
            seen.withLock {
                $0 = Seen(handlerQueued: group.wait(timeout: .now()) == .timedOut,
                          serializerIsJSON: info[TransferNotificationKey.responseSerializer] is JSONResponseSerializer,
                          name: value?["name"]?.stringValue,
                          hasData: info[TransferNotificationKey.responseData] is Data)
            }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        let handled = Locked<Completion?>(nil)

        let task = session.dataTask(with: Request(url: server.url("/json"))) { (response: HTTPResponse?,
                                                                              value: (any Sendable)?,
                                                                              error: TransferError?) in
            handled.withLock { $0 = Completion(response: response, value: value, error: error) }
        }
        target.withLock { $0 = task.taskIdentifier }
        task.resume()

        let posted = await Wait.poll(timeout: .seconds(20)) { seen.withLock { $0 } != nil }
        held.resume()
        #expect(posted)
        let note = try #require(seen.withLock { $0 })
        #expect(note.handlerQueued, "the notification came before the completion handler was queued")
        #expect(note.serializerIsJSON)
        #expect(note.name == "transfer")
        #expect(note.hasData)
        #expect(await Wait.poll(timeout: .seconds(20)) { handled.withLock { $0 } != nil })
        let completion = try #require(handled.withLock { $0 })
        #expect(completion.error == nil)
        #expect((completion.value as? JSONValue)?["name"]?.stringValue == "transfer")
    }

    @Test("the base manager serializes with HTTPResponseSerializer by default; Data handlers keep today's behaviour")
    func defaultSerializer() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        #expect(session.responseSerializer is HTTPResponseSerializer)
        let errors = Locked<[TransferError.Code]>([])
        let observer = NotificationCenter.default.addObserver(forName: .transferTaskDidComplete, object: nil,
                                                              queue: nil) { note in
            guard (note.object as? TransferTask)?.originalRequest.url.path == "/status/404" else { return }
            if let error = note.userInfo?[TransferNotificationKey.error] as? TransferError {
                errors.withLock { $0.append(error.code) }
            }
        }
        defer { NotificationCenter.default.removeObserver(observer) }

        let ok = try await serialized(session, Request(url: server.url("/bytes/1000?seed=3")))
        #expect(ok.error == nil)
        #expect(ok.value as? Data == TestServer.bytes(seed: 3, count: 1000))

        let missing = try await serialized(session, Request(url: server.url("/status/404")))
        #expect(missing.value == nil)
        #expect(missing.error?.code == .unacceptableStatusCode)
        #expect(missing.response?.statusCode == 404)
        #expect(await Wait.poll(timeout: .seconds(10)) { errors.withLock { $0 } == [.unacceptableStatusCode] })

        let legacy = try await raw(session, Request(url: server.url("/status/404")))
        #expect(legacy.error == nil)   // the Data handler: the transfer's own outcome, as before
        #expect(legacy.response?.statusCode == 404)
        #expect(legacy.data?.isEmpty == false)
    }

    private struct CountingSerializer: ResponseSerializer {
        var acceptableStatusCodes = ResponseValidation.successStatusCodes
        var acceptableContentTypes: Set<String>?
        let calls: Locked<Int>
        func serialize(response: HTTPResponse?, data: Data?, error: TransferError?) throws(TransferError) -> Int {
            calls.withLock { $0 += 1 }
            if let error { throw error }
            return data?.count ?? 0
        }
    }

    @Test("an HTTPSessionManager's task: its serializer is in the notification and parses the body once")
    func httpManagerSerializesOnce() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let manager = try HTTPSessionManager(baseURL: server.baseURL, configuration: .ephemeral)
        defer { manager.invalidateAndCancel() }
        let calls = Locked(0)
        manager.responseSerializer = CountingSerializer(calls: calls)
        let noted = Locked<Int?>(nil)
        let observer = NotificationCenter.default.addObserver(forName: .transferTaskDidComplete, object: nil,
                                                              queue: nil) { note in
            guard (note.object as? TransferTask)?.originalRequest.url.path == "/json",
                note.userInfo?[TransferNotificationKey.responseSerializer] is CountingSerializer
            else { return }
            noted.withLock { $0 = note.userInfo?[TransferNotificationKey.serializedResponse] as? Int }
        }
        defer { NotificationCenter.default.removeObserver(observer) }

        let value: Int? = try await awaitCompletion { done in
            manager.GET("json", success: { _, value in done(value as? Int) }, failure: { _, _ in done(nil) })
        }

        #expect(value == TestServer.jsonBody.utf8.count)
        #expect(await Wait.poll(timeout: .seconds(10)) { noted.withLock { $0 } == value })
        #expect(calls.withLock { $0 } == 1)
    }

    // MARK: - Issue 15 item 7: validate()

    @Test("validate() checks status, Accept-derived content types and custom closures, first failure wins")
    func validationChain() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }

        let notFound = try await raw(session, Request(url: server.url("/status/404"))) { $0.validate() }
        #expect(notFound.error?.code == .unacceptableStatusCode)
        #expect(notFound.error?.response?.statusCode == 404)
        #expect(notFound.data?.isEmpty == false)

        let accept = Request(url: server.url("/json"), headers: ["Accept": "text/plain, text/html;q=0.9"])
        let wrongType = try await raw(session, accept) { $0.validate() }
        #expect(wrongType.error?.code == .unacceptableContentType)

        let ranged = try await raw(session, Request(url: server.url("/status/201"))) {
            $0.validate(statusCode: [200])
        }
        #expect(ranged.error?.code == .unacceptableStatusCode)

        let passes = try await raw(session, Request(url: server.url("/json"))) { task in
            task.validate(statusCode: 200..<300).validate(contentType: ["application/*"]).validate { _, response, data in
                data?.count == TestServer.jsonBody.utf8.count && response.statusCode == 200
                    ? .success(()) : .failure(TransferError(.badResponse, "unexpected body"))
            }
        }
        #expect(passes.error == nil)
        #expect(passes.data == Data(TestServer.jsonBody.utf8))

        let custom = try await raw(session, Request(url: server.url("/json"))) { task in
            task.validate { _, _, _ in .failure(TransferError(.badResponse, "first")) }
                .validate { _, _, _ in .failure(TransferError(.badResponse, "second")) }
        }
        #expect(custom.error?.message == "first")
        #expect(custom.error?.response?.statusCode == 200)

        // The serialized form and async/await see the same failure.
        let viaSerializer = try await serialized(session, Request(url: server.url("/json"))) {
            $0.validate(contentType: ["text/*"])
        }
        #expect(viaSerializer.error?.code == .unacceptableContentType)
        #expect(viaSerializer.value == nil)
    }

    // MARK: - Item 7: the AF-style challenge handler

    @Test("a 401: the handler defers, then answers with a credential")
    func deferredBasicAnswer() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        let asked = Locked<[Bool]>([])
        session.hooks.authenticationChallengeHandler = { _, task, challenge, later in
            asked.withLock { $0.append(task != nil && challenge.kind == .httpBasic(realm: "TestServer")) }
            DispatchQueue.global().async { later(.useCredential(Credential(user: "ann", password: "s3cret"))) }
            return .deferred
        }

        let (_, response) = try await session.data(for: Request(url: server.url("/basic-auth/ann/s3cret")))

        #expect(response.statusCode == 200)
        #expect(asked.withLock { $0 } == [true])
    }

    @Test("a 401: the handler's error fails the task with that error, without another request")
    func failedBasicAnswer() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        session.hooks.authenticationChallengeHandler = { _, _, _, _ in
            .fail(TransferError(.invalidRequest, "no credentials for TestServer"))
        }

        let result = try await raw(session, Request(url: server.url("/basic-auth/ann/s3cret")))

        #expect(result.error?.code == .invalidRequest)
        #expect(result.error?.message == "no credentials for TestServer")
        #expect(result.error?.response?.statusCode == 401)
        #expect(server.requests.filter { $0.path == "/basic-auth/ann/s3cret" }.count == 1)
    }

    @Test("a 401: cancelling the task while the handler has deferred ends it as cancelled")
    func cancelWhileDeferred() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        let pending = Locked<ChallengeCompletion?>(nil)
        session.hooks.authenticationChallengeHandler = { _, _, _, later in
            pending.withLock { $0 = later }
            return .deferred
        }
        let done = Locked<Completion?>(nil)
        let task = session.dataTask(with: Request(url: server.url("/basic-auth/ann/s3cret"))) { response, data, error in
            done.withLock { $0 = Completion(response: response, data: data, error: error) }
        }
        task.resume()
        #expect(await Wait.poll(timeout: .seconds(20)) { pending.withLock { $0 } != nil })

        task.cancel()

        #expect(await Wait.poll(timeout: .seconds(20)) { done.withLock { $0 } != nil })
        #expect(done.withLock { $0 }?.error?.code == .cancelled)
        // A late answer changes nothing.
        pending.withLock { $0 }?(.useCredential(Credential(user: "ann", password: "s3cret")))
        #expect(server.requests.filter { $0.path == "/basic-auth/ann/s3cret" }.count == 1)
    }

    @Test("server trust reaches the handler (no task); a deferred trust credential accepts its own chain")
    func deferredServerTrust() async throws {
        let (server, _) = try tlsServer()
        defer { server.stop() }
        let session = try makeSession()   // system anchors: the test CA is unknown to them
        defer { session.invalidateAndCancel() }
        let asked = Locked<[String]>([])
        session.hooks.authenticationChallengeHandler = { _, task, challenge, later in
            asked.withLock { $0.append("\(challenge.kind == .serverTrust) \(task == nil)") }
            guard let trust = challenge.serverTrust else { return .disposition(.performDefaultHandling) }
            DispatchQueue.global().async { later(.useCredential(.serverTrust(trust))) }
            return .deferred
        }

        let (body, response) = try await session.data(for: Request(url: URL(string: server.url())!))

        #expect(response.statusCode == 200)
        #expect(String(decoding: body, as: UTF8.self).contains("Cipher"))
        #expect(asked.withLock { $0 } == ["true true"])
    }

    @Test("server trust: the handler's error fails the task; a password never accepts an untrusted chain")
    func failedServerTrust() async throws {
        let (server, pki) = try tlsServer()
        defer { server.stop() }
        let session = try makeSession { $0.caFile = pki.root.certificateFile.path }
        defer { session.invalidateAndCancel() }
        session.hooks.authenticationChallengeHandler = { _, _, _, _ in
            .fail(TransferError(.invalidRequest, "this build talks to no such server"))
        }
        let url = URL(string: server.url())!

        let failed = try await raw(session, Request(url: url))

        #expect(failed.error?.code == .invalidRequest)
        #expect(failed.error?.message == "this build talks to no such server")
        #expect((failed.error?.underlyingError as? TransferError)?.code == .serverTrustRejected)

        // Answering with a user/password does not turn OpenSSL's refusal into success.
        let untrusted = try makeSession()
        defer { untrusted.invalidateAndCancel() }
        untrusted.hooks.authenticationChallengeHandler = { _, _, _, _ in
            .disposition(.useCredential(Credential(user: "ann", password: "s3cret")))
        }
        let refused = try await raw(untrusted, Request(url: url))
        #expect(refused.error?.code == .serverTrustRejected || refused.error?.code == .tlsFailure)
    }

    // MARK: - Item 10: the delegate sees server-trust challenges

    private final class TrustDelegate: SessionDelegate {
        let seen = Locked<[AuthenticationChallenge]>([])
        let answer: ChallengeDisposition
        let wantsServerTrustChallenges: Bool
        init(answer: ChallengeDisposition, wants: Bool = true) {
            self.answer = answer
            wantsServerTrustChallenges = wants
        }
        func session(_ session: SessionManager, didReceive challenge: AuthenticationChallenge) -> ChallengeDisposition {
            seen.withLock { $0.append(challenge) }
            return answer
        }
    }

    @Test("with no hook, server-trust challenges reach the delegate, and its answer counts")
    func delegateReceivesServerTrust() async throws {
        let (server, pki) = try tlsServer()
        defer { server.stop() }
        let session = try makeSession { $0.caFile = pki.root.certificateFile.path }
        defer { session.invalidateAndCancel() }
        let refusing = TrustDelegate(answer: .cancelAuthenticationChallenge)
        session.delegate = refusing
        let url = URL(string: server.url())!

        let refused = try await raw(session, Request(url: url))

        #expect(refused.error?.code == .serverTrustRejected)
        let challenge = try #require(refusing.seen.withLock { $0.first })
        #expect(challenge.kind == .serverTrust)
        #expect(challenge.port == server.port)
        #expect(challenge.policyVerdict?.isValid == true)

        // Default handling keeps the policy's verdict (trusted here).
        let accepting = TrustDelegate(answer: .performDefaultHandling)
        session.delegate = accepting
        let (_, response) = try await session.data(for: Request(url: url))
        #expect(response.statusCode == 200)
        #expect(accepting.seen.withLock { $0.count } == 1)
    }

    @Test("a delegate that does not opt in is never asked about server trust, and the policy decides")
    func delegateWithoutOptInIsNotAsked() async throws {
        let (server, pki) = try tlsServer()
        defer { server.stop() }
        let session = try makeSession { $0.caFile = pki.root.certificateFile.path }
        defer { session.invalidateAndCancel() }
        let silent = TrustDelegate(answer: .cancelAuthenticationChallenge, wants: false)
        session.delegate = silent

        let (_, response) = try await session.data(for: Request(url: URL(string: server.url())!))

        #expect(response.statusCode == 200)
        #expect(silent.seen.withLock { $0.isEmpty })
    }

    // MARK: - Item 8: reset

    @Test("reset: the next request opens a new connection and does not resume the TLS session")
    func resetDropsConnectionsAndTLSSessions() async throws {
        let (tls, pki) = try tlsServer(["-tls1_2"])
        defer { tls.stop() }
        let plain = try await TestServer.start()
        defer { plain.stop() }
        let session = try makeSession { $0.caFile = pki.root.certificateFile.path }
        defer { session.invalidateAndCancel() }
        let page = Request(url: URL(string: tls.url())!)
        func handshake() async throws -> String {
            let (body, _) = try await session.data(for: page)
            let text = String(decoding: body, as: UTF8.self)
            return text.contains("Reused,") ? "reused" : text.contains("New,") ? "new" : text
        }

        // s_server -www closes after each page: every request is a new TLS connection.
        #expect(try await handshake() == "new")
        #expect(try await handshake() == "reused")   // the control: sessions are resumed
        _ = try await session.data(for: Request(url: plain.url("/bytes/8")))
        _ = try await session.data(for: Request(url: plain.url("/bytes/8")))
        #expect(plain.acceptedConnections == 1)   // the control: the pooled connection is reused

        session.reset()

        #expect(try await handshake() == "new")
        _ = try await session.data(for: Request(url: plain.url("/bytes/8")))
        #expect(plain.acceptedConnections == 2)
    }

    @Test("invalidateSession(resetSession: true) closes the idle pooled connection")
    func invalidateWithReset() async throws {
        let plain = try await TestServer.start()
        defer { plain.stop() }
        let session = try makeSession()
        _ = try await session.data(for: Request(url: plain.url("/bytes/8")))
        #expect(plain.openConnections == 1)   // kept alive in the pool

        session.invalidateSession(cancelPendingTasks: false, resetSession: true)

        #expect(await Wait.poll(timeout: .seconds(10)) { plain.openConnections == 0 })
    }
}
