import Foundation
import Testing
import TestSupport

/// Issue 29, item 3: `-w` with curl's variables, compared with curl itself on the
/// same transfers; and the `-v` / `--trace` lines.
@Suite("transfer command: -w and the trace", .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/curl"),
                                                   "curl is not installed (scripts/bootstrap.sh)"))
struct CLICurlWriteOutTests {
    /// The variables whose values must be the same as curl's.
    static let exact = ["http_code", "response_code", "http_version", "url_effective", "num_redirects",
                        "remote_ip", "remote_port", "size_download", "size_upload", "content_type", "method",
                        "scheme", "url", "filename_effective", "%header{content-length}"]
    static let times = ["time_namelookup", "time_connect", "time_appconnect", "time_pretransfer",
                        "time_starttransfer", "time_total"]

    private var format: String {
        (Self.exact + Self.times).map { $0.hasPrefix("%") ? "\($0)=\($0)" : "\($0)=%{\($0)}" }.joined(separator: "\\n")
            + "\\n"
    }

    private func values(_ text: String) -> [String: String] {
        var values: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            values[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return values
    }

    @Test("-w gives curl's values for sizes, codes and URLs on the same transfers, and ordered times")
    func sameAsCurl() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let cases: [(String, [String])] = [
            ("/bytes/1000?seed=1", []),
            ("/redirect/2", ["-L"]),
            ("/status/404", []),
            ("/upload", ["-d", "a=1&b=22"]),
        ]
        for (path, extra) in cases {
            let url = server.url(path).absoluteString
            let out = directory.file("body").path

            let ours = try CLI.run(["-s", "-o", out, "-w", format] + extra + [url])
            let curl = try Command.run("/usr/bin/curl", ["-s", "-o", out, "-w", format] + extra + [url])

            let mine = values(ours.stdoutText)
            let theirs = values(curl.stdoutText)
            #expect(mine.count == Self.exact.count + Self.times.count, "\(ours.stdoutText) \(ours.stderrText)")
            for name in Self.exact {
                #expect(mine[name] == theirs[name],
                        "\(path) \(name): ours \(mine[name] ?? "-"), curl's \(theirs[name] ?? "-")")
            }
            let seconds = Self.times.map { Double(mine[$0] ?? "") ?? -1 }
            // Each time is there (a missing one reads -1) and they come in the order of the
            // transfer's events, counted from its start.
            let (lookup, connect, appconnect, pretransfer, start, total) =
                (seconds[0], seconds[1], seconds[2], seconds[3], seconds[4], seconds[5])
            #expect(0 <= lookup && lookup <= connect && connect <= pretransfer && pretransfer <= start
                    && start <= total, "\(path): \(seconds)")
            #expect(appconnect == 0, "plain http: no TLS")
        }
    }

    @Test("-w runs once per transfer with --parallel; %{json}, @file, %{stderr} and \\n escapes")
    func perTransferAndForms() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let urls = (1...4).map { server.url("/bytes/\(10 * $0)?seed=\($0)").absoluteString }
        let formatFile = directory.file("w.txt").path
        try "%{stderr}%{urlnum} %{size_download}\\n".write(toFile: formatFile, atomically: true, encoding: .utf8)

        let parallel = try CLI.run(["-s", "--parallel", "4", "--discard", "-w",
                                    "%{url} %{http_code} %{http_version} %{remote_ip} %{num_connects}\\n"] + urls)
        let json = try CLI.run(["-s", "-o", "/dev/null", "-w", "%{json}", urls[0]])
        let fromFile = try CLI.run(["-s", "--discard", "-w", "@" + formatFile] + urls.prefix(2))
        let unknown = try CLI.run(["-s", "-w", "%{no_such_variable}", urls[0]])

        #expect(parallel.status == 0, "\(parallel.stderrText)")
        // The timings and the connection come with each line (the batch collects them for -w).
        let lines = parallel.stdoutText.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        #expect(Set(lines.map { $0.prefix(4).joined(separator: " ") }) == Set(urls.map { "\($0) 200 1.1 127.0.0.1" }),
                "\(parallel.stdoutText)")
        #expect(lines.map { $0.last }.filter { $0 == "1" }.count >= 1, "\(parallel.stdoutText)")
        #expect(parallel.stdoutText.split(separator: "\n").count == 4)
        let object = try JSONSerialization.jsonObject(with: json.stdout) as? [String: Any]
        #expect(object?["http_code"] as? Int == 200, "\(json.stdoutText)")
        #expect(object?["size_download"] as? Int == 10)
        #expect(object?["url_effective"] as? String == urls[0])
        #expect(object?["filename_effective"] as? String == "/dev/null")
        #expect(fromFile.stdout.isEmpty)
        #expect(Set(fromFile.stderrText.split(separator: "\n").map(String.init)) == ["0 10", "1 20"])
        #expect(unknown.status == 2)
        #expect(unknown.stderrText.contains("%{no_such_variable}"))
    }

    @Test("-w names the failure: exitcode, errormsg and a 000 http_code when nothing answered")
    func failureValues() throws {
        let port = try CLI.refusedPort()

        let output = try CLI.run(["-s", "-w", "%{exitcode} %{http_code} [%{errormsg}]", "http://127.0.0.1:\(port)/"])

        #expect(output.status == 4)
        #expect(output.stdoutText.hasPrefix("4 000 [cannot connect: "), "\(output.stdoutText)")
    }

    @Test("-v shows *, > and < lines with credentials redacted; --trace FILE gets the same lines")
    func traceLines() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let trace = directory.file("trace.txt").path
        let url = server.url("/basic-auth/u/pw").absoluteString

        let verbose = try CLI.run(["-v", "--progress", "none", "-u", "u:pw", "--discard", url])
        let traced = try CLI.run(["-s", "-u", "u:pw", "--trace-ascii", trace, "--discard", url])

        #expect(verbose.status == 0, "\(verbose.stderrText)")
        let lines = verbose.stderrText.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("* Connected to 127.0.0.1") }, "\(verbose.stderrText)")
        #expect(lines.contains("> GET /basic-auth/u/pw HTTP/1.1"))
        #expect(lines.contains("> User-Agent: transfer/0.1.0"))
        #expect(lines.contains("> Authorization: [redacted]"))
        #expect(lines.contains { $0.hasPrefix("< HTTP/1.1 200") })
        #expect(!verbose.stderrText.contains(Data("u:pw".utf8).base64EncodedString()))
        #expect(traced.status == 0, "\(traced.stderrText)")
        let file = try String(contentsOfFile: trace, encoding: .utf8)
        #expect(file.contains("> GET /basic-auth/u/pw HTTP/1.1\n"), "\(file)")
        #expect(file.contains("> Authorization: [redacted]\n"))
        #expect(!file.contains(Data("u:pw".utf8).base64EncodedString()))
        #expect(traced.stderrText.isEmpty, "\(traced.stderrText)")
    }

    @Test("--trace-time starts every trace line with the time of day")
    func traceTime() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let trace = directory.file("t.txt").path

        let output = try CLI.run(["-s", "--trace", trace, "--trace-time", "--discard",
                                  server.url("/bytes/3").absoluteString])

        #expect(output.status == 0, "\(output.stderrText)")
        let lines = try String(contentsOfFile: trace, encoding: .utf8).split(separator: "\n").map(String.init)
        let stamped = try Regex(#"^\d\d:\d\d:\d\d\.\d{6} [*<>] "#)
        #expect(!lines.isEmpty)
        #expect(lines.allSatisfy { $0.firstMatch(of: stamped) != nil }, "\(lines)")
        #expect(lines.contains { $0.hasSuffix(" > GET /bytes/3 HTTP/1.1") })
    }

    @Test("-v never prints a URL's password or a secret query value, in curl's lines or ours")
    func verboseRedactsURLs() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let url = "http://alice:pw-s3cret@127.0.0.1:\(server.port)/bytes/4?token=t0k3n&seed=1"

        let output = try CLI.run(["-v", "--progress", "none", "--discard", url])

        #expect(output.status == 0, "\(output.stderrText)")
        #expect(!output.stderrText.contains("pw-s3cret"), "\(output.stderrText)")
        #expect(!output.stderrText.contains("t0k3n"), "\(output.stderrText)")
        let shown = "http://alice:[redacted]@127.0.0.1:\(server.port)/bytes/4?token=[redacted]&seed=1"
        #expect(output.stderrText.contains("* GET \(shown)"), "\(output.stderrText)")
        #expect(output.stderrText.contains("> GET /bytes/4?token=[redacted]&seed=1 HTTP/1.1"))
    }
}
