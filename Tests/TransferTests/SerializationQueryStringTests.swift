import Foundation
import Testing

@testable import Transfer

@Suite("Query string escaping and encoding")
struct SerializationQueryStringTests {
    @Test(
        "percent-escaping follows RFC 3986 and keeps ? and /",
        arguments: [
            ("plain-._~09AZaz", "plain-._~09AZaz"),
            ("a b", "a%20b"),
            ("?/", "?/"),
            (":#[]@", "%3A%23%5B%5D%40"),
            ("!$&'()*+,;=", "%21%24%26%27%28%29%2A%2B%2C%3B%3D"),
            ("%", "%25"),
            ("\"<>\\^`{|}", "%22%3C%3E%5C%5E%60%7B%7C%7D"),
            ("\r\n\t", "%0D%0A%09"),
            ("café", "caf%C3%A9"),
            ("e\u{301}", "e%CC%81"),
            ("中文", "%E4%B8%AD%E6%96%87"),
            ("日本語のテキスト", "%E6%97%A5%E6%9C%AC%E8%AA%9E%E3%81%AE%E3%83%86%E3%82%AD%E3%82%B9%E3%83%88"),
            ("😀", "%F0%9F%98%80"),
            ("🇫🇷", "%F0%9F%87%AB%F0%9F%87%B7"),
            ("👨‍👩‍👧", "%F0%9F%91%A8%E2%80%8D%F0%9F%91%A9%E2%80%8D%F0%9F%91%A7"),
            ("", ""),
        ])
    func escapingTable(input: String, expected: String) {
        #expect(QueryString.percentEscaped(input) == expected)
    }

    @Test("long strings of multi-byte characters escape exactly at every length and offset")
    func longStringsSpanningAnyBatchSize() {
        // AFNetworking escapes in batches of 50 UTF-16 units; a batch edge
        // inside a surrogate pair or a grapheme would corrupt the output. Try
        // every offset of such sequences against the whole 0...260 range.
        let pieces = ["😀", "e\u{301}", "中", "👨‍👩‍👧", "🇫🇷", "a", " ", "/"]
        let oracleAllowed = CharacterSet(
            charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/?")
        for piece in pieces {
            for prefixLength in 0..<60 {
                let input =
                    String(repeating: "a", count: prefixLength)
                    + String(repeating: piece, count: 200 / piece.utf8.count + 3)
                let escaped = QueryString.percentEscaped(input)
                #expect(escaped == input.addingPercentEncoding(withAllowedCharacters: oracleAllowed))
                #expect(escaped.removingPercentEncoding == input)
            }
        }
        let huge = String(repeating: "ñ😀中 ", count: 20_000)
        #expect(QueryString.percentEscaped(huge).removingPercentEncoding == huge)
    }

    @Test("nested objects and arrays flatten to a[b] and a[] pairs")
    func nesting() throws {
        let parameters: JSONValue = [
            "user": ["name": "Ann", "address": ["city": "Paris"]],
            "tags": ["x", "y"],
            "matrix": [[1, 2], ["k": "v"]],
        ]

        let pairs = try QueryString.pairs(from: parameters).map { "\($0.field)=\($0.value ?? "<nil>")" }

        #expect(
            pairs == [
                "matrix[][]=1", "matrix[][]=2", "matrix[][k]=v",
                "tags[]=x", "tags[]=y",
                "user[address][city]=Paris", "user[name]=Ann",
            ])
        #expect(try QueryString.string(from: ["a": ["b": 1]]) == "a%5Bb%5D=1")
        #expect(try QueryString.string(from: ["a": [1, 2]]) == "a%5B%5D=1&a%5B%5D=2")
    }

    @Test("keys are sorted by Unicode scalar value at every level, whatever the insertion order")
    func ordering() throws {
        let first: JSONValue = ["b": 1, "a": 2, "B": 3, "aa": 4, "é": 5, "z": ["y": 1, "x": 2]]
        let second: JSONValue = ["z": ["x": 2, "y": 1], "é": 5, "aa": 4, "B": 3, "a": 2, "b": 1]

        let query = try QueryString.string(from: first)

        #expect(query == "B=3&a=2&aa=4&b=1&z%5Bx%5D=2&z%5By%5D=1&%C3%A9=5")
        #expect(try QueryString.string(from: second) == query)
    }

    @Test("scalars print as NSNumber and NSNull do in AFNetworking")
    func scalarFormatting() throws {
        let query = try QueryString.string(from: [
            "t": true, "f": false, "i": -42, "d": 1.5, "whole": 2.0, "n": nil, "s": "x y", "big": 1e300,
        ])
        #expect(query == "big=1e%2B300&d=1.5&f=0&i=-42&n&s=x%20y&t=1&whole=2")
    }

    @Test("empty containers give no pairs, and a non-object top level is refused")
    func emptiesAndTopLevel() throws {
        #expect(try QueryString.string(from: [:]) == "")
        #expect(try QueryString.string(from: ["a": [], "b": [:]]) == "")
        let error = #expect(throws: TransferError.self) { try QueryString.string(from: [1, 2]) }
        #expect(error?.code == .invalidRequest)
    }
}

@Test("a NUL byte is escaped as %00")
func nulIsEscaped() {
    #expect(QueryString.percentEscaped("a\u{0}b") == "a%00b")
}
