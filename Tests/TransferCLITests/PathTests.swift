import Foundation
import Testing
@testable import TransferCLI

/// The command's path joins and splits (FoundationEssentials' `URL(filePath:)`
/// behind a wrapper that keeps `~` and relative paths as written).
@Suite("transfer command: paths")
struct PathTests {
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
}
