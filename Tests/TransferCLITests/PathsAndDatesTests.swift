import Foundation
import Testing
@testable import TransferCLI

/// The command's own path joins and `-z` dates (it runs without full
/// Foundation, so without `NSString` paths and `DateFormatter`).
@Suite("transfer command: paths and -z dates")
struct PathsAndDatesTests {
    @Test("paths join, split and name as NSString's path methods did")
    func paths() {
        #expect(Path.join("a", "b") == "a/b")
        #expect(Path.join("a/", "/b") == "a/b")
        #expect(Path.join("", "b") == "b")
        #expect(Path.join("/", "b") == "/b")
        #expect(Path.join("/out", "x.part") == "/out/x.part")
        #expect(Path.parent("/a/b") == "/a")
        #expect(Path.parent("a") == "")
        #expect(Path.parent("/a") == "/")
        #expect(Path.parent("a/b/") == "a")
        #expect(Path.lastComponent("a/b/") == "b")
        #expect(Path.lastComponent("/") == "/")
        #expect(Path.lastComponent("name") == "name")
        // Relative paths stay relative, as written.
        #expect(Path.join(".", "x") == "./x")
        #expect(Path.join("..", "x") == "../x")
        #expect(Path.join("a b", "c d") == "a b/c d")
        #expect(Path.parent("./x") == ".")
        #expect(Path.parent("../x") == "..")
        #expect(Path.lastComponent("../x") == "x")
        // A `~` is a name, never a home folder.
        #expect(Path.join("~", "x") == "~/x")
        #expect(Path.join("~root", "x") == "~root/x")
        #expect(Path.join("out", "~alice") == "out/~alice")
        #expect(Path.parent("~/x") == "~")
        #expect(Path.parent("~x") == "")
        #expect(Path.lastComponent("~") == "~")
        #expect(Path.lastComponent("~root") == "~root")
        for (directory, name) in [("a", "b"), ("/x/y", "z.bin"), ("rel/dir", "f")] {
            let joined = Path.join(directory, name)
            #expect(Path.parent(joined) == directory)
            #expect(Path.lastComponent(joined) == name)
        }
    }

    @Test("-z dates: an IMF-fixdate is written, and curl's common forms are read in UTC")
    func dates() {
        let instant = Date(timeIntervalSince1970: 784_111_777)   // Sun, 06 Nov 1994 08:49:37 GMT
        #expect(CurlDate.httpDate(instant) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(CurlDate.httpDate(Date(timeIntervalSince1970: 0)) == "Thu, 01 Jan 1970 00:00:00 GMT")
        for text in ["Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
                     "1994-11-06T08:49:37Z", "1994-11-06T09:49:37+01:00", "1994-11-06T07:49:37-0100",
                     "1994-11-06T08:49:37", "1994-11-06 08:49:37", "06 Nov 1994 08:49:37"]
        {
            #expect(CurlDate.parse(text) == instant, "\(text)")
        }
        let midnight = Date(timeIntervalSince1970: 784_080_000)   // 1994-11-06 00:00:00 UTC
        for text in ["1994-11-06", "6 nov 1994", "19941106"] {
            #expect(CurlDate.parse(text) == midnight, "\(text)")
        }
        for text in ["1994-02-30", "garbage", "1994-11-06T08:49:37+25:00", "1994-11-06 08:49", "31 Feb 2001",
                     "2001-1-01", ""] {
            #expect(CurlDate.parse(text) == nil, "\(text)")
        }
    }
}
