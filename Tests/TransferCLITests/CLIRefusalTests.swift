import Foundation
import Testing
import TestSupport

/// Issue 30, items 4 and 6: what the command refuses, and that it refuses before any
/// transfer when it can know.
@Suite("transfer command: refusals before the transfer")
struct CLIRefusalTests {
    @Test("-O and --output-dir do not request a URL whose name is already taken, and exit 12")
    func existingRemoteNameIsNotRequested() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let original = Data("finished in an earlier run\n".utf8)
        try original.write(to: directory.file("4096"))
        let taken = server.url("/bytes/4096?seed=1").absoluteString
        let free = server.url("/bytes/5000?seed=2").absoluteString

        let several = try CLI.run(["get", "-s", "--output-dir", directory.path, taken, free])
        let single = try CLI.run(["get", "-s", "-O", "--output-dir", directory.path, taken])

        #expect(several.status == 12, "\(several.stderrText)")
        #expect(single.status == 12, "\(single.stderrText)")
        #expect(several.stderrText.contains("--clobber"))
        #expect(server.requests.map(\.path) == ["/bytes/5000"])
        #expect(try Data(contentsOf: directory.file("4096")) == original)
        #expect(try FileDigest.sha256(of: directory.file("5000")) == TestServer.sha256(seed: 2, count: 5000))
        #expect(CLI.listing(directory.path) == ["4096", "5000"])
    }

    @Test("with --clobber the URL is requested and the file replaced; -o always replaces")
    func clobberAndOutputStillReplace() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        try Data("old\n".utf8).write(to: directory.file("4096"))
        try Data("old\n".utf8).write(to: directory.file("named.bin"))

        let clobbered = try CLI.run(["get", "-s", "-O", "--clobber", "--output-dir", directory.path,
                                     server.url("/bytes/4096?seed=3").absoluteString])
        let output = try CLI.run(["get", "-s", "-o", directory.file("named.bin").path,
                                  server.url("/bytes/777?seed=4").absoluteString])

        #expect(clobbered.status == 0, "\(clobbered.stderrText)")
        #expect(output.status == 0, "\(output.stderrText)")
        #expect(try FileDigest.sha256(of: directory.file("4096")) == TestServer.sha256(seed: 3, count: 4096))
        #expect(try FileDigest.sha256(of: directory.file("named.bin")) == TestServer.sha256(seed: 4, count: 777))
        #expect(server.requests.count == 2)
    }

    @Test("-o into a missing folder and a missing --output-dir exit 12 with no request; --create-dirs makes them")
    func missingFolderNeedsCreateDirs() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let nested = directory.file("a/missing/dir/file.bin").path
        let outDir = directory.file("out/more").path
        let url = server.url("/bytes/3000?seed=6").absoluteString

        let refusedOutput = try CLI.run(["get", "-s", "-o", nested, url])
        let refusedDir = try CLI.run(["get", "-s", "-O", "--output-dir", outDir, url])

        #expect(refusedOutput.status == 12, "\(refusedOutput.stderrText)")
        #expect(refusedDir.status == 12, "\(refusedDir.stderrText)")
        #expect(refusedOutput.stderrText.contains("--create-dirs"))
        #expect(refusedDir.stderrText.contains("--create-dirs"))
        #expect(server.requests.isEmpty)
        #expect(CLI.listing(directory.path).isEmpty)

        let created = try CLI.run(["get", "-s", "--create-dirs", "-o", nested, url])
        let createdDir = try CLI.run(["get", "-s", "-O", "--create-dirs", "--output-dir", outDir, url])

        #expect(created.status == 0, "\(created.stderrText)")
        #expect(createdDir.status == 0, "\(createdDir.stderrText)")
        #expect(try FileDigest.sha256(of: URL(fileURLWithPath: nested)) == TestServer.sha256(seed: 6, count: 3000))
        #expect(try FileDigest.sha256(of: URL(fileURLWithPath: outDir + "/3000"))
            == TestServer.sha256(seed: 6, count: 3000))
    }

    @Test("a --url-file that is a folder or missing is named with its reason, exit 3, and nothing is requested")
    func urlFileErrorsNameTheFile() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let missingPath = directory.file("none.txt").path

        let folder = try CLI.run(["get", "-s", "--url-file", directory.path])
        let missing = try CLI.run(["get", "-s", "--url-file", missingPath, server.url("/bytes/10").absoluteString])

        #expect(folder.status == 3, "\(folder.stderrText)")
        #expect(folder.stderrText.hasPrefix("transfer: \(directory.path): "), "\(folder.stderrText)")
        #expect(folder.stderrText.contains("--url-file: it is a folder"), "\(folder.stderrText)")
        #expect(!folder.stderrText.contains("NSCocoaErrorDomain"))
        #expect(missing.status == 3, "\(missing.stderrText)")
        #expect(missing.stderrText.hasPrefix("transfer: \(missingPath): "), "\(missing.stderrText)")
        #expect(missing.stderrText.contains("No such file or directory"), "\(missing.stderrText)")
        #expect(server.requests.isEmpty)
    }

    @Test("a negative number is refused by the flag's own check, which names the number; exit 2")
    func negativeNumbersAreNamed() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let url = server.url("/bytes/10").absoluteString
        let cases = [
            ("--retry", "-1", "--retry: must be 0 or more, got -1"),
            ("--parallel", "-2", "--parallel: must be at least 1, got -2"),
            ("--max-redirects", "-3", "--max-redirects: must be 0 or more, got -3"),
            ("--segments", "-4", "--segments: must be at least 1, got -4"),
            ("--limit-rate", "-5", "--limit-rate: not a rate: -5"),
            ("-m", "-6", "--timeout"),
            ("--connect-timeout", "-7", "--connect-timeout"),
        ]

        for (flag, value, message) in cases {
            let output = try CLI.run(["get", "-s", flag, value, url])

            #expect(output.status == 2, "\(flag) \(value): \(output.stderrText)")
            #expect(output.stderrText.contains(message), "\(flag) \(value): \(output.stderrText)")
            #expect(!output.stderrText.contains("Missing value"), "\(flag) \(value): \(output.stderrText)")
        }
        #expect(server.requests.isEmpty)
    }

    @Test("--limit-rate 0 and --limit-rate-total 0 mean no limit, as curl's --limit-rate 0")
    func zeroRateIsUnlimited() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let count = 300_000

        let perTransfer = try CLI.run(["get", "-s", "--limit-rate", "0", "-o", directory.file("one").path,
                                       server.url("/bytes/\(count)?seed=11").absoluteString])
        let total = try CLI.run(["get", "-s", "--limit-rate-total", "0k", "--output-dir", directory.path,
                                 server.url("/bytes/\(count + 1)?seed=12").absoluteString,
                                 server.url("/bytes/\(count + 2)?seed=13").absoluteString])

        #expect(perTransfer.status == 0, "\(perTransfer.stderrText)")
        #expect(total.status == 0, "\(total.stderrText)")
        #expect(try FileDigest.sha256(of: directory.file("one")) == TestServer.sha256(seed: 11, count: count))
        #expect(try FileDigest.sha256(of: directory.file("\(count + 1)")) == TestServer.sha256(seed: 12, count: count + 1))
        #expect(try FileDigest.sha256(of: directory.file("\(count + 2)")) == TestServer.sha256(seed: 13, count: count + 2))
        #expect(server.requests.count == 3)
    }

    /// Runs the command under `umask mask` (in a shell of its own: the test
    /// process's umask is shared by tests running in parallel).
    private func run(umask mask: String, _ arguments: [String]) throws -> Command.Output {
        try Command.run("/bin/sh", ["-c", "umask \(mask) && exec \"$0\" \"$@\"", try CLI.binary()] + arguments,
                        timeout: .seconds(60))
    }

    private func mode(_ path: String) -> mode_t {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_mode & 0o777 : 0
    }

    @Test("placed files follow the umask as curl's do: -o, -O, a body kept in memory, --segments")
    func placedFilesFollowTheUmask() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let count = 5 * 1024 * 1024 + 5   // over 1 MiB per connection, or --segments uses one
        let big = server.url("/bytes/\(count)?seed=14").absoluteString

        for (mask, expected) in [("027", mode_t(0o640)), ("002", mode_t(0o664)), ("077", mode_t(0o600))] {
            let folder = directory.file(mask).path
            #expect(mkdir(folder, 0o700) == 0)

            let output = try run(umask: mask, ["get", "-s", "-o", folder + "/o.bin", server.url("/bytes/5000").absoluteString])
            let remote = try run(umask: mask, ["get", "-s", "-O", "--output-dir", folder,
                                               server.url("/bytes/6000").absoluteString])
            let memory = try run(umask: mask, ["post", "-s", "--data", "x=1", "-o", folder + "/posted",
                                               server.url("/echo").absoluteString])
            let segmented = try run(umask: mask, ["get", "-s", "--segments", "4", "-o", folder + "/seg.bin", big])

            for result in [output, remote, memory, segmented] { #expect(result.status == 0, "\(result.stderrText)") }
            #expect(CLI.listing(folder) == ["6000", "o.bin", "posted", "seg.bin"])
            for name in CLI.listing(folder) {
                #expect(mode(folder + "/" + name) == expected, "umask \(mask): \(name) is \(String(mode(folder + "/" + name), radix: 8))")
            }
            #expect(try FileDigest.sha256(of: URL(fileURLWithPath: folder + "/seg.bin")) == TestServer.sha256(seed: 14, count: count))
        }
    }
}
