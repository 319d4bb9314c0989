import Dispatch
import Foundation
import TestSupport
import Testing
import Transfer

/// What `/echo` reports about the request it received.
private struct Echo: Decodable, Sendable {
    var method: String
    var path: String
    var target: String
    var query: [String: String]
    var headers: [String: String]
    var bodyLength: Int
    var bodySHA256: String

    enum CodingKeys: String, CodingKey {
        case method, path, target, query, headers
        case bodyLength = "body_length"
        case bodySHA256 = "body_sha256"
    }

    /// Re-decodes the default JSON serializer's value.
    init(_ value: (any Sendable)?) throws {
        guard let json = value as? JSONValue else { throw TransferError(.serializationFailed, "no JSON: \(value as Any)") }
        self = try JSONDecoder().decode(Echo.self, from: JSONEncoder().encode(json))
    }
}

/// The fixed object of `/json`.
private struct Fixture: Decodable, Sendable, Equatable {
    var name: String
    var numbers: [Int]
    var nested: [String: String]
    var ok: Bool
}

/// How a closure-based call ended, and on which queue.
private enum Outcome: Sendable {
    case success(DataTask, (any Sendable)?, onQueue: Bool)
    case failure(DataTask?, TransferError, onQueue: Bool)

    var value: (any Sendable)? {
        if case .success(_, let value, _) = self { return value }
        return nil
    }

    var error: TransferError? {
        if case .failure(_, let error, _) = self { return error }
        return nil
    }

    var onQueue: Bool {
        switch self {
        case .success(_, _, let onQueue), .failure(_, _, let onQueue): onQueue
        }
    }
}

@Suite("HTTPSessionManager against TestServer", .serialized)
struct HTTPSessionManagerIntegrationTests {
    let server: TestServer
    let manager: HTTPSessionManager
    let queue = DispatchQueue(label: "test.http.completion")
    let key = DispatchSpecificKey<Bool>()

    init() throws {
        server = try TestServer.start()
        var configuration = SessionConfiguration()
        configuration.timeoutIntervalForResource = 30
        manager = try HTTPSessionManager(baseURL: server.url("/"), configuration: configuration)
        queue.setSpecific(key: key, value: true)
        manager.completionQueue = queue
    }

