import Foundation
import Testing

@testable import Transfer
import TransferFoundation

@Suite("HTTP request serializer")
struct SerializationRequestTests {
    private func bodyString(_ request: Request) -> String? {
        guard case .data(let data)? = request.body else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    @Test("GET, HEAD and DELETE put parameters in the query string and send no body")
    func uriMethods() throws {
        let serializer = HTTPRequestSerializer()
        for method in [HTTPMethod.get, .head, .delete] {
            let request = try serializer.request(
                method: method, urlString: "https://example.com/search", parameters: ["q": "a b", "page": 2])

            #expect(request.url.absoluteString == "https://example.com/search?page=2&q=a%20b")
            #expect(request.body == nil)
            #expect(request.headers["Content-Type"] == nil)
            #expect(request.method == method)
        }
    }

    @Test("an existing query is extended with & and a fragment stays last")
    func appendingToExistingQuery() throws {
        let serializer = HTTPRequestSerializer()

        let extended = try serializer.request(method: .get, urlString: "http://h/p?x=1", parameters: ["y": 2])
        let fragment = try serializer.request(method: .get, urlString: "http://h/p?x=1#top", parameters: ["y": 2])
        let bare = try serializer.request(method: .get, urlString: "http://h/p?", parameters: ["y": 2])
        let none = try serializer.request(method: .get, urlString: "http://h/p", parameters: [:])

        #expect(extended.url.absoluteString == "http://h/p?x=1&y=2")
        #expect(fragment.url.absoluteString == "http://h/p?x=1&y=2#top")
        #expect(bare.url.absoluteString == "http://h/p?y=2")
        #expect(none.url.absoluteString == "http://h/p")
    }

    @Test("other methods send a form body with Content-Type only when none is set")
    func formBody() throws {
        let serializer = HTTPRequestSerializer()

        let post = try serializer.request(
            method: .post, urlString: "http://h/p", parameters: ["b": "2 3", "a": ["x": true]])
        #expect(post.url.absoluteString == "http://h/p")
        #expect(bodyString(post) == "a%5Bx%5D=1&b=2%203")
        #expect(post.headers["Content-Type"] == "application/x-www-form-urlencoded")

        serializer.setValue("text/plain", forHTTPHeaderField: "Content-Type")
        let put = try serializer.request(method: .put, urlString: "http://h/p", parameters: ["a": 1])
        #expect(put.headers["Content-Type"] == "text/plain")
        #expect(bodyString(put) == "a=1")

        var preset = Request(url: URL(string: "http://h/p")!, method: .patch)
        preset.headers["content-type"] = "application/x-custom"
        let patched = try HTTPRequestSerializer().request(bySerializing: preset, parameters: ["a": 1])
        #expect(patched.headers.values(for: "Content-Type") == ["application/x-custom"])
    }

    @Test("a body method without parameters sends an empty form body")
    func emptyFormBody() throws {
        let request = try HTTPRequestSerializer().request(method: .post, urlString: "http://h/p")
        #expect(bodyString(request) == "")
        #expect(request.headers["Content-Type"] == "application/x-www-form-urlencoded")
    }

    @Test("the set of query-string methods is configurable")
    func configurableURIMethods() throws {
        let serializer = HTTPRequestSerializer()
        serializer.httpMethodsEncodingParametersInURI = [.get, .post]

        let delete = try serializer.request(method: .delete, urlString: "http://h/p", parameters: ["a": 1])
        let post = try serializer.request(method: .post, urlString: "http://h/p", parameters: ["a": 1])

        #expect(bodyString(delete) == "a=1")
        #expect(delete.url.query == nil)
        #expect(post.url.query == "a=1")
        #expect(post.body == nil)
    }

    @Test("a custom query-string serialization replaces the built-in one and its errors are wrapped")
    func customQuerySerialization() throws {
        struct Refused: Error {}
        let serializer = HTTPRequestSerializer()
        serializer.queryStringSerialization = { request, parameters in
            "method=\(request.method.rawValue)&count=\(parameters.objectValue?.count ?? -1)"
        }

        let get = try serializer.request(method: .get, urlString: "http://h/p", parameters: ["a": 1, "b": 2])
        let post = try serializer.request(method: .post, urlString: "http://h/p", parameters: ["a": 1])
        #expect(get.url.absoluteString == "http://h/p?method=GET&count=2")
        #expect(bodyString(post) == "method=POST&count=1")

        serializer.queryStringSerialization = { _, _ in throw Refused() }
        let error = #expect(throws: TransferError.self) {
            try serializer.request(method: .get, urlString: "http://h/p", parameters: ["a": 1])
        }
        #expect(error?.code == .invalidRequest)
        #expect(error?.underlyingError is Refused)
    }

