import Foundation
import Testing
import Transfer

@Suite("Suggested filename")
struct SuggestedFilenameTests {
    func response(_ disposition: String?, url: String = "http://example.com/files/report.pdf") -> HTTPResponse {
        var headers = HTTPHeaders()
        if let disposition { headers.add(name: "Content-Disposition", value: disposition) }
        return HTTPResponse(url: URL(string: url)!, statusCode: 200, headers: headers)
    }

    @Test("filename from a quoted Content-Disposition parameter")
    func quoted() {
        #expect(response(#"attachment; filename="annual report.pdf""#).suggestedFilename == "annual report.pdf")
        #expect(response(#"attachment; filename="semi;colon \"q\".txt"; size=3"#).suggestedFilename
            == #"semi;colon "q".txt"#)
    }

    @Test("filename* (RFC 5987) wins over filename and is percent-decoded as UTF-8")
    func extended() {
        let value = #"attachment; filename="fallback.txt"; filename*=UTF-8''%E2%82%AC%20rates.txt"#
        #expect(response(value).suggestedFilename == "€ rates.txt")
        #expect(response("attachment; filename*=iso-8859-1'en'caf%E9.txt").suggestedFilename == "café.txt")
    }

    @Test("a token filename without quotes")
    func token() {
        #expect(response("attachment; filename=data.csv").suggestedFilename == "data.csv")
    }

    @Test("without Content-Disposition the URL's last path component is used, decoded")
    func fromURL() {
        #expect(response(nil).suggestedFilename == "report.pdf")
        #expect(response(nil, url: "http://example.com/a/b%20c.zip?x=1").suggestedFilename == "b c.zip")
        #expect(response(nil, url: "http://example.com/").suggestedFilename == "download")
    }

    @Test("hostile names become one safe component",
          arguments: [
              (#"attachment; filename="../../etc/passwd""#, "passwd"),
              ("attachment; filename=/etc/shadow", "shadow"),
              (#"attachment; filename="..\..\win.ini""#, "win.ini"),
              ("attachment; filename*=UTF-8''..%2F..%2Fevil%00name.txt", "evilname.txt"),
              ("attachment; filename=\"a\u{0}b\u{1}c\u{7f}.txt\"", "abc.txt"),
              (#"attachment; filename="..""#, "report.pdf"),
              (#"attachment; filename="   ""#, "report.pdf"),
              (#"attachment; filename=".bashrc""#, "bashrc"),
          ])
    func hostile(value: String, expected: String) {
        let name = response(value).suggestedFilename
        #expect(name == expected)
        #expect(!name.contains("/") && !name.contains("\\") && !name.contains("\0") && name != ".." && !name.isEmpty)
    }

    @Test("destination(inDirectory:) appends the suggested name to the folder")
    func destinationHelper() {
        let folder = URL(fileURLWithPath: "/tmp/downloads")
        let destination = DownloadTask.destination(inDirectory: folder)
        let url = destination(URL(fileURLWithPath: "/tmp/x.part"), response(#"attachment; filename="../../x.bin""#))
        #expect(url.path == "/tmp/downloads/x.bin")
    }
}
