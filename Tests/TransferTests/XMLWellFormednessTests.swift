import Foundation
import Testing
import Transfer
import TransferFoundation
import TestSupport

/// The command's Foundation-free XML check (`XMLWellFormedness`) against the
/// library's `XMLParser`-based serializer (TransferFoundation): both must
/// give the same verdict on the same bodies.
@Suite("XML well-formedness without Foundation")
struct XMLWellFormednessTests {
    static let wellFormed: [String] = [
        "<a/>",
        "<?xml version=\"1.0\"?><a/>",
        "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<!-- c --><a x=\"1\" y='2'>t&amp;&#65;&#x42;<b/>"
            + "<![CDATA[<x>&]]><?pi data?></a>\n<!-- after -->\n",
        "\u{FEFF}<a/>",
        "<!DOCTYPE a [<!ENTITY e \"x\"><!ELEMENT a ANY>]><a>&e;</a>",
        "<!DOCTYPE a [\n<!-- a [comment] > -->\n<!ATTLIST a b CDATA \"]>\">\n]>\n<a b=\"1\"/>",
        "<é lang=\"fr\">ü &lt;&gt;&quot;&apos;</é>",
        "<a:b xmlns:a=\"urn:x\"><a:c/></a:b>",
        "<root><x-y.z_1>text</x-y.z_1><?xml-stylesheet href=\"s\"?></root>",
        "<a>\t\r\n]]</a>",
        "<a b = \"1\"\n c='&#x10FFFF;'></a >",
    ]

    static let malformed: [String] = [
        "not xml",
        "<a>",
        "<a></b>",
        "<a/><b/>",
        "<a x=1/>",
        "<a x=\"1\" x=\"2\"/>",
        "<a>&bogus;</a>",
        "<a>&#0;</a>",
        "<a>&#xD800;</a>",
        "<a><!-- a -- b --></a>",
        "<a>]]></a>",
        "<a x=\"<\"/>",
        "<a/>junk",
        "junk<a/>",
        "<?xml version=\"1.0\"?><?xml version=\"1.0\"?><a/>",
        " <?xml version=\"1.0\"?><a/>",
        "<a>\u{1}</a>",
        "<a><b></a></b>",
        "</a>",
        "<1a/>",
        "<a b/>",
        "<a b=\"1\"c=\"2\"/>",
        "<a/><!DOCTYPE a>",
        "<a>&amp</a>",
        "<a><![CDATA[x</a>",
        "<a><!-- x</a>",
        "<!DOCTYPE a><!DOCTYPE a><a/>",
    ]

    /// The library's verdict: nil when its serializer accepts the body.
    private func libraryVerdict(_ body: [UInt8]) -> TransferError? {
        var serializer = XMLDocumentResponseSerializer()
        serializer.acceptableContentTypes = nil
        do {
            _ = try serializer.serialize(response: nil, data: Data(body), error: nil)
            return nil
        } catch {
            return error
        }
    }

    @Test("well-formed documents pass both checks", arguments: wellFormed)
    func wellFormedPasses(_ text: String) throws {
        let body = Array(text.utf8)
        #expect(throws: Never.self) { try XMLWellFormedness.check(body) }
        #expect(libraryVerdict(body) == nil, "XMLParser refused it too: the case is wrong")
    }

    @Test("malformed documents fail both checks, with a reason and an offset", arguments: malformed)
    func malformedFails(_ text: String) throws {
        let body = Array(text.utf8)
        let failure = #expect(throws: XMLWellFormedness.Failure.self) { try XMLWellFormedness.check(body) }
        #expect((failure?.offset ?? -1) >= 0 && (failure?.offset ?? .max) <= body.count)
        #expect(libraryVerdict(body) != nil, "XMLParser accepted it: the case is wrong")
    }

    @Test("bytes: invalid UTF-8 fails, a declared single-byte encoding and UTF-16 with a byte-order mark pass")
    func encodings() throws {
        let invalid: [UInt8] = Array("<a>".utf8) + [0xFF, 0xC3] + Array("</a>".utf8)
        #expect(throws: XMLWellFormedness.Failure.self) { try XMLWellFormedness.check(invalid) }
        #expect(libraryVerdict(invalid) != nil)
        let overlong: [UInt8] = Array("<a>".utf8) + [0xC0, 0xBC] + Array("</a>".utf8)
        #expect(throws: XMLWellFormedness.Failure.self) { try XMLWellFormedness.check(overlong) }

        let latin1 = Array("<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><a>".utf8) + [0xE9] + Array("</a>".utf8)
        #expect(throws: Never.self) { try XMLWellFormedness.check(latin1) }
        #expect(libraryVerdict(latin1) == nil)

        for bigEndian in [true, false] {
            var utf16: [UInt8] = bigEndian ? [0xFE, 0xFF] : [0xFF, 0xFE]
            for unit in "<a>é😀</a>".utf16 {
                let pair = [UInt8(unit >> 8), UInt8(unit & 0xFF)]
                utf16 += bigEndian ? pair : pair.reversed()
            }
            #expect(throws: Never.self) { try XMLWellFormedness.check(utf16) }
            var broken = utf16
            broken.removeLast()
            #expect(throws: XMLWellFormedness.Failure.self) { try XMLWellFormedness.check(broken) }
        }
    }

    @Test("a document type declaration is read over: no external entity is fetched, no entity expanded")
    func doctypeIsInert() throws {
        let directory = try TemporaryDirectory()
        let secret = directory.file("secret")
        try Data("secret".utf8).write(to: secret)
        // An external entity naming a local file, and a billion-laughs chain:
        // both are only declarations to the check.
        let xxe = "<!DOCTYPE a [<!ENTITY x SYSTEM \"file://\(secret.path)\">]><a>&x;</a>"
        var laughs = "<!DOCTYPE a [<!ENTITY l0 \"ha\">"
        for level in 1...10 { laughs += "<!ENTITY l\(level) \"" + String(repeating: "&l\(level - 1);", count: 10) + "\">" }
        laughs += "]><a>&l10;</a>"
        #expect(throws: Never.self) { try XMLWellFormedness.check(Array(xxe.utf8)) }
        #expect(throws: Never.self) { try XMLWellFormedness.check(Array(laughs.utf8)) }
    }

    @Test("deep nesting is checked without recursion")
    func deepNesting() throws {
        let depth = 200_000
        let deep = String(repeating: "<a>", count: depth) + String(repeating: "</a>", count: depth)
        #expect(throws: Never.self) { try XMLWellFormedness.check(Array(deep.utf8)) }
        let unclosed = String(repeating: "<a>", count: depth) + String(repeating: "</a>", count: depth - 1)
        #expect(throws: XMLWellFormedness.Failure.self) { try XMLWellFormedness.check(Array(unclosed.utf8)) }
    }
}
