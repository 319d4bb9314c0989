import Dispatch
import Foundation
import TestSupport
import Testing

@testable import Transfer

@Suite("HTTPSessionManager: base URL and request building (no sockets)")
struct HTTPSessionManagerTests {
    private static func base(_ string: String) -> URL {
        HTTPSessionManager.normalizedBaseURL(URL(string: string)!)
    }

    private static func resolved(_ path: String, against base: String?) -> String? {
        HTTPSessionManager.resolve(path, against: base.map(Self.base))?.absoluteString
    }

    @Test("a base URL with a non-empty path gets a trailing slash, other base URLs are kept")
    func baseURLNormalization() throws {
        let table: [(String, String)] = [
            ("http://h/v1", "http://h/v1/"),
            ("http://h/v1/", "http://h/v1/"),
            ("http://h/a/b", "http://h/a/b/"),
            ("http://h", "http://h"),
            ("http://h/", "http://h/"),
            ("https://h:8443/v1", "https://h:8443/v1/"),
            ("http://h/v1?key=1", "http://h/v1/?key=1"),
        ]

        for (given, expected) in table {
            #expect(Self.base(given).absoluteString == expected, "base \(given)")
        }
        let manager = try HTTPSessionManager(baseURL: URL(string: "http://h/v1"))
        defer { manager.invalidateAndCancel() }
        #expect(manager.baseURL?.absoluteString == "http://h/v1/")
    }

    @Test("paths resolve against http://h/v1 as NSURL's URLWithString:relativeToURL: does")
    func classicResolutionTable() {
        // AFNetworking's documented table, for a base without and with its trailing slash.
        let table: [(String, String)] = [
            ("foo", "http://h/v1/foo"),
            ("foo?bar=baz", "http://h/v1/foo?bar=baz"),
            ("/foo", "http://h/foo"),
            ("foo/", "http://h/v1/foo/"),
            ("/foo/", "http://h/foo/"),
            ("http://other/x", "http://other/x"),
            ("//other/x", "http://other/x"),
            ("../foo", "http://h/foo"),
            ("?q=1", "http://h/v1/?q=1"),
            ("", "http://h/v1/"),
        ]

        for base in ["http://h/v1", "http://h/v1/"] {
            for (path, expected) in table {
                #expect(Self.resolved(path, against: base) == expected, "\(base) + \(path.debugDescription)")
            }
        }
    }

    @Test("a base URL with an empty path resolves relative paths from the root")
    func emptyBasePath() {
        #expect(Self.resolved("foo", against: "http://h") == "http://h/foo")
        #expect(Self.resolved("/foo", against: "http://h") == "http://h/foo")
        #expect(Self.resolved("foo?bar=baz", against: "http://h/") == "http://h/foo?bar=baz")
        #expect(Self.resolved("", against: "http://h") == "http://h")
    }

    @Test("without a base URL only absolute URLs make requests")
    func noBaseURL() throws {
        let manager = try HTTPSessionManager(baseURL: nil)
        defer { manager.invalidateAndCancel() }

        let absolute = try manager.request(method: .get, path: "http://other/x")
        #expect(absolute.url.absoluteString == "http://other/x")
        #expect(throws: TransferError.self) { try manager.request(method: .get, path: "foo") }
        #expect(manager.url(for: "") == nil)
    }

    @Test("paths that make no http(s) URL are refused with invalidRequest")
    func badURLs() throws {
        let manager = try HTTPSessionManager(baseURL: URL(string: "http://h/v1"))
        defer { manager.invalidateAndCancel() }

        for path in ["http://[::1", "ftp://h/file", "file:///etc/passwd"] {
            let error = #expect(throws: TransferError.self) { try manager.request(method: .get, path: path) }
            #expect(error?.code == .invalidRequest, "\(path)")
        }
    }