    @Test("header values with CR or LF and invalid header names are refused")
    func headerInjection() throws {
        for (name, value) in [
            ("X-Test", "a\r\nX-Evil: 1"), ("X-Test", "a\nb"), ("Bad Name", "v"), ("", "v"),
            ("X:Colon", "v"),
        ] {
            let serializer = HTTPRequestSerializer()
            serializer.setValue(value, forHTTPHeaderField: name)

            let error = #expect(throws: TransferError.self) {
                try serializer.request(method: .get, urlString: "http://h/p")
            }
            #expect(error?.code == .invalidRequest)
        }
        let perCall = #expect(throws: TransferError.self) {
            try HTTPRequestSerializer().request(method: .get, urlString: "http://h/p", headers: ["X-A": "1\r\n2"])
        }
        #expect(perCall?.code == .invalidRequest)
        let json = JSONRequestSerializer()
        json.setValue("x\ry", forHTTPHeaderField: "X-A")
        #expect(throws: TransferError.self) {
            try json.request(method: .post, urlString: "http://h/p", parameters: [:])
        }
    }

    @Test("default headers are set unless the request or the call sets them, and nil removes one")
    func defaultHeaders() throws {
        let serializer = HTTPRequestSerializer()
        serializer.setValue("1", forHTTPHeaderField: "X-One")
        serializer.setValue("2", forHTTPHeaderField: "X-Two")
        serializer.setValue(nil, forHTTPHeaderField: "X-Two")

        let request = try serializer.request(
            method: .get, urlString: "http://h/p", headers: ["User-Agent": "custom", "X-Call": "c"])

        #expect(request.headers["X-One"] == "1")
        #expect(request.headers["X-Two"] == nil)
        #expect(request.headers["X-Call"] == "c")
        #expect(request.headers.values(for: "User-Agent") == ["custom"])
        #expect(request.headers["Accept-Language"] == serializer.value(forHTTPHeaderField: "Accept-Language"))
    }

    @Test("basic authorization is set in base64 of user:password and cleared")
    func basicAuthorization() throws {
        let serializer = HTTPRequestSerializer()
        serializer.setAuthorizationHeader(username: "Aladdin", password: "open sesame")
        #expect(
            try serializer.request(method: .get, urlString: "http://h/").headers["Authorization"]
                == "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==")

        serializer.setAuthorizationHeader(username: "ü", password: "p:w")
        #expect(serializer.value(forHTTPHeaderField: "Authorization") == "Basic w7w6cDp3")

        serializer.clearAuthorizationHeader()
        #expect(try serializer.request(method: .get, urlString: "http://h/").headers["Authorization"] == nil)
    }

    @Test("timeout, cache policy and cookie handling are applied to every request")
    func requestDefaults() throws {
        let serializer = HTTPRequestSerializer()
        let plain = try serializer.request(method: .get, urlString: "http://h/")
        #expect(plain.timeoutInterval == 0)
        #expect(plain.cachePolicy == .useProtocolCachePolicy)
        #expect(plain.httpShouldHandleCookies)

        serializer.timeoutInterval = 12.5
        serializer.cachePolicy = .reloadIgnoringLocalCacheData
        serializer.httpShouldHandleCookies = false
        let configured = try serializer.request(method: .post, urlString: "http://h/")

        #expect(configured.timeoutInterval == 12.5)
        #expect(configured.cachePolicy == .reloadIgnoringLocalCacheData)
        #expect(!configured.httpShouldHandleCookies)
    }

    @Test("a URL that is not absolute http(s) is refused")
    func invalidURL() {
        for url in ["not a url", "/relative", "ftp://h/file", ""] {
            let error = #expect(throws: TransferError.self) {
                try HTTPRequestSerializer().request(method: .get, urlString: url)
            }
            #expect(error?.code == .invalidRequest)
        }
    }

    @Test("Accept-Language lists the locale's languages with q from 1 down to 0.5")
    func acceptLanguage() {
        #expect(
            HTTPRequestSerializer.preferredLanguages(environment: [
                "LANGUAGE": "fr_FR:fr::en", "LANG": "de_DE.UTF-8",
            ]) == ["fr-FR", "fr", "en", "de-DE"])
        #expect(
            HTTPRequestSerializer.preferredLanguages(environment: ["LC_ALL": "pt_BR.UTF-8@euro", "LANG": "C"])
                == ["pt-BR"])
        #expect(HTTPRequestSerializer.preferredLanguages(environment: ["LANG": "C.UTF-8"]) == ["en"])
        #expect(HTTPRequestSerializer.preferredLanguages(environment: ["LANG": "POSIX"]) == ["en"])
        #expect(HTTPRequestSerializer.preferredLanguages(environment: [:]) == ["en"])

        #expect(HTTPRequestSerializer.acceptLanguage(for: ["en"]) == "en;q=1")
        #expect(
            HTTPRequestSerializer.acceptLanguage(for: ["a", "b", "c", "d", "e", "f", "g", "h"])
                == "a;q=1, b;q=0.9, c;q=0.8, d;q=0.7, e;q=0.6, f;q=0.5")

        let header = HTTPRequestSerializer().value(forHTTPHeaderField: "Accept-Language") ?? ""
        #expect(header.wholeMatch(of: /[A-Za-z0-9-]+;q=1(, [A-Za-z0-9-]+;q=0\.[5-9])*/) != nil)
    }

    @Test("User-Agent is Transfer/<version>, naming no kernel, host or machine")
    func userAgent() throws {
        let agent = try #require(HTTPRequestSerializer().value(forHTTPHeaderField: "User-Agent"))
        #expect(agent == "Transfer/\(HTTPRequestSerializer.libraryVersion)")
        #expect(agent == "Transfer/\(TransferVersion.library)")
        try HTTPHeaders.validate(name: "User-Agent", value: agent)
    }

    @Test("the serializer can be configured and used from many tasks at once")
    func concurrentUse() async throws {
        let serializer = HTTPRequestSerializer()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<32 {
                group.addTask {
                    serializer.setValue("\(index)", forHTTPHeaderField: "X-\(index)")
                    let request = try serializer.request(
                        method: .get, urlString: "http://h/", parameters: ["i": .int(index)])
                    #expect(request.url.query == "i=\(index)")
                    #expect(request.headers["X-\(index)"] == "\(index)")
                }
            }
            try await group.waitForAll()
        }
        #expect(serializer.httpRequestHeaders.count == 34)
    }
}

