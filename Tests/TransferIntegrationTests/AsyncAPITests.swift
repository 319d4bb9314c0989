import Foundation
import Synchronization
import Testing
import TestSupport
import TransferFoundation
@testable import Transfer

/// `/echo`'s answer, the fields these tests read.
private struct Echo: Decodable, Sendable {
    var method: String
    var headers: [String: String]
    var body_length: Int
    var body_sha256: String
}

/// `/upload`'s answer.
private struct Uploaded: Decodable, Sendable {
    var length: Int64
    var sha256: String
}

/// `/json`'s body (TestServer.jsonBody).
private struct Sample: Decodable, Sendable, Equatable {
    struct Nested: Decodable, Sendable, Equatable { var key: String }
    var name: String
    var numbers: [Int]
    var nested: Nested
    var ok: Bool
}

private struct Login: Codable, Sendable {
    var user: String
    var password: String
    var remember: Bool
}

/// Runs `body` in its own task and waits for it with a deadline (no wait without one).
private func bounded<T: Sendable>(
    _ what: String, timeout: Duration = defaultDeadline, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let done = Completion<Result<T, any Error>>()
    let task = Task {
        do { done.fulfil(.success(try await body())) } catch { done.fulfil(.failure(error)) }
    }
    guard let result = await done.wait(timeout: timeout) else {
        task.cancel()
        throw DownloadTestError.timedOut(what)
    }
    return try result.get()
}

/// The error a throwing async call ends with, nil when it returned.
private func transferError(_ body: () async throws(TransferError) -> Void) async -> TransferError? {
    do throws(TransferError) {
        try await body()
        return nil
    } catch {
        return error
    }
}

private func sha256(_ data: Data) -> String { SHA256.hex(Array(data)) ?? "" }

/// An encoder whose output is the same every time (key order), so the bytes sent can be predicted.
private func sortedEncoder() -> JSONEncoder {
    let encoder = JSONEncoder()
    encoder.outputFormatting = .sortedKeys
    return encoder
}

@Suite("Async API: validated and decoded requests")
struct AsyncValidatedRequestTests {
    @Test("decodable(_:for:) validates and decodes JSON in one call, on the fast path")
    func decodesJSON() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }

        let sample = try await bounded("decodable") {
            try await session.decodable(Sample.self, for: Request(url: server.url("/json")))
        }

        let fastPathOpen = session.fastPathOpen.load(ordering: .relaxed)
        #expect(sample == Sample(name: "transfer", numbers: [1, 2, 3], nested: .init(key: "value"), ok: true))
        #expect(fastPathOpen)
    }

    @Test("a request held at the server makes no task: the fast path is kept")
    func keepsFastPath() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }

        let waiting = Task {
            try await session.value(for: Request(url: server.url("/whoami?gate=g")), using: StringResponseSerializer())
        }
        try await Wait.until("the request held at the gate", timeout: .seconds(10)) { server.heldAtGate("g") == 1 }
        let tasksWhileRunning = session.tasks.count
        server.openGate("g")
        let text = try await bounded("the held request") { try await waiting.value }

        #expect(tasksWhileRunning == 0)
        #expect(text == "for anonymous")
    }

    @Test("an error status throws unacceptableStatusCode with the response and body, without decoding")
    func rejectsErrorStatus() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }

        let error = try await bounded("decodable of a 404") {
            await transferError { () async throws(TransferError) in
                _ = try await session.decodable(Sample.self, for: Request(url: server.url("/status/404")))
            }
        }

        #expect(error?.code == .unacceptableStatusCode)
        #expect(error?.httpStatus == 404)
        #expect(error?.response?.statusCode == 404)
        #expect(error?.responseData == Data("status 404\n".utf8))
    }

    @Test("acceptable status codes are the caller's; a wrong content type throws unacceptableContentType")
    func statusAndContentType() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }

        let (data, response) = try await bounded("validatedData of a 404 allowed") {
            try await session.validatedData(for: Request(url: server.url("/status/404")),
                                            statusCodes: [404])
        }
        let wrongType = try await bounded("validatedData with JSON only") {
            await transferError { () async throws(TransferError) in
                _ = try await session.validatedData(for: Request(url: server.url("/status/200")),
                                                    contentTypes: ["application/json"])
            }
        }
        let badStatus = try await bounded("validatedData of a 503") {
            await transferError { () async throws(TransferError) in
                _ = try await session.validatedData(for: Request(url: server.url("/status/503")))
            }
        }

        // "status 200\n" as text/plain: refused by type by default; with any type
        // accepted it passes validation and the decoder refuses it instead.
        let refused = try await bounded("decodable of a plain-text body") {
            await transferError { () async throws(TransferError) in
                _ = try await session.decodable(Int.self, for: Request(url: server.url("/status/200")))
            }
        }
        let undecodable = try await bounded("decodable of a plain-text body, any type accepted") {
            await transferError { () async throws(TransferError) in
                _ = try await session.decodable(Int.self, for: Request(url: server.url("/status/200")),
                                                acceptableContentTypes: nil)
            }
        }

        #expect(response.statusCode == 404)
        #expect(data == Data("status 404\n".utf8))
        #expect(wrongType?.code == .unacceptableContentType)
        #expect(refused?.code == .unacceptableContentType)
        #expect(undecodable?.code == .serializationFailed)
        #expect(undecodable?.underlyingError is DecodingError)
        #expect(badStatus?.code == .unacceptableStatusCode)
        #expect(badStatus?.httpStatus == 503)
    }

    @Test("cancelling the awaiting Swift task cancels a decodable request")
    func cancellation() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }

        let waiting = Task {
            await transferError { () async throws(TransferError) in
                _ = try await session.decodable(Sample.self, for: Request(url: server.url("/whoami?gate=c")))
            }
        }
        try await Wait.until("the request held at the gate", timeout: .seconds(10)) { server.heldAtGate("c") == 1 }
        waiting.cancel()
        let error = try await bounded("the cancelled request") { await waiting.value }

        #expect(error?.code == .cancelled)
        try await Wait.until("the engine to drop the transfer", timeout: .seconds(10)) {
            session.engine.activeCount == 0
        }
    }
}

