import Foundation
import Testing

@testable import Transfer
import TransferFoundation

@Suite("Serializer parity options")
struct SerializationParityTests {
    private let url = URL(string: "https://example.com/p")!

    @Test("a style is the default encoding, a closure overrides it, and setting a style removes the closure")
    func queryStringStyle() throws {
        let serializer = HTTPRequestSerializer()
        #expect(serializer.queryStringSerializationStyle == .default)
        let plain = try serializer.request(method: .get, urlString: "https://h/p", parameters: ["b": 2, "a": [1]])
        #expect(plain.url.absoluteString == "https://h/p?a%5B%5D=1&b=2")

        serializer.setQueryStringSerialization { _, _ in "custom=1" }
        let custom = try serializer.request(method: .get, urlString: "https://h/p", parameters: ["b": 2])
        #expect(custom.url.absoluteString == "https://h/p?custom=1")

        serializer.setQueryStringSerialization(style: .default)
        #expect(serializer.queryStringSerialization == nil)
        let again = try serializer.request(method: .get, urlString: "https://h/p", parameters: ["b": 2, "a": [1]])
        #expect(again.url.absoluteString == plain.url.absoluteString)
        #expect(try QueryStringSerializationStyle.default.string(from: ["a": "x y"]) == "a=x%20y")
    }

    @Test("a style refuses parameters that are not an object with a typed error")
    func queryStringStyleBadInput() {
        let error = #expect(throws: TransferError.self) {
            try QueryStringSerializationStyle.default.string(from: [1, 2])
        }
        #expect(error?.code == .invalidRequest)
    }

    @Test("JSONRequestSerializer(writingOptions:) writes with them")
    func jsonWritingOptions() throws {
        let serializer = JSONRequestSerializer(writingOptions: [.sortedKeys, .withoutEscapingSlashes])
        #expect(serializer.writingOptions == [.sortedKeys, .withoutEscapingSlashes])

        let request = try serializer.request(
            method: .post, urlString: "https://h/p", parameters: ["z": "a/b", "a": 1])

        guard case .data(let body)? = request.body else {
            Issue.record("no body")
            return
        }
        #expect(String(decoding: body, as: UTF8.self) == #"{"a":1,"z":"a/b"}"#)
    }

    @Test("property-list request writeOptions: 0 is accepted, anything else is a typed error")
    func propertyListWriteOptions() throws {
        let serializer = PropertyListRequestSerializer(format: .binary, writeOptions: 0)
        #expect(serializer.format == .binary)
        #expect(serializer.writeOptions == 0)
        let request = try serializer.request(method: .post, urlString: "https://h/p", parameters: ["a": 1])
        guard case .data(let body)? = request.body else {
            Issue.record("no body")
            return
        }
        #expect(body.starts(with: Array("bplist".utf8)))

        serializer.writeOptions = 1
        let error = #expect(throws: TransferError.self) {
            try serializer.request(method: .post, urlString: "https://h/p", parameters: ["a": 1])
        }
        #expect(error?.code == .invalidRequest)
    }

    @Test("property-list response readOptions are kept and parsing honours them")
    func propertyListReadOptions() throws {
        let serializer = PropertyListResponseSerializer(format: .xml, readOptions: .mutableContainersAndLeaves)
        #expect(serializer.readOptions == .mutableContainersAndLeaves)
        #expect(PropertyListResponseSerializer().readOptions == [])
        let body = try PropertyListSerialization.data(
            fromPropertyList: ["k": ["v"]], format: .xml, options: 0)
        var headers = HTTPHeaders()
        headers["Content-Type"] = "application/x-plist"
        let response = HTTPResponse(url: url, statusCode: 200, headers: headers)

        let value = try serializer.serialize(response: response, data: body, error: nil)

        #expect(value?["k"]?[0]?.stringValue == "v")
    }
}