    @Test("per-call headers replace the serializer's headers of the same name")
    func headersOverrideSerializer() throws {
        let manager = try HTTPSessionManager(baseURL: URL(string: "http://h/"))
        defer { manager.invalidateAndCancel() }
        manager.requestSerializer.setValue("serializer", forHTTPHeaderField: "X-Token")
        manager.requestSerializer.setValue("kept", forHTTPHeaderField: "X-Other")

        let request = try manager.request(method: .get, path: "p", headers: ["x-token": "call", "X-New": "1"])

        #expect(request.headers["X-Token"] == "call")
        #expect(request.headers.filter { $0.name.lowercased() == "x-token" }.count == 1)
        #expect(request.headers["X-Other"] == "kept")
        #expect(request.headers["X-New"] == "1")
        #expect(request.headers["User-Agent"] != nil)
    }

    @Test("a CR or LF in a per-call header value is refused, not sent")
    func headerInjectionRefused() throws {
        let manager = try HTTPSessionManager(baseURL: URL(string: "http://h/"))
        defer { manager.invalidateAndCancel() }

        let error = #expect(throws: TransferError.self) {
            try manager.request(method: .get, path: "p", headers: ["X-Evil": "a\r\nInjected: 1"])
        }
        #expect(error?.code == .invalidRequest)
    }

    @Test("a request serializer swapped in builds the next request (JSON body for POST)")
    func swappingRequestSerializer() throws {
        let manager = try HTTPSessionManager(baseURL: URL(string: "http://h/"))
        defer { manager.invalidateAndCancel() }
        #expect(manager.responseSerializer is JSONResponseSerializer)

        let form = try manager.request(method: .post, path: "p", parameters: ["a": 1])
        manager.requestSerializer = JSONRequestSerializer()
        let json = try manager.request(method: .post, path: "p", parameters: ["a": 1])

        #expect(form.headers["Content-Type"] == "application/x-www-form-urlencoded")
        #expect(form.body == .data(Data("a=1".utf8)))
        #expect(json.headers["Content-Type"] == "application/json")
        #expect(json.body == .data(Data(#"{"a":1}"#.utf8)))
    }

    @Test("multipart requests refuse GET and HEAD")
    func multipartNeedsABody() throws {
        let manager = try HTTPSessionManager(baseURL: URL(string: "http://h/"))
        defer { manager.invalidateAndCancel() }

        for method in [HTTPMethod.get, .head] {
            let error = #expect(throws: TransferError.self) {
                try manager.multipartFormRequest(method: method, path: "upload") { form in
                    form.append(formData: Data("x".utf8), name: "f")
                }
            }
            #expect(error?.code == .invalidRequest)
        }
        let post = try manager.multipartFormRequest(path: "upload") { form in form.append(formData: Data("x".utf8), name: "f") }
        #expect(post.headers["Content-Type"]?.hasPrefix("multipart/form-data; boundary=") == true)
    }

    @Test("a pinning security policy needs an https base URL; no pinning is always accepted")
    func securityPolicyValidation() throws {
        let plain = try HTTPSessionManager(baseURL: URL(string: "http://h/v1"))
        defer { plain.invalidateAndCancel() }
        let secure = try HTTPSessionManager(baseURL: URL(string: "https://h/v1"))
        defer { secure.invalidateAndCancel() }

        let error = #expect(throws: TransferError.self) { try plain.validateSecurityPolicy(pinning: true) }
        #expect(error?.code == .invalidRequest)
        #expect(throws: TransferError.self) { try HTTPSessionManager.validateSecurityPolicy(pinning: true, baseURL: nil) }
        try plain.validateSecurityPolicy(pinning: false)
        try secure.validateSecurityPolicy(pinning: true)
        try HTTPSessionManager.validateSecurityPolicy(pinning: true, baseURL: URL(string: "HTTPS://h"))
    }

    @Test("a request that cannot be built returns nil and calls failure later, on the completion queue")
    func buildFailureIsAsynchronous() async throws {
        let manager = try HTTPSessionManager(baseURL: URL(string: "http://h/"))
        defer { manager.invalidateAndCancel() }
        let queue = DispatchQueue(label: "test.completion")
        let key = DispatchSpecificKey<Bool>()
        queue.setSpecific(key: key, value: true)
        manager.completionQueue = queue
        let calls = Locked<[(hasTask: Bool, code: TransferError.Code, onQueue: Bool)]>([])
        let record: HTTPSessionManager.Failure = { task, error in
            calls.withLock { $0.append((task != nil, error.code, DispatchQueue.getSpecific(key: key) == true)) }
        }

        // Held queue: a failure called synchronously would be recorded before it is released.
        queue.suspend()
        let get = manager.GET("p", headers: ["X-Evil": "a\nb"], success: { _, _ in }, failure: record)
        let multipart = manager.POST("p", constructingBody: { form in
            try form.append(fileURL: URL(fileURLWithPath: "/nonexistent/file.bin"), name: "f")
        }, failure: record)
        let delete = manager.DELETE("ftp://h/x", failure: record)
        let heldCount = calls.withLock { $0.count }
        queue.resume()

        #expect(get == nil && multipart == nil && delete == nil)
        #expect(heldCount == 0)
        try await Wait.until("three failures") { calls.withLock { $0.count == 3 } }
        let recorded = calls.withLock { $0 }
        #expect(recorded.allSatisfy { !$0.hasTask && $0.onQueue })
        #expect(recorded.map(\.code).allSatisfy { $0 == .invalidRequest || $0 == .fileError })
        #expect(manager.tasks.isEmpty)
    }

    @Test("a verb on an invalidated session calls failure with its task and sessionInvalidated")
    func invalidatedSession() async throws {
        let manager = try HTTPSessionManager(baseURL: URL(string: "http://127.0.0.1:9/"))
        manager.invalidateAndCancel()
        let result = Locked<(task: DataTask?, code: TransferError.Code)?>(nil)

        let task = manager.GET("p", success: { _, _ in }, failure: { task, error in
            result.withLock { $0 = (task, error.code) }
        })

        try await Wait.until("the failure") { result.withLock { $0 != nil } }
        let (failedTask, code) = try #require(result.withLock { $0 })
        #expect(task != nil)
        #expect(failedTask === task)
        #expect(code == .sessionInvalidated)
    }

    @Test("serializers can be swapped from many threads at once")
    func serializerPropertiesAreThreadSafe() throws {
        let manager = try HTTPSessionManager(baseURL: URL(string: "http://h/"))
        defer { manager.invalidateAndCancel() }
        let json = JSONRequestSerializer()

        DispatchQueue.concurrentPerform(iterations: 400) { index in
            if index.isMultiple(of: 2) {
                manager.requestSerializer = json
                manager.responseSerializer = HTTPResponseSerializer()
            } else {
                _ = try? manager.request(method: .post, path: "p", parameters: ["i": .int(index)])
                _ = manager.responseSerializer.acceptableStatusCodes
            }
        }

        #expect(manager.requestSerializer === json)
        #expect(manager.responseSerializer is HTTPResponseSerializer)
    }
}

@Suite("HTTPSessionManager security policy")
struct HTTPSessionManagerSecurityPolicyTests {
    @Test("a pinning policy on a manager without an https base URL is an error, not a crash")
    func pinningNeedsHTTPS() throws {
        let plain = try HTTPSessionManager(baseURL: URL(string: "http://example.com/api"))
        defer { plain.invalidateAndCancel() }
        let secure = try HTTPSessionManager(baseURL: URL(string: "https://example.com/api"))
        defer { secure.invalidateAndCancel() }
        let pinning = SecurityPolicy.policy(pinningMode: .certificate)

        #expect(throws: TransferError.self) { try plain.setSecurityPolicy(pinning) }
        #expect(plain.securityPolicy.pinningMode == .none)
        try secure.setSecurityPolicy(pinning)
        #expect(secure.securityPolicy.pinningMode == .certificate)
    }
}
