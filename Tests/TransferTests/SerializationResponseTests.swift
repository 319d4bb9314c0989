import Foundation
import Testing

@testable import Transfer
import TransferFoundation

#if canImport(FoundationXML)
    import FoundationXML
#endif

private let testURL = URL(string: "http://h/resource")!

private func response(_ status: Int = 200, _ contentType: String? = "application/json") -> HTTPResponse {
    var headers = HTTPHeaders()
    if let contentType { headers["Content-Type"] = contentType }
    return HTTPResponse(url: testURL, statusCode: status, headers: headers)
}

private func data(_ text: String) -> Data { Data(text.utf8) }

@Suite("HTTP response validation")
struct SerializationValidationTests {
    @Test(
        "status codes and content types are accepted or refused as AFNetworking does",
        arguments: [200, 204, 299, 300, 404, 500],
        [
            "application/json", "application/json; charset=utf-8", "APPLICATION/JSON", "text/html", nil,
        ] as [String?])
    func matrix(status: Int, contentType: String?) throws {
        var serializer = HTTPResponseSerializer()
        serializer.acceptableContentTypes = ["application/json"]
        for body in [Data(), data("{}")] {
            let statusOK = (200..<300).contains(status)
            let typeOK = body.isEmpty || contentType?.lowercased().hasPrefix("application/json") == true

            let result = Result { () throws(TransferError) -> Data in
                try serializer.serialize(response: response(status, contentType), data: body, error: nil)
            }

            switch result {
            case .success(let value):
                #expect(statusOK && typeOK, "accepted \(status) \(contentType ?? "none") \(body.count) bytes")
                #expect(value == body)
            case .failure(let error):
                #expect(!(statusOK && typeOK), "refused \(status) \(contentType ?? "none"): \(error)")
                #expect(error.code == (statusOK ? .unacceptableContentType : .unacceptableStatusCode))
                #expect(error.response?.statusCode == status)
                #expect(error.responseData == body)
                #expect(error.httpStatus == status)
                #expect(error.url == testURL)
                // Both failing: the status error carries the content-type error.
                let chained = (error.underlyingError as? TransferError)?.code
                #expect(chained == (!statusOK && !typeOK ? .unacceptableContentType : nil))
            }
        }
    }

    @Test("an empty body without a MIME type passes, and so does a missing response")
    func emptyAndMissing() throws {
        var serializer = HTTPResponseSerializer()
        serializer.acceptableContentTypes = ["application/json"]

        #expect(try serializer.serialize(response: response(204, nil), data: nil, error: nil) == Data())
        #expect(try serializer.serialize(response: nil, data: data("x"), error: nil) == data("x"))
        let error = #expect(throws: TransferError.self) {
            try serializer.serialize(response: response(200, nil), data: data("x"), error: nil)
        }
        #expect(error?.message == "Request failed: unacceptable content-type: none")
    }

    @Test("acceptable status codes and nil content types are configurable")
    func configuration() throws {
        var serializer = HTTPResponseSerializer()
        serializer.acceptableStatusCodes.insert(404)

        #expect(
            try serializer.serialize(response: response(404, "text/html"), data: data("x"), error: nil) == data("x"))
        let error = #expect(throws: TransferError.self) {
            try serializer.serialize(response: response(500, "text/html"), data: data("x"), error: nil)
        }
        #expect(error?.message == "Request failed: internal server error (500)")
    }

    @Test("a transfer error is rethrown with the response and data attached")
    func transferErrorPassesThrough() {
        let timeout = TransferError(.timedOut, "timed out")
        let error = #expect(throws: TransferError.self) {
            try JSONResponseSerializer().serialize(response: response(200), data: data("{}"), error: timeout)
        }
        #expect(error?.code == .timedOut)
        #expect(error?.responseData == data("{}"))
        #expect(error?.response?.statusCode == 200)
    }
}

