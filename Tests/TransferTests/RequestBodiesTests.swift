import Foundation
import Testing
@testable import Transfer

private struct Login: Encodable {
    var user: String
    var password: String
}

private struct Reading: Encodable {
    var value: Double
}

@Suite("Request bodies per request")
struct RequestBodiesTests {
    @Test("withJSONBody encodes with the encoder, sets application/json, and turns a GET into a POST")
    func jsonBody() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys

        let request = try Request("https://example.com/login").withJSONBody(Login(user: "ada", password: "s"),
                                                                           encoder: encoder)

        #expect(request.method == .post)
        #expect(request.headers["Content-Type"] == "application/json")
        #expect(request.body == .data(Data(#"{"password":"s","user":"ada"}"#.utf8)))
    }

    @Test("a Content-Type already set and a method other than GET are kept")
    func keepsTypeAndMethod() throws {
        var base = try Request("https://example.com/items/1", method: .put)
        base.headers["Content-Type"] = "application/vnd.api+json"

        let request = try base.withJSONBody(Login(user: "ada", password: "s"))

        #expect(request.method == .put)
        #expect(request.headers["Content-Type"] == "application/vnd.api+json")
    }

    @Test("a value the encoder refuses throws invalidRequest with the encoder's error underneath")
    func unencodable() throws {
        let base = try Request("https://example.com/readings")

        do {
            _ = try base.withJSONBody(Reading(value: .nan))
            Issue.record("NaN was encoded")
        } catch {
            #expect(error.code == .invalidRequest)
            #expect(error.underlyingError is EncodingError)
        }
    }

    @Test("withFormBody makes a form body and leaves the request's other headers alone")
    func formBody() throws {
        var base = try Request("https://example.com/login")
        base.headers["X-Trace"] = "1"

        let request = try base.withFormBody(Login(user: "a d", password: "x&y"))

        #expect(request.method == .post)
        #expect(request.headers["Content-Type"] == "application/x-www-form-urlencoded")
        #expect(request.headers["X-Trace"] == "1")
        #expect(request.headers["Accept-Language"] == nil)
        guard case .data(let body) = request.body else {
            Issue.record("no form body")
            return
        }
        let pairs = Set(String(decoding: body, as: UTF8.self).split(separator: "&").map(String.init))
        #expect(pairs == ["user=a%20d", "password=x%26y"])
    }

    @Test("for DELETE, withFormBody puts the values in the query and sends no body")
    func formForDelete() throws {
        let request = try Request("https://example.com/items", method: .delete).withFormBody(Login(user: "ada", password: "s"))

        #expect(request.body == nil)
        #expect(request.url.query?.contains("user=ada") == true)
    }

    @Test("withMultipartBody sets the boundary type, the length and a streamed body")
    func multipartBody() throws {
        var form = MultipartFormData(boundary: "b0undary")
        form.append(formField: "ada", name: "user")

        let request = try Request("https://example.com/avatar").withMultipartBody(form)

        #expect(request.method == .post)
        #expect(request.headers["Content-Type"] == "multipart/form-data; boundary=b0undary")
        #expect(request.headers["Content-Length"] == String(form.contentLength))
        guard case .stream(_, let length) = request.body else {
            Issue.record("not a streamed body")
            return
        }
        #expect(length == form.contentLength)
    }

    @Test("an error thrown while building the form becomes invalidRequest, a TransferError stays itself")
    func multipartBuildErrors() throws {
        struct Refused: Error {}
        let base = try Request("https://example.com/avatar")

        do {
            _ = try base.withMultipartBody { _ in throw Refused() }
            Issue.record("the form was built")
        } catch {
            #expect(error.code == .invalidRequest)
            #expect(error.underlyingError is Refused)
        }
        let missing = URL(fileURLWithPath: "/nonexistent/avatar.png")
        var probe = MultipartFormData()
        let direct: TransferError?
        do {
            try probe.append(fileURL: missing, name: "avatar")
            direct = nil
        } catch {
            direct = error
        }
        do {
            _ = try base.withMultipartBody { form in try form.append(fileURL: missing, name: "avatar") }
            Issue.record("a missing file was appended")
        } catch {
            #expect(direct != nil)
            #expect(error.code == direct?.code)
            #expect(error.message == direct?.message)
        }
    }
}
