import Foundation
import Testing
import TestSupport

/// Issue 29, items 1, 4 and 5: a curl command line without a verb, --version, the
/// default User-Agent, and options we refuse by name.
@Suite("transfer command: curl's command line")
struct CLICurlCommandLineTests {
    @Test("without a verb a URL is fetched with GET, and -d makes it a POST with the form body")
    func noVerbMeansGetOrPost() throws {
        let server = try TestServer.start()
        defer { server.stop() }

        let get = try CLI.run(["-s", server.url("/bytes/64?seed=3").absoluteString])
        let post = try CLI.run(["-s", "-d", "a=1", "-d", "b=2", server.url("/echo").absoluteString])

        #expect(get.status == 0, "\(get.stderrText)")
        #expect(get.stdout == TestServer.bytes(seed: 3, count: 64))
        #expect(post.status == 0, "\(post.stderrText)")
        #expect(server.requests.map(\.method) == ["GET", "POST"])
        #expect(server.requests.last?.header("Content-Type") == "application/x-www-form-urlencoded")
        let echo = try JSONSerialization.jsonObject(with: post.stdout) as? [String: Any]
        #expect(echo?["body_sha256"] as? String == FileDigest.sha256(Data("a=1&b=2".utf8)))
    }

    @Test("--version prints our version, libcurl's with OpenSSL and nghttp2, and the features; exit 0")
    func versionLines() throws {
        let output = try CLI.run(["--version"])

        #expect(output.status == 0, "\(output.stderrText)")
        let lines = output.stdoutText.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("transfer 0.") == true, "\(output.stdoutText)")
        #expect(lines.first?.contains(" libcurl/") == true)
        #expect(lines.first?.contains(" OpenSSL/") == true)
        #expect(lines.first?.contains(" nghttp2/") == true)
        #expect(lines.contains("Protocols: http https"))
        #expect(lines.contains { $0.hasPrefix("Features: ") && $0.contains("HTTP2") })
    }

    @Test("the User-Agent is transfer/VERSION once; -A and -H replace it, -H \"User-Agent:\" removes it")
    func userAgent() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let url = server.url("/bytes/1").absoluteString

        for arguments in [[url], ["-A", "probe/1", url], ["-A", "probe/1", "-H", "User-Agent: header/2", url],
                          ["-H", "User-Agent:", url], ["--parallel", "2", url, url]]
        {
            let output = try CLI.run(["-s", "--discard"] + arguments)
            #expect(output.status == 0, "\(arguments): \(output.stderrText)")
        }

        let agents = server.requests.map { request in
            request.headers.filter { $0.name.lowercased() == "user-agent" }.map(\.value)
        }
        #expect(agents.count == 6)
        #expect(agents[0] == ["transfer/0.1.0"])
        #expect(agents[1] == ["probe/1"])
        #expect(agents[2] == ["header/2"])
        #expect(agents[3] == [])
        #expect(agents[4] == ["transfer/0.1.0"] && agents[5] == ["transfer/0.1.0"])
    }

    @Test("a curl option we do not support is refused by name with our equivalent, never as unknown (exit 2)")
    func refusedOptions() throws {
        let cases: [([String], String)] = [
            (["--http3", "http://127.0.0.1:9/"], "--http3: not supported by this build's libcurl"),
            (["--socks4", "h:1", "http://127.0.0.1:9/"], "--socks4: not supported: use -x socks5://HOST:PORT"),
            (["--capath", "/etc/ssl/certs", "http://127.0.0.1:9/"], "--capath: not supported: use --cacert FILE"),
            (["-C", "100", "-o", "/dev/null", "http://127.0.0.1:9/"], "-C 100: only -C - is supported"),
            (["--no-such-thing", "http://127.0.0.1:9/"], "--no-such-thing: not an option of transfer"),
        ]
        for (arguments, message) in cases {
            let output = try CLI.run(arguments)

            #expect(output.status == 2, "\(arguments): \(output.stderrText)")
            #expect(output.stderrText.contains(message), "\(arguments): \(output.stderrText)")
            #expect(!output.stderrText.contains("Unknown option"), "\(output.stderrText)")
        }
    }

    @Test("-f, -S, -L, --compressed, -N, -J, -Z, -#, -g, -q, --basic are accepted; -f keeps exit 9 on a 404")
    func acceptedDefaults() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()

        let ok = try CLI.run(["-q", "-fsSL", "--compressed", "-N", "-J", "-Z", "-#", "-g", "--retry-connrefused",
                              "--tcp-nodelay",
                              "--basic", "-u", "a:b", "-o", directory.file("a").path,
                              server.url("/redirect/1").absoluteString])
        let notFound = try CLI.run(["-f", "-s", server.url("/status/404").absoluteString])

        #expect(ok.status == 0, "\(ok.stderrText)")
        #expect(try String(contentsOf: directory.file("a"), encoding: .utf8) == #"{"redirects":"done"}"#)
        #expect(CLI.controlBytes(ok.stderr).isEmpty)
        #expect(notFound.status == 9, "\(notFound.stderrText)")
        #expect(notFound.stdout.isEmpty)
        #expect(server.requests.first?.header("Authorization") == "Basic " + Data("a:b".utf8).base64EncodedString())
    }

    @Test("--remote-name-all is -O, --show-headers is -i, --no-progress-meter draws nothing")
    func aliases() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()

        let named = try CLI.run(["--no-progress-meter", "--progress", "bar", "--remote-name-all", "--output-dir",
                                 directory.path, server.url("/bytes/7?seed=2").absoluteString])
        let headers = try CLI.run(["-s", "--show-headers", server.url("/bytes/7?seed=2").absoluteString])

        #expect(named.status == 0, "\(named.stderrText)")
        #expect(named.stderr.isEmpty, "\(named.stderrText)")
        #expect(CLI.listing(directory.path) == ["7"])
        #expect(headers.stdoutText.hasPrefix("HTTP/1.1 200"))
        #expect(headers.stdout.suffix(7) == TestServer.bytes(seed: 2, count: 7))
    }

    @Test("a value stuck to its short option reads as in curl: -XPUT, -d@FILE, -uUSER:PW, -sSLoPATH, -C-")
    func attachedValues() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let body = directory.file("body.txt")
        try Data("k=v\n".utf8).write(to: body)

        let put = try CLI.run(["-s", "-XPUT", "-d@" + body.path, "-ualice:pw", server.url("/echo").absoluteString])
        let saved = try CLI.run(["-sSLo" + directory.file("out").path, "-C-",
                                 server.url("/bytes/9?seed=4").absoluteString])

        #expect(put.status == 0, "\(put.stderrText)")
        #expect(server.requests.first?.method == "PUT")
        let basic = "Basic " + Data("alice:pw".utf8).base64EncodedString()
        #expect(server.requests.first?.header("Authorization") == basic)
        let echo = try JSONSerialization.jsonObject(with: put.stdout) as? [String: Any]
        #expect(echo?["body_length"] as? Int == 3, "-d @FILE drops the newline: \(put.stdoutText)")
        #expect(saved.status == 0, "\(saved.stderrText)")
        #expect(try Data(contentsOf: directory.file("out")) == TestServer.bytes(seed: 4, count: 9))
    }

    @Test("curl's --parallel flag and --parallel-max N run every URL")
    func parallelFlag() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let urls = (1...3).map { server.url("/bytes/\(100 + $0)?seed=\($0)").absoluteString }

        let flag = try CLI.run(["-s", "--parallel", "--output-dir", directory.path] + urls)
        let max = try CLI.run(["-s", "--parallel-max", "2", "--discard"] + urls)

        #expect(flag.status == 0, "\(flag.stderrText)")
        #expect(max.status == 0, "\(max.stderrText)")
        #expect(CLI.listing(directory.path) == ["101", "102", "103"])
        #expect(server.requests.count == 6)
    }
}