@Suite("Async API: bodies per request")
struct AsyncBodyTests {
    @Test("an Encodable POSTs as JSON and the response decodes, in one call")
    func postsEncodableAsJSON() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let login = Login(user: "ada", password: "secret", remember: true)
        let expected = try sortedEncoder().encode(login)

        let echo = try await bounded("JSON POST") {
            try await session.decodable(Echo.self,
                                        for: Request(url: server.url("/echo")).withJSONBody(login, encoder: sortedEncoder()))
        }

        #expect(echo.method == "POST")
        #expect(echo.headers["content-type"] == "application/json")
        #expect(echo.body_length == expected.count)
        #expect(echo.body_sha256 == sha256(expected))
    }

    @Test("one session sends a form body and a JSON body side by side")
    func formAndJSONOnOneSession() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let login = Login(user: "a d&a", password: "s=cret", remember: false)
        let request = Request(url: server.url("/echo"))
        let formRequest = try request.withFormBody(login)
        let jsonRequest = try request.withJSONBody(login, encoder: sortedEncoder())
        guard case .data(let expectedForm) = try #require(formRequest.body) else {
            Issue.record("the form body is not in memory")
            return
        }

        let (formEcho, jsonEcho) = try await bounded("both bodies") {
            async let form = session.decodable(Echo.self, for: formRequest)
            async let json = session.decodable(Echo.self, for: jsonRequest)
            return try await (form, json)
        }

        #expect(formEcho.headers["content-type"] == "application/x-www-form-urlencoded")
        #expect(formEcho.body_sha256 == sha256(expectedForm))
        #expect(String(decoding: expectedForm, as: UTF8.self).contains("user=a%20d%26a"))
        #expect(jsonEcho.headers["content-type"] == "application/json")
        #expect(jsonEcho.body_sha256 == sha256(try sortedEncoder().encode(login)))
    }

    @Test("an HTTPSessionManager with a form serializer POSTs JSON per call")
    func managerJSONPerCall() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let api = try HTTPSessionManager(baseURL: server.baseURL)
        defer { api.session.invalidateAndCancel() }
        let login = Login(user: "ada", password: "secret", remember: true)

        let json = try await bounded("JSON POST") { try await api.post("echo", json: login, as: Echo.self, encoder: sortedEncoder()) }
        let form = try await bounded("form POST") {
            try await api.post("echo", parameters: ["user": "ada"], as: Echo.self)
        }

        #expect(json.method == "POST")
        #expect(json.headers["content-type"] == "application/json")
        #expect(json.body_sha256 == sha256(try sortedEncoder().encode(login)))
        #expect(form.headers["content-type"] == "application/x-www-form-urlencoded")
        #expect(form.body_length == "user=ada".utf8.count)
    }

    @Test("a multipart upload through SessionManager streams the whole form, file part included")
    func multipartUpload() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let file = directory.file("avatar.bin")
        try TestServer.bytes(seed: 9, count: 300_000).write(to: file)
        var form = MultipartFormData(boundary: "transfer-async-test")
        form.append(formField: "ada", name: "user")
        try form.append(fileURL: file, name: "avatar")
        let expected = try readAll(form.makeStream())
        let sent = form

        let (data, response) = try await bounded("multipart upload") {
            try await session.upload(multipartFormData: sent, for: Request(url: server.url("/upload")))
        }
        let decoded = try await bounded("decoded multipart upload") {
            try await session.decodable(Uploaded.self, for: Request(url: server.url("/upload")).withMultipartBody {
                form in
                form = MultipartFormData(boundary: "transfer-async-test")
                form.append(formField: "ada", name: "user")
                try form.append(fileURL: file, name: "avatar")
            })
        }
        let uploaded = try JSONDecoder().decode(Uploaded.self, from: data)

        #expect(response.statusCode == 200)
        #expect(uploaded.length == form.contentLength)
        #expect(uploaded.sha256 == sha256(expected))
        #expect(decoded.sha256 == sha256(expected))
        let head = try #require(server.requests.last)
        #expect(head.method == "POST")
        #expect(head.header("content-type") == "multipart/form-data; boundary=transfer-async-test")
    }

    private func readAll(_ stream: InputStream) throws -> Data {
        stream.open()
        defer { stream.close() }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = stream.read(&buffer, maxLength: buffer.count)
            if count < 0 { throw stream.streamError ?? DownloadTestError.timedOut("stream read") }
            if count == 0 { return data }
            data.append(buffer, count: count)
        }
    }
}

