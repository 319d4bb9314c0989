import Foundation
import Testing
import TestSupport

/// `-x/--proxy`, `-U/--proxy-user`, `--noproxy`, `--proxy-cacert` and the environment's
/// `http_proxy`, each run in a child process with its own environment.
@Suite("CLI proxies")
struct CLIProxyTests {
    /// The environment of a child with `http_proxy` pointing at `proxy` and nothing bypassed.
    private func environment(proxy: TestHTTPProxy) -> [String: String] {
        ["http_proxy": proxy.url, "https_proxy": "", "all_proxy": "", "no_proxy": "", "NO_PROXY": "",
         "HTTPS_PROXY": "", "ALL_PROXY": ""]
    }

    private func run(_ arguments: [String], environment: [String: String] = [:]) throws -> Command.Output {
        try Command.run(try CLI.binary(), arguments, environment: environment, timeout: .seconds(60))
    }

    @Test("-x sends the request through the proxy; by default http_proxy from the environment does")
    func explicitAndEnvironment() throws {
        let origin = try TestServer.start()
        defer { origin.stop() }
        let proxy = try TestHTTPProxy()
        defer { proxy.stop() }
        let url = origin.url("/status/200").absoluteString

        let explicit = try run(["get", "-s", "-x", "127.0.0.1:\(proxy.port)", "-o", "/dev/null", url])
        let fromEnvironment = try run(["get", "-s", "-o", "/dev/null", url], environment: environment(proxy: proxy))

        #expect(explicit.status == 0, "\(explicit.stderrText)")
        #expect(fromEnvironment.status == 0, "\(fromEnvironment.stderrText)")
        #expect(proxy.requests.map(\.target) == [url, url])
    }

    @Test("-x \"\" and --noproxy \"*\" ignore an http_proxy in the environment")
    func noneIgnoresEnvironment() throws {
        let origin = try TestServer.start()
        defer { origin.stop() }
        let proxy = try TestHTTPProxy()
        defer { proxy.stop() }
        let url = origin.url("/status/200").absoluteString

        for flags in [["-x", ""], ["--noproxy", "*"]] {
            let output = try run(["get", "-s", "-o", "/dev/null"] + flags + [url], environment: environment(proxy: proxy))
            #expect(output.status == 0, "\(flags): \(output.stderrText)")
        }

        #expect(proxy.requests.isEmpty)
        #expect(origin.requests.count == 2)
    }

    @Test("wrong proxy credentials and a refused CONNECT exit 15 (proxy failure)")
    func proxyFailureExitCode() throws {
        let origin = try TestServer.start()
        defer { origin.stop() }
        let guarded = try TestHTTPProxy(credentials: ("u", "p"))
        defer { guarded.stop() }
        let refusing = try TestHTTPProxy(refuseConnect: true)
        defer { refusing.stop() }

        let wrongUser = try run(["get", "-s", "-x", "http://127.0.0.1:\(guarded.port)", "-U", "u:wrongpw1",
                                 origin.url("/status/200").absoluteString])
        let refused = try run(["get", "-s", "-x", "127.0.0.1:\(refusing.port)",
                               "https://127.0.0.1:\(try CLI.refusedPort())/"])
        let rightUser = try run(["get", "-s", "-x", "http://u:p@127.0.0.1:\(guarded.port)", "-o", "/dev/null",
                                 origin.url("/status/200").absoluteString])

        #expect(wrongUser.status == 15, "\(wrongUser.stderrText)")
        #expect(wrongUser.stderrText.contains("proxy failure"))
        #expect(!wrongUser.stderrText.contains("wrongpw1"), "the password is not printed")
        #expect(refused.status == 15, "\(refused.stderrText)")
        #expect(rightUser.status == 0, "\(rightUser.stderrText)")
        #expect(guarded.requests.map(\.refusedWith) == [407, 0])
        #expect(refusing.requests.map(\.refusedWith) == [403])
    }

    @Test("socks5h:// sends the host name to the SOCKS server")
    func socks5h() throws {
        let origin = try TestServer.start()
        defer { origin.stop() }
        let socks = try TestSOCKS5Server(hosts: ["cli-origin.test": "127.0.0.1"])
        defer { socks.stop() }

        let output = try run(["get", "-s", "-x", "socks5h://127.0.0.1:\(socks.port)", "-o", "/dev/null",
                              "http://cli-origin.test:\(origin.port)/status/200"])

        #expect(output.status == 0, "\(output.stderrText)")
        #expect(socks.requests.map(\.destination) == [.name("cli-origin.test")])
    }

    @Test("--proxy-cacert verifies an https proxy: the right CA passes, another exits 6")
    func httpsProxyCA() throws {
        let factory = try CertificateFactory.shared()
        let origin = try TestServer.start()
        defer { origin.stop() }
        let proxy = try TestHTTPProxy()
        defer { proxy.stop() }
        let front = try TLSFront(backendPort: proxy.port,
                                 certificateChain: try factory.serverChainFile(for: factory.leaf).path,
                                 key: factory.leaf.keyFile.path)
        defer { front.stop() }
        let url = origin.url("/status/200").absoluteString
        let proxyURL = "https://127.0.0.1:\(front.port)"

        let good = try run(["get", "-s", "-x", proxyURL, "--proxy-cacert", factory.root.certificateFile.path,
                            "-o", "/dev/null", url])
        let bad = try run(["get", "-s", "-x", proxyURL, "--proxy-cacert", factory.otherRoot.certificateFile.path,
                           "-o", "/dev/null", url])

        #expect(good.status == 0, "\(good.stderrText)")
        #expect(bad.status == 6, "\(bad.stderrText)")
        #expect(proxy.requests.count == 1)
    }

    @Test("a bad -x, or -U without -x, is a usage error", arguments: [
        ["-x", "ftp://127.0.0.1:21"], ["-x", "http://127.0.0.1:0"], ["-x", "http://:8080"],
        ["-U", "a:b"], ["-x", "127.0.0.1:3128", "--noproxy", "a,,b"],
    ])
    func usage(_ flags: [String]) throws {
        let output = try run(["get", "-s"] + flags + ["http://127.0.0.1:1/"])

        #expect(output.status == 2, "\(flags): \(output.stderrText)")
    }

    @Test("-x with a bad port is refused without printing the proxy password (issue 25 item 9)")
    func badProxyHidesPassword() throws {
        let run = try run(["get", "-s", "-x", "http://user:S3CRET-PROXY@127.0.0.1:bad", "http://127.0.0.1:1/"])

        #expect(run.status != 0)
        #expect(run.stderrText.contains("bad proxy port"), "\(run.stderrText)")
        #expect(run.stderrText.contains("user:<redacted>@127.0.0.1:bad"), "\(run.stderrText)")
        #expect(!run.stderrText.contains("S3CRET"), "\(run.stderrText)")
    }
}