@Suite("JSON and property-list request serializers")
struct SerializationBodyRequestTests {
    @Test("JSON parameters become an application/json body that parses back")
    func jsonBody() throws {
        let serializer = JSONRequestSerializer()
        let parameters: JSONValue = ["name": "Zoë", "n": 3, "x": 0.25, "ok": true, "none": nil, "list": [1, "two"]]

        let request = try serializer.request(method: .post, urlString: "http://h/items", parameters: parameters)

        #expect(request.headers["Content-Type"] == "application/json")
        guard case .data(let body)? = request.body else {
            Issue.record("expected a data body")
            return
        }
        #expect(try JSONResponseSerializer.parse(body) == parameters)
    }

    @Test("JSON writing options are honoured")
    func jsonWritingOptions() throws {
        let serializer = JSONRequestSerializer()
        serializer.writingOptions = [.sortedKeys, .withoutEscapingSlashes]

        let request = try serializer.request(method: .put, urlString: "http://h/", parameters: ["b": "a/b", "a": [1]])

        #expect(request.body == .data(Data(#"{"a":[1],"b":"a/b"}"#.utf8)))
    }

    @Test("JSON for URI methods still uses the query string; nil parameters give no body")
    func jsonURIAndNil() throws {
        let serializer = JSONRequestSerializer()

        let get = try serializer.request(method: .get, urlString: "http://h/", parameters: ["a": 1])
        let post = try serializer.request(method: .post, urlString: "http://h/")

        #expect(get.url.query == "a=1")
        #expect(get.body == nil)
        #expect(get.headers["Content-Type"] == nil)
        #expect(post.body == nil)
        #expect(post.headers["Content-Type"] == nil)
    }