    /// Calls `start` with success/failure closures and waits (bounded by the
    /// session's 30 s resource timeout) for one of them.
    private func call(
        _ start: (@escaping HTTPSessionManager.Success, @escaping HTTPSessionManager.Failure) -> DataTask?
    ) async -> (task: DataTask?, outcome: Outcome) {
        let key = self.key
        var returned: DataTask?
        let outcome = await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
            let once = Locked(false)
            let finish: @Sendable (Outcome) -> Void = { outcome in
                let first = once.withLock { done -> Bool in
                    defer { done = true }
                    return !done
                }
                if first { continuation.resume(returning: outcome) }
            }
            returned = start(
                { task, value in finish(.success(task, value, onQueue: DispatchQueue.getSpecific(key: key) == true)) },
                { task, error in finish(.failure(task, error, onQueue: DispatchQueue.getSpecific(key: key) == true)) })
        }
        return (returned, outcome)
    }

    private func finish() {
        manager.invalidateAndCancel()
        server.stop()
    }

    @Test("GET puts nested parameters in the query string and resumes the task it returns")
    func getWithNestedQuery() async throws {
        defer { finish() }
        let parameters: JSONValue = ["user": ["name": "ann", "tags": ["a", "b"]], "page": 2, "q": "a b/c?"]

        let (task, outcome) = await call { success, failure in
            let task = manager.GET("echo", parameters: parameters, success: success, failure: failure)
            #expect(task?.state != .suspended)
            return task
        }

        let echo = try Echo(outcome.value)
        #expect(echo.method == "GET")
        #expect(echo.target == "/echo?" + (try QueryString.string(from: parameters)))
        #expect(echo.query["user[name]"] == "ann")
        #expect(echo.query["q"] == "a b/c?")
        #expect(echo.target.contains("user%5Btags%5D%5B%5D=a&user%5Btags%5D%5B%5D=b"))
        #expect(echo.bodyLength == 0)
        #expect(task?.state == .completed)
        #expect(outcome.onQueue)
    }

    @Test("dataTask(method:path:) returns a suspended task that delivers once resumed")
    func suspendedDataTask() async throws {
        defer { finish() }

        let (task, outcome) = await call { success, failure in
            let task = manager.dataTask(method: .get, path: "json", success: success, failure: failure)
            #expect(task?.state == .suspended)
            #expect(server.requestCount == 0)
            task?.resume()
            return task
        }

        guard case .success(let delivered, let value, _) = outcome else {
            Issue.record("expected success, got \(outcome)")
            return
        }
        #expect(delivered === task)
        #expect((value as? JSONValue)?.objectValue?["name"] == "transfer")
    }

    @Test("GET reports download progress and POST upload progress up to the whole body")
    func progressClosures() async throws {
        defer { finish() }
        manager.responseSerializer = HTTPResponseSerializer()
        let downloaded = Locked<Int64>(0)
        let uploaded = Locked<Int64>(0)
        let size = 4_000_000
        let body = String(repeating: "x", count: 300_000)

        let get = await call { success, failure in
            manager.GET("bytes/\(size)?seed=2", progress: { progress in
                downloaded.withLock { $0 = max($0, progress.completedUnitCount) }
            }, success: success, failure: failure)
        }
        let post = await call { success, failure in
            manager.POST("upload", parameters: ["b": .string(body)], progress: { progress in
                uploaded.withLock { $0 = max($0, progress.completedUnitCount) }
            }, success: success, failure: failure)
        }

        let data = try #require(get.outcome.value as? Data)
        #expect(data == TestServer.bytes(seed: 2, count: size))
        #expect(post.outcome.error == nil)
        try await Wait.until("download progress at 100 %") { downloaded.withLock { $0 } == Int64(size) }
        try await Wait.until("upload progress at 100 %") { uploaded.withLock { $0 } == Int64(body.utf8.count + 2) }
    }

    @Test("success and failure are released once called, though the task lives on")
    func closuresReleasedAfterDelivery() async throws {
        defer { finish() }
        final class Token: Sendable {}
        var token: Token? = Token()
        weak let weakToken = token

        let (task, _) = await call { [token] success, failure in
            manager.GET("json", success: { task, value in _ = token; success(task, value) }, failure: failure)
        }
        token = nil

        #expect(task != nil)
        try await Wait.until("the success closure released") { weakToken == nil }
        #expect(task?.state == .completed)
    }

    @Test("POST sends form-encoded parameters with their Content-Type")
    func postForm() async throws {
        defer { finish() }

        let (_, outcome) = await call { success, failure in
            manager.POST("echo", parameters: ["a": 1, "b": "x y&z"], success: success, failure: failure)
        }

        let echo = try Echo(outcome.value)
        let body = "a=1&b=x%20y%26z"
        #expect(echo.method == "POST")
        #expect(echo.headers["content-type"] == "application/x-www-form-urlencoded")
        #expect(echo.bodyLength == body.utf8.count)
        #expect(echo.bodySHA256 == FileDigest.sha256(Data(body.utf8)))
    }

    @Test("POST with a JSON request serializer sends the JSON text of the parameters")
    func postJSON() async throws {
        defer { finish() }
        let serializer = JSONRequestSerializer()
        serializer.writingOptions = [.sortedKeys]
        manager.requestSerializer = serializer
        let parameters: JSONValue = ["name": "ann", "list": [1, 2, 3], "nested": ["ok": true]]

        let (_, outcome) = await call { success, failure in
            manager.POST("echo", parameters: parameters, success: success, failure: failure)
        }

        let echo = try Echo(outcome.value)
        let expected = try JSONRequestSerializer.encode(parameters, options: [.sortedKeys])
        #expect(echo.headers["content-type"] == "application/json")
        #expect(echo.bodyLength == expected.count)
        #expect(echo.bodySHA256 == FileDigest.sha256(expected))
    }

    @Test("PUT and PATCH send a form body, DELETE a query string")
    func putPatchDelete() async throws {
        defer { finish() }
        let body = "k=v%20w"

        let put = await call { manager.PUT("echo", parameters: ["k": "v w"], success: $0, failure: $1) }
        let patch = await call { manager.PATCH("echo", parameters: ["k": "v w"], success: $0, failure: $1) }
        let delete = await call { manager.DELETE("echo", parameters: ["k": "v w"], success: $0, failure: $1) }

        for (method, outcome) in [("PUT", put.outcome), ("PATCH", patch.outcome)] {
            let echo = try Echo(outcome.value)
            #expect(echo.method == method)
            #expect(echo.bodySHA256 == FileDigest.sha256(Data(body.utf8)))
            #expect(echo.query.isEmpty)
        }
        let echo = try Echo(delete.outcome.value)
        #expect(echo.method == "DELETE")
        #expect(echo.target == "/echo?k=v%20w")
        #expect(echo.bodyLength == 0)
    }

    @Test("per-call headers reach the server over the serializer's")
    func headersOverride() async throws {
        defer { finish() }
        manager.requestSerializer.setValue("serializer", forHTTPHeaderField: "X-Token")

        let (_, outcome) = await call { manager.GET("echo", headers: ["X-Token": "call"], success: $0, failure: $1) }

        let echo = try Echo(outcome.value)
        #expect(echo.headers["x-token"] == "call")
    }

    @Test("multipart POST streams a file part from disk; the server hashes exactly the body the request describes")
    func multipartFromDisk() async throws {
        defer { finish() }
        let directory = try TemporaryDirectory()
        let file = directory.file("photo.jpg")
        let size = 3 * 1024 * 1024 + 17
        try DeterministicBytes.write(seed: 9, count: size, to: file.path)

        let (task, outcome) = await call { success, failure in
            manager.POST("echo", parameters: ["album": 7, "tags": ["x", "y"]], constructingBody: { form in
                try form.append(fileURL: file, name: "photo")
                form.append(Data("hello".utf8), name: "note", fileName: "note.txt", mimeType: "text/plain")
            }, success: success, failure: failure)
        }

        // The request's body provider makes a fresh stream of the same bytes.
        let task1 = try #require(task)
        let copy = directory.file("body.bin")
        let bare = try await manager.requestSerializer.requestWithMultipartForm(task1.originalRequest,
                                                                          writingStreamContentsToFile: copy)
        let expectedLength = try #require(Int(bare.headers["Content-Length"] ?? ""))
        let echo = try Echo(outcome.value)
        #expect(task1 is UploadTask)
        #expect(echo.method == "POST")
        #expect(echo.headers["content-type"]?.hasPrefix("multipart/form-data; boundary=Boundary+") == true)
        #expect(echo.bodyLength == expectedLength)
        #expect(expectedLength > size)
        #expect(echo.bodySHA256 == (try FileDigest.sha256(of: copy)))
        #expect(task1.countOfBytesSent == Int64(expectedLength))
    }

    @Test("HEAD calls success with the task only; its response carries the head")
    func head() async throws {
        defer { finish() }

        let called = Locked(false)
        let (task, outcome) = await call { success, failure in
            manager.HEAD("echo", success: { task in called.withLock { $0 = true }; success(task, nil) },
                         failure: failure)
        }
        let missing = await call { success, failure in
            manager.HEAD("status/404", success: { success($0, nil) }, failure: failure)
        }

        #expect(called.withLock { $0 })
        #expect(outcome.error == nil)
        #expect(task?.response?.statusCode == 200)
        #expect(task?.response?.mimeType == "application/json")
        #expect(missing.outcome.error?.code == .unacceptableStatusCode)
        #expect(missing.outcome.error?.httpStatus == 404)
    }

    @Test("a 404 calls failure with the task, the status, the response and the body")
    func notFound() async throws {
        defer { finish() }

        let (task, outcome) = await call { manager.GET("status/404", success: $0, failure: $1) }

        guard case .failure(let failedTask, let error, let onQueue) = outcome else {
            Issue.record("expected a failure, got \(outcome)")
            return
        }
        #expect(failedTask === task)
        #expect(failedTask != nil)
        #expect(onQueue)
        #expect(error.code == .unacceptableStatusCode)
        #expect(error.httpStatus == 404)
        #expect(error.response?.statusCode == 404)
        #expect(error.responseData == Data("status 404\n".utf8))
    }

    @Test("a body that is not JSON fails serialization with the data attached")
    func invalidJSON() async throws {
        defer { finish() }
        var serializer = JSONResponseSerializer()
        serializer.acceptableContentTypes = nil
        manager.responseSerializer = serializer

        let (_, outcome) = await call { manager.GET("status/200", success: $0, failure: $1) }

        let error = try #require(outcome.error)
        #expect(error.code == .serializationFailed)
        #expect(error.responseData == Data("status 200\n".utf8))
        #expect(error.response?.statusCode == 200)
        #expect(error.underlyingError != nil)
        #expect(outcome.onQueue)
    }

    @Test("a header with CR LF sends nothing: no task, failure on the completion queue")
    func headerInjection() async throws {
        defer { finish() }

        let (task, outcome) = await call { success, failure in
            manager.GET("echo", headers: ["X-Evil": "1\r\nX-Injected: yes"], success: success, failure: failure)
        }

        guard case .failure(let failedTask, let error, let onQueue) = outcome else {
            Issue.record("expected a failure, got \(outcome)")
            return
        }
        #expect(task == nil)
        #expect(failedTask == nil)
        #expect(onQueue)
        #expect(error.code == .invalidRequest)
        #expect(server.requestCount == 0)
        #expect(manager.tasks.isEmpty)
    }

    @Test("a base URL with a path resolves relative and absolute paths on the server")
    func baseURLPathOnTheWire() async throws {
        defer { finish() }
        let nested = HTTPSessionManager(baseURL: server.url("/status"), session: manager.session)

        let relative = await call { nested.GET("404", success: $0, failure: $1) }
        let rooted = await call { nested.GET("/echo?x=1", success: $0, failure: $1) }

        #expect(nested.baseURL?.absoluteString.hasSuffix("/status/") == true)
        #expect(relative.outcome.error?.httpStatus == 404)
        #expect(try Echo(rooted.outcome.value).target == "/echo?x=1")
    }

    @Test("success and failure run on the completion queue, and a group brackets them")
    func completionQueueAndGroup() async throws {
        defer { finish() }
        let group = DispatchGroup()
        manager.completionGroup = group

        let ok = await call { manager.GET("json", success: $0, failure: $1) }
        let bad = await call { manager.GET("status/500", success: $0, failure: $1) }

        #expect(ok.outcome.onQueue)
        #expect(bad.outcome.onQueue)
        #expect(bad.outcome.error?.httpStatus == 500)
        #expect(group.wait(timeout: .now() + 5) == .success)
    }

    // MARK: async/await

    @Test("an async GET decodes the body as a Decodable type")
    func asyncDecodable() async throws {
        defer { finish() }

        let fixture = try await manager.get("json", as: Fixture.self)
        let echo = try await manager.post("echo", parameters: ["a": 1], as: [String: JSONValue].self)

        #expect(fixture == Fixture(name: "transfer", numbers: [1, 2, 3], nested: ["key": "value"], ok: true))
        #expect(echo["method"] == "POST")
        #expect(echo["body_length"] == 3)
    }

    @Test("async verbs return the response serializer's value with the response")
    func asyncSerialized() async throws {
        defer { finish() }

        let (value, response) = try await manager.get("json")
        let put = try await manager.put("echo", parameters: ["k": "v"])
        let patch = try await manager.patch("echo", parameters: ["k": "v"])
        let delete = try await manager.delete("echo", parameters: ["k": "v"])
        let head = try await manager.head("echo")

        #expect(value as? JSONValue == (try JSONResponseSerializer.parse(Data(TestServer.jsonBody.utf8))))
        #expect(response.statusCode == 200)
        #expect(try Echo(put.value).method == "PUT")
        #expect(try Echo(patch.value).method == "PATCH")
        #expect(try Echo(delete.value).target == "/echo?k=v")
        #expect(head.statusCode == 200)
    }

    @Test("async multipart POST uploads the streamed body")
    func asyncMultipart() async throws {
        defer { finish() }
        let data = DeterministicBytes.data(seed: 3, count: 100_000)

        let (value, _) = try await manager.post("upload", parameters: ["a": "b"]) { form in
            form.append(data, name: "blob", fileName: "blob.bin", mimeType: "application/octet-stream")
        }

        let object = try #require((value as? JSONValue)?.objectValue)
        #expect((object["length"]?.intValue ?? 0) > data.count)
    }

    @Test("an async 404 throws unacceptableStatusCode with the response and data attached")
    func asyncNotFound() async throws {
        defer { finish() }

        let decoded = await #expect(throws: TransferError.self) { try await manager.get("status/404", as: Fixture.self) }
        let plain = await #expect(throws: TransferError.self) { try await manager.get("status/404") }

        for error in [decoded, plain] {
            #expect(error?.code == .unacceptableStatusCode)
            #expect(error?.httpStatus == 404)
            #expect(error?.response?.statusCode == 404)
            #expect(error?.responseData == Data("status 404\n".utf8))
        }
    }

    @Test("async: a body of the wrong shape throws serializationFailed; a bad header throws before sending")
    func asyncFailures() async throws {
        defer { finish() }

        let shape = await #expect(throws: TransferError.self) { try await manager.get("json", as: [Int].self) }
        let header = await #expect(throws: TransferError.self) {
            try await manager.get("echo", headers: ["X-Evil": "a\rb"])
        }

        #expect(shape?.code == .serializationFailed)
        #expect(shape?.responseData == Data(TestServer.jsonBody.utf8))
        #expect(header?.code == .invalidRequest)
        #expect(server.requestCount == 1)
    }

    @Test("cancelling the Swift task cancels the transfer")
    func asyncCancellation() async throws {
        defer { finish() }

        let waiting = Task { try await manager.get("delay?ms=10000") }
        try await Wait.until("the request reached the server") { server.requestCount == 1 }
        waiting.cancel()
        let result = await waiting.result

        #expect(throws: TransferError.self) { try result.get() }
        if case .failure(let error as TransferError) = result { #expect(error.code == .cancelled) }
    }
}