@Suite("JSON response serializer")
struct SerializationJSONResponseTests {
    @Test("JSON is parsed with integers, doubles and booleans kept apart")
    func parsesTypes() throws {
        let body = data(#"{"i": 1, "d": 1.5, "b": true, "f": false, "z": 0, "s": "x", "n": null, "a": [1, "2"]}"#)

        let value = try JSONResponseSerializer().serialize(response: response(), data: body, error: nil)

        #expect(value == ["i": 1, "d": 1.5, "b": true, "f": false, "z": 0, "s": "x", "n": nil, "a": [1, "2"]])
        #expect(value?["i"]?.intValue == 1)
        #expect(value?["a"]?[1]?.stringValue == "2")
    }

    @Test("all three JSON content types are accepted and others are refused without parsing")
    func contentTypes() throws {
        for type in ["application/json", "text/json", "text/javascript"] {
            #expect(
                try JSONResponseSerializer().serialize(response: response(200, type), data: data("[1]"), error: nil)
                    == [1])
        }
        let error = #expect(throws: TransferError.self) {
            try JSONResponseSerializer().serialize(
                response: response(200, "text/html"), data: data("<html>"), error: nil)
        }
        #expect(error?.code == .unacceptableContentType)
        #expect(error?.underlyingError == nil)
    }

    @Test("an empty or single-space body gives nil without error")
    func emptyBodies() throws {
        for body in [nil, Data(), data(" ")] {
            #expect(try JSONResponseSerializer().serialize(response: response(), data: body, error: nil) == nil)
        }
        #expect(try JSONResponseSerializer().serialize(response: response(204, nil), data: Data(), error: nil) == nil)
    }

    @Test("invalid JSON fails with the parser's reason, the response and the data")
    func invalidJSON() {
        let body = data(#"{"a": "#)
        let error = #expect(throws: TransferError.self) {
            try JSONResponseSerializer().serialize(response: response(), data: body, error: nil)
        }
        #expect(error?.code == .serializationFailed)
        #expect(error?.underlyingError != nil)
        #expect(error?.responseData == body)
        #expect(error?.response?.statusCode == 200)
    }

    @Test("with a bad status, a parse failure is chained under the status error")
    func errorChaining() {
        let invalid = #expect(throws: TransferError.self) {
            try JSONResponseSerializer().serialize(response: response(500), data: data("oops"), error: nil)
        }
        let valid = #expect(throws: TransferError.self) {
            try JSONResponseSerializer().serialize(response: response(404), data: data(#"{"error": "x"}"#), error: nil)
        }

        #expect(invalid?.code == .unacceptableStatusCode)
        let parse = invalid?.underlyingError as? TransferError
        #expect(parse?.code == .serializationFailed)
        #expect(parse?.responseData == data("oops"))
        #expect(parse?.underlyingError != nil)
        #expect(invalid?.chainContains(.serializationFailed) == true)
        #expect(valid?.code == .unacceptableStatusCode)
        #expect(valid?.underlyingError == nil)
        #expect(valid?.responseData == data(#"{"error": "x"}"#))
    }

    @Test("removesKeysWithNullValues drops nulls at every depth, in objects and arrays")
    func nullRemoval() throws {
        let body = data(#"{"a": null, "b": {"c": null, "d": [1, null, {"e": null, "f": 2}]}, "g": [null]}"#)
        let keeping = JSONResponseSerializer()
        let removing = JSONResponseSerializer(removesKeysWithNullValues: true)

        let kept = try keeping.serialize(response: response(), data: body, error: nil)
        let removed = try removing.serialize(response: response(), data: body, error: nil)

        #expect(kept?["a"] == .null)
        #expect(removed == ["b": ["d": [1, ["f": 2]]], "g": []])
    }

    @Test("reading options decide whether top-level fragments parse")
    func readingOptions() throws {
        let refused = #expect(throws: TransferError.self) {
            try JSONResponseSerializer().serialize(response: response(), data: data(#""text""#), error: nil)
        }
        #expect(refused?.code == .serializationFailed)

        let serializer = JSONResponseSerializer(readingOptions: .fragmentsAllowed)
        #expect(try serializer.serialize(response: response(), data: data(#""text""#), error: nil) == "text")
        #expect(try serializer.serialize(response: response(), data: data("null"), error: nil) == .null)
        var removing = serializer
        removing.removesKeysWithNullValues = true
        #expect(try removing.serialize(response: response(), data: data("null"), error: nil) == nil)
    }
}

@Suite("Other response serializers")
struct SerializationOtherResponseTests {
    struct User: Decodable, Sendable, Equatable {
        var id: Int
        var displayName: String
    }

    @Test("Decodable values decode with a configurable JSONDecoder")
    func decodableSuccess() throws {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        let serializer = DecodableResponseSerializer(User.self, decoder: decoder)

        let user = try serializer.serialize(
            response: response(), data: data(#"{"id": 7, "display_name": "Ann"}"#),
            error: nil)

        #expect(user == User(id: 7, displayName: "Ann"))
    }

    @Test("a body of the wrong shape fails with the DecodingError as the reason")
    func decodableFailure() {
        let error = #expect(throws: TransferError.self) {
            try DecodableResponseSerializer(User.self).serialize(
                response: response(), data: data(#"{"id": "seven"}"#), error: nil)
        }
        #expect(error?.code == .serializationFailed)
        #expect(error?.underlyingError is DecodingError)
        #expect(error?.responseData == data(#"{"id": "seven"}"#))
    }

    @Test("an empty body decodes as nil for an Optional and fails otherwise")
    func decodableEmpty() throws {
        #expect(
            try DecodableResponseSerializer(User?.self).serialize(response: response(204), data: Data(), error: nil)
                == nil)
        let error = #expect(throws: TransferError.self) {
            try DecodableResponseSerializer(User.self).serialize(response: response(204), data: Data(), error: nil)
        }
        #expect(error?.code == .serializationFailed)
        let status = #expect(throws: TransferError.self) {
            try DecodableResponseSerializer(User.self).serialize(response: response(401), data: data("{}"), error: nil)
        }
        #expect(status?.code == .unacceptableStatusCode)
    }

    @Test("strings decode in the response's charset, UTF-8 by default")
    func strings() throws {
        let serializer = StringResponseSerializer()
        let latin1 = Data([0x63, 0x61, 0x66, 0xE9])

        #expect(
            try serializer.serialize(
                response: response(200, "text/plain; charset=ISO-8859-1"), data: latin1,
                error: nil) == "café")
        #expect(
            try serializer.serialize(response: response(200, "text/plain"), data: data("café"), error: nil)
                == "café")
        #expect(try serializer.serialize(response: response(204, nil), data: nil, error: nil) == "")
        let invalid = #expect(throws: TransferError.self) {
            try serializer.serialize(response: response(200, "text/plain"), data: latin1, error: nil)
        }
        #expect(invalid?.code == .serializationFailed)
        let unknown = #expect(throws: TransferError.self) {
            try serializer.serialize(
                response: response(200, "text/plain; charset=x-klingon"), data: data("a"), error: nil)
        }
        #expect(unknown?.code == .serializationFailed)
    }

    @Test("property lists parse with dates, data and booleans, and bad ones fail")
    func propertyLists() throws {
        let plist = data(
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0"><dict>
            <key>ok</key><true/><key>n</key><integer>3</integer><key>r</key><real>1.5</real>
            <key>when</key><date>2020-01-01T00:00:00Z</date><key>blob</key><data>AAEC</data>
            <key>list</key><array><string>a</string></array>
            </dict></plist>
            """)
        let serializer = PropertyListResponseSerializer()

        let value = try serializer.serialize(response: response(200, "application/x-plist"), data: plist, error: nil)

        #expect(value?["ok"]?.boolValue == true)
        #expect(value?["n"] == .int(3))
        #expect(value?["r"] == .double(1.5))
        #expect(value?["when"]?.dateValue == Date(timeIntervalSince1970: 1_577_836_800))
        #expect(value?["blob"]?.dataValue == Data([0, 1, 2]))
        #expect(value?["list"]?[0]?.stringValue == "a")
        #expect(
            try serializer.serialize(response: response(200, "application/x-plist"), data: Data(), error: nil)
                == nil)
        let bad = #expect(throws: TransferError.self) {
            try serializer.serialize(response: response(500, "application/x-plist"), data: data("<plist"), error: nil)
        }
        #expect(bad?.code == .unacceptableStatusCode)
        #expect((bad?.underlyingError as? TransferError)?.code == .serializationFailed)
    }

    @Test("XML documents parse, and malformed XML fails with the parser's reason")
    func xmlDocuments() throws {
        let serializer = XMLDocumentResponseSerializer()

        let handle = try serializer.serialize(
            response: response(200, "text/xml"), data: data("<root><item id='1'/></root>"), error: nil)

        #expect(handle?.document.rootElement()?.name == "root")
        #expect(handle?.document.rootElement()?.elements(forName: "item").count == 1)
        for malformed in ["<root>", "<a><b></a>", "not xml", "<a/><b/>"] {
            let error = #expect(throws: TransferError.self) {
                try serializer.serialize(response: response(200, "application/xml"), data: data(malformed), error: nil)
            }
            #expect(error?.code == .serializationFailed, "\(malformed)")
            #expect(error?.underlyingError != nil)
        }
    }

    @Test("the XML parser serializer gives fresh configured parsers for the body")
    func xmlParser() throws {
        final class Names: NSObject, XMLParserDelegate {
            var names: [String] = []
            func parser(
                _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
                qualifiedName: String?, attributes: [String: String]
            ) {
                names.append(elementName)
            }
        }
        var serializer = XMLParserResponseSerializer()
        serializer.shouldProcessNamespaces = true

        let source = try serializer.serialize(
            response: response(200, "application/xml"), data: data("<a><b/><c/></a>"), error: nil)
        let parser = source.makeParser()
        let delegate = Names()
        parser.delegate = delegate

        #expect(parser.parse())
        #expect(delegate.names == ["a", "b", "c"])
        #expect(parser.shouldProcessNamespaces)
        #expect(!parser.shouldResolveExternalEntities)
        #expect(throws: TransferError.self) {
            try serializer.serialize(response: response(200, "application/json"), data: data("{}"), error: nil)
        }
    }

    @Test("a compound serializer uses the first serializer that accepts, in order")
    func compound() throws {
        let compound = CompoundResponseSerializer([
            JSONResponseSerializer(removesKeysWithNullValues: true), JSONResponseSerializer(),
            XMLParserResponseSerializer(),
        ])

        let json = try compound.serialize(
            response: response(200, "application/json"), data: data(#"{"a": null}"#),
            error: nil)
        let xml = try compound.serialize(response: response(200, "text/xml"), data: data("<a/>"), error: nil)
        let other = try compound.serialize(response: response(200, "text/plain"), data: data("hi"), error: nil)

        #expect(json as? JSONValue == [:])
        #expect((xml as? XMLParserSource)?.data == data("<a/>"))
        #expect(other as? Data == data("hi"))
        let failure = #expect(throws: TransferError.self) {
            try compound.serialize(response: response(500, "text/plain"), data: data("hi"), error: nil)
        }
        #expect(failure?.code == .unacceptableStatusCode)
        #expect(failure?.underlyingError != nil)
    }

    @Test("a type-erased serializer forwards configuration and flattens nil results")
    func typeErasure() throws {
        var erased = AnyResponseSerializer(JSONResponseSerializer())
        erased.acceptableContentTypes?.insert("text/html")
        var existential: any ResponseSerializer = erased

        let value = try existential.serializedValue(response: response(200, "text/html"), data: data("[1]"), error: nil)
        let empty = try existential.serializedValue(response: response(200, "text/html"), data: Data(), error: nil)
        existential.acceptableStatusCodes = [201]

        #expect(value as? JSONValue == [1])
        #expect(empty == nil)
        #expect(existential.acceptableContentTypes?.contains("text/html") == true)
        #expect(throws: TransferError.self) {
            try existential.serializedValue(response: response(200, "text/html"), data: data("[1]"), error: nil)
        }
        #expect(AnyResponseSerializer(erased).base is JSONResponseSerializer)
    }
}

@Suite("JSONValue")
struct SerializationJSONValueTests {
    @Test("Foundation object graphs convert, keeping booleans apart from integers")
    func fromFoundation() throws {
        let parsed = try JSONSerialization.jsonObject(with: data(#"[true, 1, 0, 2.5, "s", null, {"k": [false]}]"#))
        let swift: [String: Any] = [
            "b": true, "i": 3, "u": UInt8(4), "d": 0.5, "f": Float(0.25), "s": "x", "n": NSNull(),
            "nested": ["a": [1, "b"]] as [String: Any], "url": URL(string: "http://h/")!,
            "opt": Optional<Int>.none as Any,
        ]

        #expect(try JSONValue(any: parsed) == [true, 1, 0, 2.5, "s", nil, ["k": [false]]])
        #expect(
            try JSONValue(swift) == [
                "b": true, "i": 3, "u": 4, "d": 0.5, "f": 0.25, "s": "x", "n": nil, "nested": ["a": [1, "b"]],
                "url": "http://h/", "opt": nil,
            ])
        let error = #expect(throws: TransferError.self) { try JSONValue(["d": Date()]) }
        #expect(error?.code == .invalidRequest)
        #expect(error?.message.contains("Date") == true)
    }

    @Test("values round-trip through Codable and Foundation")
    func roundTrips() throws {
        let value: JSONValue = ["a": [1, 2.5, "x", true, nil], "b": ["c": [:]]]

        let encoded = try JSONEncoder().encode(value)

        #expect(try JSONDecoder().decode(JSONValue.self, from: encoded) == value)
        #expect(try JSONValue(any: value.foundationObject) == value)
        #expect(value.description == #"{"a":[1,2.5,"x",true,null],"b":{"c":{}}}"#)
        #expect(JSONValue.double(3).intValue == 3)
        #expect(JSONValue.double(3.5).intValue == nil)
        #expect(JSONValue.int(2).doubleValue == 2)
        #expect(JSONValue.string("x")[0] == nil)
    }
}