    @Test("a JSON body must be a container unless fragments are allowed, and numbers must be finite")
    func jsonFragments() throws {
        let serializer = JSONRequestSerializer()
        let fragment = #expect(throws: TransferError.self) {
            try serializer.request(method: .post, urlString: "http://h/", parameters: "text")
        }
        #expect(fragment?.code == .invalidRequest)

        serializer.writingOptions = [.fragmentsAllowed]
        let allowed = try serializer.request(method: .post, urlString: "http://h/", parameters: "text")
        #expect(allowed.body == .data(Data(#""text""#.utf8)))

        let nan = #expect(throws: TransferError.self) {
            try serializer.request(method: .post, urlString: "http://h/", parameters: ["x": .double(.nan)])
        }
        #expect(nan?.code == .invalidRequest)
    }

    @Test("property-list parameters become an application/x-plist body in the chosen format")
    func propertyListBody() throws {
        let parameters: JSONValue = ["name": "Ann", "age": 7, "ratio": 0.5, "ok": false, "list": ["a", 1]]
        for format in [PropertyListSerialization.PropertyListFormat.xml, .binary] {
            let serializer = PropertyListRequestSerializer(format: format)

            let request = try serializer.request(method: .post, urlString: "http://h/", parameters: parameters)

            #expect(request.headers["Content-Type"] == "application/x-plist")
            guard case .data(let body)? = request.body else {
                Issue.record("expected a data body")
                return
            }
            var parsedFormat = PropertyListSerialization.PropertyListFormat.openStep
            let object = try PropertyListSerialization.propertyList(from: body, options: [], format: &parsedFormat)
            #expect(parsedFormat == format)
            #expect(try JSONValue(any: object) == parameters)
        }
        let get = try PropertyListRequestSerializer().request(
            method: .get, urlString: "http://h/", parameters: ["a": 1])
        #expect(get.url.query == "a=1")
    }

    @Test("a property list cannot hold null")
    func propertyListNull() {
        let error = #expect(throws: TransferError.self) {
            try PropertyListRequestSerializer().request(
                method: .post, urlString: "http://h/", parameters: ["a": [1, nil]])
        }
        #expect(error?.code == .invalidRequest)
        #expect(error?.message.contains("a[1]") == true)
    }
}

@Suite("Request serializer URL variants")
struct SerializationURLVariantTests {
    @Test("URL variants build the same requests as the string variants and refuse non-http URLs")
    func urlVariants() throws {
        let serializer = HTTPRequestSerializer()
        let url = try #require(URL(string: "https://example.com/a/b"))

        let fromURL = try serializer.request(method: .get, url: url, parameters: ["x": 1])
        let fromString = try serializer.request(method: .get, urlString: url.absoluteString, parameters: ["x": 1])
        let multipart = try serializer.multipartFormRequest(url: url) { $0.append(formField: "1", name: "a") }

        #expect(fromURL == fromString)
        #expect(multipart.headers["Content-Type"]?.hasPrefix("multipart/form-data; boundary=") == true)
        let fileURL = #expect(throws: TransferError.self) {
            try serializer.request(method: .get, url: URL(fileURLWithPath: "/etc/hosts"))
        }
        #expect(fileURL?.code == .invalidRequest)
        #expect(throws: TransferError.self) { try serializer.multipartFormRequest(method: .head, url: url) }
    }
}
