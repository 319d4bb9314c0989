import Foundation
import Testing
import TestSupport

/// `--max-filesize` and the decompression limits from the command line
/// (issue 11, item 10): an oversized body exits 11 and places nothing.
@Suite("CLI limits")
struct CLILimitTests {
    @Test("--max-filesize: a body over it exits 11 and places nothing, one under it succeeds")
    func maxFilesize() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let announced = server.url("/bytes/3000000?seed=4").absoluteString
        let chunked = server.url("/chunked/3000000?seed=4&chunk=65536").absoluteString
        let small = server.url("/bytes/100000?seed=4").absoluteString

        let a = try CLI.run(["get", "--max-filesize", "1M", "-o", directory.file("a").path, announced])
        let b = try CLI.run(["get", "--max-filesize", "1M", "-o", directory.file("b").path, chunked])
        let toStdout = try CLI.run(["get", "--max-filesize", "1M", chunked])
        let inMemory = try CLI.run(["post", "--data", "x", "--max-filesize", "1M", announced])
        let ok = try CLI.run(["get", "--max-filesize", "1M", "-o", directory.file("ok").path, small])
        let usage = try CLI.run(["get", "--max-filesize", "lots", small])

        #expect(a.status == 11, "\(a.stderrText)")
        #expect(b.status == 11, "\(b.stderrText)")
        #expect(toStdout.status == 11, "\(toStdout.stderrText)")
        #expect(toStdout.stdout.isEmpty)
        #expect(inMemory.status == 11, "\(inMemory.stderrText)")
        #expect(ok.status == 0, "\(ok.stderrText)")
        #expect(usage.status == 2)
        #expect(CLI.listing(directory.path) == ["ok"])
    }

    @Test("a gzip bomb exits 11 and leaves no file")
    func gzipBomb() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()

        let result = try CLI.run(["get", "-o", directory.file("bomb").path,
                                  server.url("/gzip-zeros/268435456").absoluteString])

        #expect(result.status == 11, "\(result.stderrText)")
        #expect(CLI.listing(directory.path).isEmpty)
    }
}
