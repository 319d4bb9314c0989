import Foundation
import Testing
import TestSupport

/// `--serializer xml` and `--serializer plist` (exit 10 on a body that does
/// not parse or a content type that is not acceptable), over nginx, which
/// serves `.xml` as application/xml and `.plist` as application/x-plist.
@Suite("transfer command: --serializer xml and plist", .enabled(if: NginxFixture.isInstalled, "nginx is not installed (apt-get install nginx)"))
struct CLISerializerTests {
    /// Writes `files` under a fresh folder of the content root; returns the URL of each by name.
    private func serve(_ files: [String: Data], on nginx: NginxFixture) throws -> [String: String] {
        let folder = "cli-serializer-\(UUID().uuidString)"
        try FileManager.default.createDirectory(
            atPath: nginx.contentRoot + "/" + folder, withIntermediateDirectories: true)
        var urls: [String: String] = [:]
        for (name, body) in files {
            try body.write(to: URL(fileURLWithPath: nginx.contentRoot + "/\(folder)/\(name)"))
            urls[name] = nginx.url(.http, "/\(folder)/\(name)").absoluteString
        }
        return urls
    }

    @Test("well-formed XML prints as received; malformed XML and the wrong content type exit 10")
    func xml() throws {
        let nginx = try NginxFixture.shared()
        let good = Data("<?xml version=\"1.0\"?>\n<feed><entry id=\"1\">a &amp; b</entry><entry id=\"2\"/></feed>\n".utf8)
        let urls = try serve(
            ["good.xml": good, "unclosed.xml": Data("<feed><entry></feed>".utf8),
             "entity.xml": Data("<feed>&nbsp;</feed>".utf8), "good.bin": good],
            on: nginx)

        let ok = try CLI.run(["get", "--serializer", "xml", urls["good.xml"]!])
        #expect(ok.status == 0, "\(ok.stderrText)")
        #expect(ok.stdout == good)

        for name in ["unclosed.xml", "entity.xml"] {
            let bad = try CLI.run(["get", "--serializer", "xml", urls[name]!])
            #expect(bad.status == 10, "\(name): \(bad.stderrText)")
            #expect(bad.stderrText.contains("not well-formed XML"), "\(name): \(bad.stderrText)")
        }
        let wrongType = try CLI.run(["get", "--serializer", "xml", urls["good.bin"]!])
        #expect(wrongType.status == 10, "\(wrongType.stderrText)")
        #expect(wrongType.stderrText.contains("unacceptable content-type"), "\(wrongType.stderrText)")
    }

    @Test("XML, binary and OpenStep property lists pass; a broken one exits 10")
    func propertyList() throws {
        let nginx = try NginxFixture.shared()
        let value: [String: Any] = ["name": "transfer", "count": 3, "ratio": 1.5, "ok": true,
                                    "when": Date(timeIntervalSince1970: 1_700_000_000),
                                    "bytes": Data([0, 1, 2]), "list": ["a", ["b": 1]]]
        let xml = try PropertyListSerialization.data(fromPropertyList: value, format: .xml, options: 0)
        let binary = try PropertyListSerialization.data(fromPropertyList: value, format: .binary, options: 0)
        var truncated = binary
        truncated.removeLast(12)   // cuts the trailer: the offsets no longer resolve
        let urls = try serve(
            ["xml.plist": xml, "binary.plist": binary, "openstep.plist": Data("{ a = (1, 2); b = \"c\"; }".utf8),
             "broken.plist": Data("<plist><dict><key>a</key></dict></plist>".utf8),
             "truncated.plist": truncated],
            on: nginx)

        for name in ["xml.plist", "binary.plist", "openstep.plist"] {
            let ok = try CLI.run(["get", "--serializer", "plist", urls[name]!])
            #expect(ok.status == 0, "\(name): \(ok.stderrText)")
        }
        for name in ["broken.plist", "truncated.plist"] {
            let bad = try CLI.run(["get", "--serializer", "plist", urls[name]!])
            #expect(bad.status == 10, "\(name): \(bad.stderrText)")
            #expect(bad.stderrText.contains("not a valid property list"), "\(name): \(bad.stderrText)")
        }
    }
}
