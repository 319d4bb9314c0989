import Foundation
import Testing
import Transfer
import TransferFoundation

private func parse(_ text: String, _ options: JSONReadingOptions = [.fragmentsAllowed]) throws -> JSONValue {
    try JSONResponseSerializer.parse(Data(text.utf8), options: options)
}

@Suite("JSON parser")
struct JSONParserTests {
    @Test("integers that fit an Int are int; fractions, exponents and big integers are double")
    func numbers() throws {
        #expect(try parse("0") == .int(0))
        #expect(try parse("-12") == .int(-12))
        #expect(try parse("9223372036854775807") == .int(Int.max))
        #expect(try parse("-9223372036854775808") == .int(Int.min))
        #expect(try parse("9223372036854775808") == .double(9_223_372_036_854_775_808))
        #expect(try parse("18446744073709551616") == .double(18_446_744_073_709_551_616))
        #expect(try parse("1.0") == .double(1))
        #expect(try parse("1.5e2") == .double(150))
        #expect(try parse("-0.25E-1") == .double(-0.025))
        for bad in ["01", "-", "1.", ".5", "1e", "+1", "1e400", "0x10", "NaN", "Infinity"] {
            #expect(throws: JSONParseError.self, "\(bad)") { try parse(bad) }
        }
    }

    @Test("strings: escapes, surrogate pairs, UTF-8; control characters and lone surrogates refused")
    func strings() throws {
        #expect(try parse(#""a\"b\\c\/d\b\f\n\r\t""#) == .string("a\"b\\c/d\u{8}\u{c}\n\r\t"))
        #expect(try parse(#""\u00e9\u20AC\ud83d\ude00""#) == .string("é€😀"))
        #expect(try parse("\"héllo ✓\"") == .string("héllo ✓"))
        for bad in [#""\ud83d""#, #""\ude00""#, #""\ud83dx""#, #""\x""#, #""\u12""#, "\"a\u{1}b\"", #""open"#] {
            #expect(throws: JSONParseError.self, "\(bad)") { try parse(bad) }
        }
        #expect(throws: JSONParseError.self) {
            try JSONResponseSerializer.parse(Data([0x22, 0xFF, 0x22]), options: [.fragmentsAllowed])
        }
    }

    @Test("objects and arrays, blanks, a BOM; a duplicate key keeps its last value")
    func containers() throws {
        let value = try parse("\n{ \"a\" : [1, 2.5, true, false, null, {}, []], \"b\": {\"c\": \"d\"}, \"a2\": 1, \"a2\": 2 }\t")
        #expect(value == ["a": [1, 2.5, true, false, nil, [:], []], "b": ["c": "d"], "a2": 2])
        #expect(try JSONResponseSerializer.parse(Data([0xEF, 0xBB, 0xBF] + Array("[1]".utf8))) == [1])
        for bad in ["[1,]", "{\"a\":1,}", "{a:1}", "[1 2]", "{\"a\" 1}", "[", "]", "", "  ", "[1] x", "tru", "nul"] {
            #expect(throws: JSONParseError.self, "\(bad)") { try parse(bad) }
        }
    }

    @Test("nesting is limited, fragments need the option")
    func limits() throws {
        let deep = String(repeating: "[", count: 512) + String(repeating: "]", count: 512)
        #expect(try parse(deep) != .null)
        let deeper = String(repeating: "[", count: 513) + String(repeating: "]", count: 513)
        #expect(throws: JSONParseError.self) { try parse(deeper) }
        #expect(throws: JSONParseError.self) { try parse("\"text\"", []) }
        #expect(try parse("\"text\"") == "text")
    }

    @Test("a top-level dictionary may be assumed; JSON5 goes through JSONDecoder")
    func decoderOptions() throws {
        #expect(try parse("{a: 1, // note\n b: [2,],}", [.json5Allowed]) == ["a": 1, "b": [2]])
        #expect(try parse("\"a\": 1, \"b\": 1.5", [.topLevelDictionaryAssumed]) == ["a": 1, "b": 1.5])
        #expect(try parse(" {\"a\": [1]}", [.topLevelDictionaryAssumed]) == ["a": [1]])
        #expect(throws: JSONParseError.self) { try parse("\"a\": 1,", [.topLevelDictionaryAssumed]) }
        #expect(throws: (any Error).self) { try parse("7", [.json5Allowed]) }
    }

    @Test("what the core parses equals what JSONSerialization gives, through init(any:)")
    func agreesWithFoundation() throws {
        let text = #"{"s": "x\u00e9", "i": 42, "n": -7, "d": 0.5, "e": 1e3, "t": true, "f": false, "z": null, "l": [1, "2", [3]]}"#
        let foundation = try JSONValue(any: JSONSerialization.jsonObject(with: Data(text.utf8)))
        #expect(try parse(text) == foundation)
    }
}
