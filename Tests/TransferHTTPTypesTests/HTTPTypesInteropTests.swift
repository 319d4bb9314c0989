import Foundation
import HTTPTypes
import Testing
import TestSupport
import Transfer
import TransferHTTPTypes

/// Issue 28 item 6: Transfer beside swift-http-types. This file imports both
/// modules and uses every colliding or near-colliding name: unqualified where
/// the name is unique (`Request`, `HTTPHeaders`, `HTTPMethod`, `HTTPRequest`,
/// `HTTPFields`), the module-local typealias (`HTTPResponse`, see
/// SideBySideNames.swift), module-qualified names and Transfer's typealiases.
/// It compiling is half of the test.
@Suite("swift-http-types interop")
struct HTTPTypesInteropTests {
    @Test("the colliding names resolve: typealias, module-qualified and Transfer-prefixed")
    func namesResolveSideBySide() throws {
        let url = URL(string: "http://example.com/x")!
        let ours: TransferResponse = Transfer.HTTPResponse(url: url, statusCode: 201, headers: ["A": "1"])
        let theirs: HTTPResponse = HTTPTypes.HTTPResponse(status: .created)
        let alsoTheirs: HTTPTypes.HTTPResponse = theirs
        let request: Request = try Request("http://example.com/y")
        let sameRequest: TransferRequest = request
        let headers: HTTPHeaders = ["X": "1"]
        let sameHeaders: TransferHTTPHeaders = headers
        let method: HTTPMethod = .post
        let sameMethod: TransferHTTPMethod = method
        #expect(ours.statusCode == 201)
        #expect(alsoTheirs.status == .created)
        #expect(sameRequest == request)
        #expect(sameHeaders == headers)
        #expect(sameMethod == .post)
        #expect(TransferCertificate.self == Certificate.self)
    }

    @Test("header fields convert both ways: order, repeated names and the spelling of names kept")
    func headerFieldsRoundTrip() throws {
        var headers = HTTPHeaders()
        headers.add(name: "X-Trace-ID", value: "abc")
        headers.add(name: "accept", value: "text/plain")
        headers.add(name: "Set-Cookie", value: "a=1")
        headers.add(name: "Set-Cookie", value: "b=2")
        let fields = HTTPFields(headers)
        #expect(fields.count == 4)
        #expect(fields.map(\.name.rawName) == ["X-Trace-ID", "accept", "Set-Cookie", "Set-Cookie"])
        #expect(fields[values: .setCookie] == ["a=1", "b=2"])
        #expect(fields[.accept] == "text/plain")

        let back = HTTPHeaders(fields)
        #expect(back == headers)
        #expect(back.values(for: "set-cookie") == ["a=1", "b=2"])

        // A request's repeated name keeps all its fields when merged over the session's.
        let session = HTTPHeaders([("Set-Cookie", "session"), ("Accept", "*/*")])
        let merged = session.merging(back)
        #expect(merged.values(for: "set-cookie") == ["a=1", "b=2"])
        #expect(merged.values(for: "accept") == ["text/plain"])

        // A name that is not a token cannot be an HTTPField: it is left out.
        let odd = HTTPHeaders([("Bad Name", "x"), ("Good", "y")])
        #expect(HTTPFields(odd).map(\.name.rawName) == ["Good"])
    }

    @Test("methods convert both ways")
    func methods() {
        #expect(HTTPMethod(HTTPRequest.Method.patch) == .patch)
        #expect(HTTPRequest.Method(HTTPMethod.delete) == .delete)
        #expect(HTTPRequest.Method(HTTPMethod("PURGE"))?.rawValue == "PURGE")
        #expect(HTTPRequest.Method(HTTPMethod("BAD METHOD")) == nil)
    }

    @Test("an HTTPRequest with a body becomes a Request, and back")
    func requestConversions() throws {
        var fields = HTTPFields()
        fields[.contentType] = "application/json"
        fields.append(HTTPField(name: HTTPField.Name("X-Multi")!, value: "1"))
        fields.append(HTTPField(name: HTTPField.Name("X-Multi")!, value: "2"))
        let head = HTTPRequest(method: .put, scheme: "https", authority: "api.example.com:8443",
                               path: "/v1/items/7?dry-run=1&q=a%20b", headerFields: fields)
        let request = try Request(head, body: .data(Data("{}".utf8)))
        #expect(request.url.absoluteString == "https://api.example.com:8443/v1/items/7?dry-run=1&q=a%20b")
        #expect(request.method == .put)
        #expect(request.headers.values(for: "x-multi") == ["1", "2"])
        #expect(request.headers["Content-Type"] == "application/json")
        #expect(request.body == .data(Data("{}".utf8)))

        let again = HTTPRequest(request)
        #expect(again.method == .put)
        #expect(again.scheme == "https")
        #expect(again.authority == "api.example.com:8443")
        #expect(again.path == "/v1/items/7?dry-run=1&q=a%20b")
        #expect(again.headerFields == fields)
        #expect(request.httpTypesRequest == again)

        let serverSide = HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/x")
        #expect(throws: TransferError.self) { try Request(serverSide) }
    }

    @Test("responses convert both ways")
    func responseConversions() {
        let url = URL(string: "http://example.com/r")!
        let ours = Transfer.HTTPResponse(url: url, statusCode: 404,
                                         headers: HTTPHeaders([("Content-Type", "text/plain"), ("Vary", "A"), ("Vary", "B")]))
        let theirs = HTTPResponse(ours)
        #expect(theirs.status.code == 404)
        #expect(theirs.status.kind == .clientError)
        #expect(theirs.headerFields[values: .vary] == ["A", "B"])
        #expect(ours.httpTypesResponse == theirs)

        let back = TransferResponse(theirs, url: url)
        #expect(back == ours)
    }

    @Test("a request made from an HTTPRequest goes over a real socket; the response converts")
    func overLoopback() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }

        var fields = HTTPFields()
        fields.append(HTTPField(name: HTTPField.Name("X-Client-Case")!, value: "one"))
        fields.append(HTTPField(name: HTTPField.Name("X-Client-Case")!, value: "two"))
        let head = HTTPRequest(method: .get, scheme: "http", authority: "127.0.0.1:\(server.port)",
                               path: "/response-headers?X-Answer=42", headerFields: fields)
        let (data, response) = try await session.data(for: try Request(head))
        let converted = HTTPResponse(response)

        #expect(converted.status == .ok)
        #expect(converted.headerFields[HTTPField.Name("x-answer")!] == "42")
        #expect(String(decoding: data, as: UTF8.self) == "headers as asked\n")
        let recorded = try #require(server.requests.last)
        #expect(recorded.target == "/response-headers?X-Answer=42")
        // Sent as spelled, both values.
        #expect(recorded.headers.filter { $0.name == "X-Client-Case" }.map(\.value) == ["one", "two"])
    }
}