@Suite("Async API: downloads")
struct AsyncDownloadTests {
    @Test("progress is an async sequence beside the result, ending at the full size")
    func progressBesideResult() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let size = 4 << 20
        let directory = try TemporaryDirectory()
        let destination = directory.file("sub/out.bin")

        let download = session.download(Request(url: server.url("/bytes/\(size)?seed=11")), to: destination)
        let seen = try await bounded("the progress sequence") { () -> [Int64] in
            var seen: [Int64] = []
            for await progress in download.progress { seen.append(progress.completedUnitCount) }
            return seen
        }
        let (file, response) = try await bounded("the download") { try await download.value }
        let again = try await bounded("the result, awaited again") { await download.result }

        #expect(response.statusCode == 200)
        #expect(file == destination)
        #expect(try FileDigest.sha256(of: file) == TestServer.sha256(seed: 11, count: size))
        #expect(seen.last == Int64(size))
        #expect(seen == seen.sorted())
        #expect((try? again.get())?.url == destination)
    }

    @Test("cancel with resume data, then download(resumingWith:to:) continues with Range and is exact")
    func cancelAndResume() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let size = 16 << 20
        let url = server.url("/bytes/\(size)?seed=12")
        let directory = try TemporaryDirectory()
        let destination = directory.file("out.bin")

        let first = session.download(Request(url: url), to: destination)
        // The engine's token bucket keeps the first attempt slow, so it is mid-body when cancelled.
        first.task.setSpeedLimit(receive: 1 << 20)
        let reached = try await bounded("1 MiB of progress") { () -> Bool in
            for await progress in first.progress where progress.completedUnitCount >= 1 << 20 { return true }
            return false
        }
        let produced = try await bounded("the resume data") { await first.cancelProducingResumeData() }
        let resumeData = try #require(produced)
        let firstError = try await bounded("the cancelled download") {
            await transferError { () async throws(TransferError) in _ = try await first.value }
        }
        let second = try session.download(resumingWith: resumeData, to: destination)
        let (file, response) = try await bounded("the resumed download") { try await second.value }

        #expect(reached)
        #expect(firstError?.code == .cancelled)
        #expect(response.statusCode == 206)
        #expect(try FileDigest.sha256(of: file) == TestServer.sha256(seed: 12, count: size))
        let range = try #require(server.requests.last?.header("range"))
        let offset = try #require(Int64(range.dropFirst("bytes=".count).dropLast()))
        #expect(offset >= 1 << 20)
        #expect(server.requests.last?.header("if-range") == TestServer.etag(seed: 12, count: size))
    }

    @Test("bad resume data throws invalidResumeData at once")
    func badResumeData() throws {
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let destination = directory.file("out.bin")

        #expect(throws: TransferError.self) {
            _ = try session.download(resumingWith: Data("not json".utf8), to: destination)
        }
        do {
            _ = try session.download(resumingWith: Data(#"{"format":"other","version":1}"#.utf8), to: destination)
            Issue.record("foreign resume data was accepted")
        } catch {
            #expect(error.code == .invalidResumeData)
        }
    }

    @Test("cancelling the Swift task that awaits value cancels the download")
    func swiftTaskCancellation() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let directory = try TemporaryDirectory()
        let destination = directory.file("out.bin")

        let download = session.download(Request(url: server.url("/hold/200000?gate=d")), to: destination)
        let waiting = Task {
            await transferError { () async throws(TransferError) in _ = try await download.value }
        }
        try await Wait.until("the download held at the gate", timeout: .seconds(10)) { server.heldAtGate("d") == 1 }
        waiting.cancel()
        let error = try await bounded("the cancelled download") { await waiting.value }
        let ended = try await bounded("the progress sequence to end") { () -> Bool in
            for await _ in download.progress {}
            return true
        }

        #expect(error?.code == .cancelled)
        #expect(ended)
        #expect(download.task.state == .completed)
        #expect(!FileManager.default.fileExists(atPath: destination.path))
    }
}
