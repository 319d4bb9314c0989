import Foundation
import Testing
import TransferFoundation

@testable import Transfer

@Suite("Request.curlDescription and Encodable parameters (no sockets)")
struct RequestDescriptionAndEncodableTests {
    @Test("a plain GET is `curl URL`; HEAD, PUT and a GET with a body say their method")
    func methods() throws {
        let url = URL(string: "https://example.com/a?b=1&c=2")!
        #expect(Request(url: url).curlDescription() == "curl 'https://example.com/a?b=1&c=2'")
        #expect(Request(url: url, method: .head).curlDescription() == "curl --head 'https://example.com/a?b=1&c=2'")
        #expect(
            Request(url: url, method: .put, body: .data(Data("x".utf8))).curlDescription()
                == "curl -X PUT --data-binary x 'https://example.com/a?b=1&c=2'")
        #expect(
            Request(url: url, method: .get, body: .data(Data("x".utf8))).curlDescription()
                == "curl -X GET --data-binary x 'https://example.com/a?b=1&c=2'")
        #expect(
            Request(url: url, method: .post, body: .data(Data("x".utf8))).curlDescription()
                == "curl --data-binary x 'https://example.com/a?b=1&c=2'")
    }

    @Test("credentials are redacted by default: Authorization, Proxy-Authorization, Cookie, URL password")
    func redaction() throws {
        var request = Request(url: URL(string: "https://ann:s3cret@example.com/")!)
        request.headers["Authorization"] = "Bearer t0ken"
        request.headers["proxy-authorization"] = "Basic abc"
        request.headers["Cookie"] = "sid=42"
        request.headers["X-Trace"] = "visible"
        let redacted = request.curlDescription()
        for secret in ["t0ken", "abc", "sid=42", "s3cret"] {
            #expect(!redacted.contains(secret), "\(secret) leaked: \(redacted)")
        }
        #expect(redacted.contains("'X-Trace: visible'"))
        #expect(redacted.contains("'Authorization: <redacted>'"))
        #expect(redacted.contains("ann:%3Credacted%3E@example.com"))
        let plain = request.curlDescription(redactingCredentials: false)
        for secret in ["t0ken", "abc", "sid=42", "s3cret"] { #expect(plain.contains(secret)) }
    }

    @Test("shell quoting survives quotes, spaces and newlines; binary and stream bodies are described, not printed")
    func quotingAndBodies() throws {
        #expect(Request.shellQuoted("it's a test") == #"'it'\''s a test'"#)
        #expect(Request.shellQuoted("") == "''")
        #expect(Request.shellQuoted("plain-word_1.2") == "plain-word_1.2")
        let url = URL(string: "http://h/")!
        let binary = Request(url: url, method: .post, body: .data(Data([0, 255, 1]))).curlDescription()
        #expect(binary.hasSuffix("# body: 3 bytes of binary data, not shown"))
        let stream = Request(
            url: url, method: .post, body: .stream(BodyStreamProvider { nil }, length: nil)
        ).curlDescription()
        #expect(stream.contains("# body: a stream of unknown length, not shown"))
        let file = Request(url: url, method: .post, body: .file(URL(fileURLWithPath: "/tmp/a b"))).curlDescription()
        #expect(file == "curl --data-binary '@/tmp/a b' http://h/")
        let at = Request(url: url, method: .post, body: .data(Data("@/etc/passwd".utf8))).curlDescription()
        #expect(at == "curl --data-raw @/etc/passwd http://h/")
    }

    struct Search: Encodable {
        var q: String
        var page: Int
        var tags: [String]
        var exact: Bool
        var since: Date
    }

    @Test("Encodable parameters go through the query, form and JSON serializers")
    func encodableParameters() throws {
        let search = Search(q: "café au lait", page: 2, tags: ["a", "b"], exact: true, since: Date(timeIntervalSince1970: 0))
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        let value = try JSONValue(encoding: search, encoder: encoder)
        #expect(value["page"] == .int(2))
        #expect(value["since"] == .string("1970-01-01T00:00:00Z"))

        let get = try HTTPRequestSerializer().request(
            method: .get, urlString: "https://example.com/s", parameters: value)
        let query = try #require(get.url.query)
        #expect(query.contains("q=caf%C3%A9%20au%20lait"))
        #expect(query.contains("page=2"))

        let form = try HTTPRequestSerializer().request(
            bySerializing: Request(url: URL(string: "https://example.com/s")!, method: .post), encodable: search)
        guard case .data(let formBody)? = form.body else { Issue.record("no form body"); return }
        let formText = String(decoding: formBody, as: UTF8.self)
        #expect(formText.contains("exact=1"))   // AFNetworking's spelling of a boolean
        #expect(formText.contains("tags%5B%5D=a"))

        let json = try JSONRequestSerializer().request(
            bySerializing: Request(url: URL(string: "https://example.com/s")!, method: .post), encodable: search)
        guard case .data(let jsonBody)? = json.body else { Issue.record("no JSON body"); return }
        let decoded = try JSONDecoder().decode(JSONValue.self, from: jsonBody)
        #expect(decoded["q"] == .string("café au lait"))
        #expect(decoded["tags"] == .array(["a", "b"]))
    }

    @Test("a value the encoder refuses is an invalidRequest with the encoder's error underneath")
    func unencodable() throws {
        struct Bad: Encodable { var x = Double.nan }
        let error = #expect(throws: TransferError.self) { try JSONValue(encoding: Bad()) }
        #expect(error?.code == .invalidRequest)
        #expect(error?.underlyingError is EncodingError)
    }
}
