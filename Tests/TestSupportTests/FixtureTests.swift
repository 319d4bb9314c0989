import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

// These tests prove the fixtures themselves over real loopback sockets, with /usr/bin/curl
// and a raw POSIX client: never with the Transfer library they exist to test.

private let curlPath = "/usr/bin/curl"

/// Runs curl quietly (`-sS`) with `arguments`.
private func curl(_ arguments: [String], timeout: Duration = .seconds(60)) throws -> Command.Output {
    try Command.run(curlPath, ["-sS"] + arguments, timeout: timeout)
}

private func jsonObject(_ data: Data) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
}

/// A blocking loopback client on a raw socket, with a 5 s receive timeout.
private final class RawClient {
    let fd: Int32

    init(port: UInt16) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(fd)
            throw TestSupportError("connect to \(port) failed: errno \(errno)")
        }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit {
        close(fd)
    }

    func send(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Everything until the server closes (or the receive timeout).
    func readToEnd() -> String {
        var all = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
            if n <= 0 { break }
            all += buffer[0..<n]
        }
        return String(decoding: all, as: UTF8.self)
    }
}

@Suite("TestSupport helpers")
struct SupportHelperTests {
    @Test("the deterministic stream gives the same bytes at any offset")
    func streamIsSeekable() {
        let whole = DeterministicBytes.data(seed: 9, count: 1000)

        let tail = DeterministicBytes.data(seed: 9, offset: 13, count: 987)

        #expect(tail == whole[13...])
        #expect(DeterministicBytes.data(seed: 10, count: 1000) != whole)
    }

    @Test("a temporary directory is unique and removes itself")
    func temporaryDirectory() throws {
        let first = try TemporaryDirectory()
        let second = try TemporaryDirectory()
        try Data("x".utf8).write(to: first.file("a.txt"))

        #expect(first.path != second.path)
        #expect(FileManager.default.fileExists(atPath: first.file("a.txt").path))
        first.remove()

        #expect(!FileManager.default.fileExists(atPath: first.path))
    }

    @Test("a bounded wait returns as soon as the condition holds and reports a timeout")
    func boundedWait() throws {
        var calls = 0

        let reached = Wait.poll(timeout: .seconds(5)) {
            calls += 1
            return calls == 3
        }

        // Returned on the first true: the condition was not asked again.
        #expect(reached)
        #expect(calls == 3)
        #expect(!Wait.poll(timeout: .milliseconds(20)) { false })
        #expect(throws: WaitTimedOut.self) { try Wait.until("never", timeout: .milliseconds(20)) { false } }
    }
}

@Suite("TestServer over real sockets")
struct TestServerTests {
    @Test("two servers listen on different kernel-chosen ports")
    func randomPorts() throws {
        let a = try TestServer.start()
        defer { a.stop() }
        let b = try TestServer.start()
        defer { b.stop() }

        #expect(a.port != 0 && b.port != 0)
        #expect(a.port != b.port)
    }

    @Test("/bytes serves the deterministic stream whose digest TestServer.sha256 predicts")
    func bytesDigest() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let file = directory.file("body.bin")

        let out = try curl(["-o", file.path, "-w", "%{http_code}", server.url("/bytes/3000017?seed=7").absoluteString])

        #expect(out.stdoutText == "200")
        #expect(try FileDigest.sha256(of: file) == TestServer.sha256(seed: 7, count: 3_000_017))
    }

    @Test("a Range request gets 206 with exactly that slice and a Content-Range")
    func ranges() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let url = server.url("/bytes/10000?seed=2").absoluteString

        let part = try curl(["-D", "-", "-o", "/dev/null", "-r", "100-199", url]).stdoutText
        let body = try curl(["-r", "100-199", url]).stdout
        let open = try curl(["-r", "9990-", url]).stdout

        #expect(part.hasPrefix("HTTP/1.1 206"))
        #expect(part.contains("Content-Range: bytes 100-199/10000"))
        #expect(part.contains("Accept-Ranges: bytes"))
        #expect(body == TestServer.bytes(seed: 2, offset: 100, count: 100))
        #expect(open == TestServer.bytes(seed: 2, offset: 9990, count: 10))
    }

    @Test("If-Range with a stale ETag, ranges=0 and an unsatisfiable range behave like a server should")
    func rangeValidators() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let url = server.url("/bytes/1000?seed=1").absoluteString

        let matching = try curl(
            ["-o", "/dev/null", "-w", "%{http_code}", "-r", "0-9", "-H", "If-Range: \"s1-n1000\"", url])
        let stale = try curl(["-o", "/dev/null", "-w", "%{http_code}", "-r", "0-9", "-H", "If-Range: \"old\"", url])
        let changed = try curl(["-D", "-", "-o", "/dev/null", server.url("/bytes/1000?seed=1&etag=v2").absoluteString])
        let ignored = try curl(["-w", "%{http_code}", "-r", "0-9", server.url("/bytes/1000?ranges=0").absoluteString])
        let beyond = try curl(["-o", "/dev/null", "-w", "%{http_code}", "-r", "5000-", url])

        #expect(matching.stdoutText == "206")
        #expect(stale.stdoutText == "200")
        #expect(changed.stdoutText.contains("ETag: \"v2\""))
        #expect(changed.stdoutText.contains("Last-Modified: \(TestServer.lastModified)"))
        #expect(ignored.stdout.count == 1003 && ignored.stdoutText.hasSuffix("200"))
        #expect(beyond.stdoutText == "416")
    }

    @Test("/truncate sends half of what it announces and /reset ends with a connection reset")
    func truncationAndReset() throws {
        let server = try TestServer.start()
        defer { server.stop() }

        let truncated = try curl([
            "-o", "/dev/null", "-w", "%{size_download}", server.url("/truncate/100000").absoluteString,
        ])
        let reset = try curl(["-o", "/dev/null", server.url("/reset/4000000").absoluteString])

        #expect(truncated.status == 18)  // CURLE_PARTIAL_FILE
        #expect(truncated.stdoutText == "50000")
        #expect(reset.status == 56)  // CURLE_RECV_ERROR
        #expect(reset.stderrText.lowercased().contains("reset"))
    }

    @Test("/garbage is not HTTP for curl, in the status line or in a header")
    func garbage() throws {
        let server = try TestServer.start()
        defer { server.stop() }

        let status = try curl(["-o", "/dev/null", server.url("/garbage").absoluteString])
        let header = try curl(["-o", "/dev/null", server.url("/garbage?kind=header").absoluteString])

        #expect(status.status != 0)
        #expect(header.status != 0)
    }

    @Test("a chain of five redirects ends in 200 and a loop exhausts curl's limit")
    func redirects() throws {
        let server = try TestServer.start()
        defer { server.stop() }

        let chain = try curl(["-L", "-w", " %{http_code} %{num_redirects}", server.url("/redirect/5").absoluteString])
        let loop = try curl(["-L", "--max-redirs", "7", "-o", "/dev/null", server.url("/redirect-loop").absoluteString])
        let away = try curl(
            [
                "-D", "-", "-o", "/dev/null",
                server.url("/redirect-to?url=ftp%3A%2F%2Fexample.invalid%2Fx").absoluteString,
            ])

        #expect(chain.stdoutText == #"{"redirects":"done"} 200 5"#)
        #expect(loop.status == 47)  // CURLE_TOO_MANY_REDIRECTS
        #expect(away.stdoutText.contains("Location: ftp://example.invalid/x"))
    }

    @Test("/echo reports the method, headers and the digest of the body it read")
    func echo() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let body = DeterministicBytes.data(seed: 5, count: 200_001)
        try body.write(to: directory.file("body.bin"))

        let out = try curl([
            "-X", "PUT", "-H", "X-Test: yes", "--data-binary", "@" + directory.file("body.bin").path,
            server.url("/echo?a=1&b=two").absoluteString,
        ])
        let echo = try jsonObject(out.stdout)

        #expect(echo["method"] as? String == "PUT")
        #expect(echo["path"] as? String == "/echo")
        #expect((echo["query"] as? [String: String]) == ["a": "1", "b": "two"])
        #expect((echo["headers"] as? [String: String])?["x-test"] == "yes")
        #expect(echo["body_length"] as? Int == body.count)
        #expect(echo["body_sha256"] as? String == FileDigest.sha256(body))
    }

    @Test("/upload reads chunked and 100-continue bodies, and reject=1 answers 413 without reading")
    func upload() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let body = DeterministicBytes.data(seed: 6, count: 3 << 20)
        try body.write(to: directory.file("up.bin"))
        let source = "@" + directory.file("up.bin").path

        let chunked = try curl([
            "-H", "Transfer-Encoding: chunked", "-H", "Expect: 100-continue", "--data-binary", source,
            server.url("/upload").absoluteString,
        ])
        let rejected = try curl([
            "-H", "Expect: 100-continue", "-o", "/dev/null", "-w", "%{http_code} %{size_upload}",
            "--data-binary", source, server.url("/upload?reject=1").absoluteString,
        ])
        let result = try jsonObject(chunked.stdout)

        #expect(result["length"] as? Int == body.count)
        #expect(result["sha256"] as? String == FileDigest.sha256(body))
        #expect(rejected.stdoutText == "413 0")
    }

    @Test("/chunked, /json, /status, /content-disposition and /basic-auth answer as documented")
    func smallRoutes() throws {
        let server = try TestServer.start()
        defer { server.stop() }

        let chunked = try curl(["-D", "-", server.url("/chunked/5000?seed=4&chunk=333").absoluteString])
        let json = try curl([server.url("/json").absoluteString])
        let status = try curl(["-o", "/dev/null", "-w", "%{http_code}", server.url("/status/503").absoluteString])
        let disposition = try curl([
            "-D", "-", "-o", "/dev/null",
            server.url("/content-disposition?name=attachment%3B%20filename%3D%22r%C3%A9sum%C3%A9.pdf%22")
                .absoluteString,
        ])
        let authorised = try curl(
            ["-u", "ann:secret", "-w", " %{http_code}", server.url("/basic-auth/ann/secret").absoluteString])
        let refused = try curl([
            "-D", "-", "-o", "/dev/null", "-u", "ann:wrong", server.url("/basic-auth/ann/secret").absoluteString,
        ])

        #expect(chunked.stdoutText.contains("Transfer-Encoding: chunked"))
        #expect(chunked.stdout.suffix(5000) == TestServer.bytes(seed: 4, count: 5000))
        #expect(json.stdoutText == TestServer.jsonBody)
        #expect(status.stdoutText == "503")
        #expect(disposition.stdoutText.contains("Content-Disposition: attachment; filename=\"résumé.pdf\""))
        #expect(authorised.stdoutText.hasSuffix("} 200"))
        #expect(refused.stdoutText.hasPrefix("HTTP/1.1 401"))
        #expect(refused.stdoutText.contains("WWW-Authenticate: Basic realm=\"TestServer\""))
    }

    @Test("/delay, /stall and /stall-headers hold the client until its own timeout")
    func stalls() throws {
        let server = try TestServer.start()
        defer { server.stop() }

        let quick = try curl(["-w", "%{http_code}", "-o", "/dev/null", server.url("/delay?ms=50").absoluteString])
        let late = try curl(["--max-time", "0.5", "-o", "/dev/null", server.url("/delay?ms=60000").absoluteString])
        let stall = try curl(["--max-time", "0.5", "-o", "/dev/null", server.url("/stall").absoluteString])
        let silent = try curl(["--max-time", "0.5", "-o", "/dev/null", server.url("/stall-headers").absoluteString])

        #expect(quick.stdoutText == "200")
        // Only curl's own timeout ends these (CURLE_OPERATION_TIMEDOUT); the server then sees
        // each client hang up and lets go of it.
        #expect(late.status == 28 && stall.status == 28 && silent.status == 28)
        #expect(server.requestCount == 4)
        #expect(server.waitForOpenConnections(0), "the server still holds \(server.openConnections) connections")
    }

    @Test("/slow paces its body at the requested rate")
    func slow() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let paced = server.url("/slow?rate=100000&size=100000").absoluteString
        let unpaced = server.url("/bytes/1048576").absoluteString

        // Both at once; curl writes each line as its transfer completes.
        let out = try curl([
            "--parallel", "--parallel-immediate", "-w", "%{url_effective} %{size_download}\n",
            "-o", "/dev/null", "-o", "/dev/null", paced, unpaced,
        ])

        // 100 000 bytes paced at 100 000 B/s come in after 1 MiB sent at once, ten times as
        // large, although both started together.
        #expect(out.stdoutText.split(separator: "\n") == ["\(unpaced) 1048576", "\(paced) 100000"], "\(out.stdoutText)")
    }

    @Test("keep-alive reuses one connection, the counters see it, and it closes when the client leaves")
    func keepAliveAndCounters() throws {
        let server = try TestServer.start()
        defer { server.stop() }

        let out = try curl([
            "-o", "/dev/null", "-o", "/dev/null", "-o", "/dev/null", "-w", "%{num_connects}\n",
            server.url("/json").absoluteString, server.url("/bytes/10").absoluteString,
            server.url("/status/204").absoluteString,
        ])

        #expect(out.stdoutText == "1\n0\n0\n")
        #expect(server.requestCount == 3)
        #expect(server.acceptedConnections == 1)
        #expect(Set(server.requests.map(\.clientPort)).count == 1)
        #expect(server.waitForOpenConnections(0))
    }

    @Test("pipelined requests on a raw socket are answered in order; a malformed head gets 400")
    func rawSocketClient() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let client = try RawClient(port: server.port)
        let bad = try RawClient(port: server.port)

        client.send(
            "GET /json HTTP/1.1\r\nHost: x\r\n\r\nGET /status/404 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        bad.send("THIS IS NOT HTTP\r\n\r\n")
        let answers = client.readToEnd()
        let refusal = bad.readToEnd()

        #expect(answers.hasPrefix("HTTP/1.1 200 OK"))
        #expect(answers.contains(TestServer.jsonBody + "HTTP/1.1 404 Not Found"))
        #expect(refusal.hasPrefix("HTTP/1.1 400"))
        #expect(server.requestCount == 2)
    }

    @Test("malformed requests get 4xx or a closed socket and the server keeps serving")
    func survivesMisbehavingClients() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let hugeHead = "GET / HTTP/1.1\r\nX-Big: " + String(repeating: "a", count: 100_000) + "\r\n\r\n"
        let attacks = [
            hugeHead,
            "POST /upload HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "POST /upload HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
            "GET /bytes/99999999999999999999999 HTTP/1.1\r\nConnection: close\r\n\r\n",
            "\u{0}\u{1}\u{2}\u{ff}\r\n\r\n",
            "GET /status/700 HTTP/1.1\r\nConnection: close\r\n\r\n",
            "GET /redirect/-1?close=1 HTTP/1.1\r\n\r\n",
            "POST /echo HTTP/1.1\r\nContent-Length: 100\r\n\r\nshort",
        ]
        var answers: [String] = []

        for attack in attacks {
            let client = try RawClient(port: server.port)
            client.send(attack)
            if attack.hasSuffix("short") {
                shutdown(client.fd, Int32(SHUT_WR))  // the body never completes
            }
            answers.append(client.readToEnd())
        }
        let healthy = try curl([server.url("/json").absoluteString])

        #expect(answers[0].hasPrefix("HTTP/1.1 431"))
        #expect(answers[1].hasPrefix("HTTP/1.1 400"))
        #expect(answers[2].hasPrefix("HTTP/1.1 400"))
        #expect(answers[3].hasPrefix("HTTP/1.1 404"))
        #expect(answers[4].hasPrefix("HTTP/1.1 400"))
        #expect(answers[5].hasPrefix("HTTP/1.1 400"))
        #expect(answers[6].hasPrefix("HTTP/1.1 404"))
        #expect(answers[7].isEmpty)
        #expect(healthy.stdoutText == TestServer.jsonBody)
        #expect(server.waitForOpenConnections(0))
    }

    @Test("?close=1 closes after the response and /response-headers echoes its query as headers")
    func closeAndResponseHeaders() throws {
        let server = try TestServer.start()
        defer { server.stop() }

        let out = try curl([
            "-D", "-", "-o", "/dev/null", "-o", "/dev/null", "-w", "%{num_connects}\n",
            server.url("/response-headers?X-One=1&Cache-Control=no-store&close=1").absoluteString,
            server.url("/json").absoluteString,
        ])

        #expect(out.stdoutText.contains("X-One: 1\r\n"))
        #expect(out.stdoutText.contains("Cache-Control: no-store\r\n"))
        #expect(out.stdoutText.contains("Connection: close\r\n"))
        #expect(server.acceptedConnections == 2)
    }

    @Test("stop() closes open connections promptly and refuses new ones")
    func stopClosesEverything() throws {
        let server = try TestServer.start()
        let client = try RawClient(port: server.port)
        client.send("GET /stall-headers HTTP/1.1\r\nHost: x\r\n\r\n")
        try Wait.until("the request reached the server") { server.requestCount == 1 }

        // Returns true only once every connection thread has finished.
        #expect(server.stop())
        #expect(client.readToEnd().isEmpty)
        #expect(server.openConnections == 0)
        #expect(!NginxFixture.canConnect(port: server.port))
    }
}

@Suite("nginx fixture", .enabled(if: NginxFixture.isInstalled, "nginx is not installed (apt-get install nginx)"))
struct NginxFixtureTests {
    @Test(
        "a 64 MiB file arrives intact over each listener with the expected HTTP version",
        arguments: [
            (NginxFixture.Listener.http, "1.1"), (NginxFixture.Listener.https, "1.1"),
            (NginxFixture.Listener.http2, "2"),
        ])
    func largeFile(listener: NginxFixture.Listener, version: String) throws {
        let nginx = try NginxFixture.shared()
        let file = try nginx.ensureFile(size: 64 << 20, seed: 11)
        let directory = try TemporaryDirectory()
        let destination = directory.file("64m.bin")

        let out = try curl([
            "--cacert", nginx.caFile, "--http2", "-o", destination.path, "-w", "%{http_code} %{http_version}",
            nginx.url(listener, file.path).absoluteString,
        ])

        #expect(out.stdoutText == "200 \(version)")
        #expect(try FileDigest.sha256(of: destination) == file.sha256)
        // The digest ensureFile computed while writing matches the file on disk.
        #expect(try FileDigest.sha256(of: URL(fileURLWithPath: nginx.contentRoot + file.path)) == file.sha256)
    }

    @Test("the served chain verifies against the root CA alone and not without it")
    func chainIsServed() throws {
        let nginx = try NginxFixture.shared()
        let file = try nginx.ensureFile(size: 1024)

        let trusted = try curl([
            "--cacert", nginx.caFile, "-o", "/dev/null", nginx.url(.https, file.path).absoluteString,
        ])
        let ipHost = try curl([
            "--cacert", nginx.caFile, "-o", "/dev/null", nginx.url(.http2, file.path, host: "127.0.0.1").absoluteString,
        ])
        let untrusted = try curl(["-o", "/dev/null", nginx.url(.https, file.path).absoluteString])

        #expect(trusted.status == 0)
        #expect(ipHost.status == 0)
        #expect(untrusted.status == 60)  // CURLE_PEER_FAILED_VERIFICATION
    }

    @Test(
        "uploads of any size are read in full and accepted on every listener", arguments: NginxFixture.Listener.allCases
    )
    func uploads(listener: NginxFixture.Listener) throws {
        let nginx = try NginxFixture.shared()
        let directory = try TemporaryDirectory()
        try DeterministicBytes.data(seed: 1, count: 8 << 20).write(to: directory.file("up.bin"))

        let out = try curl([
            "--cacert", nginx.caFile, "--data-binary", "@" + directory.file("up.bin").path, "-w", " %{http_code}",
            nginx.uploadURL(listener).absoluteString,
        ])
        let answer = try jsonObject(Data(out.stdoutText.dropLast(4).utf8))

        #expect(out.stdoutText.hasSuffix(" 200"))
        // request_length counts body bytes nginx read from the client.
        #expect((answer["request_length"] as? Int ?? 0) >= 8 << 20)
    }

    @Test("stub_status counts one accepted connection for requests sent over a kept-alive one")
    func statusCountsConnections() throws {
        let nginx = try NginxFixture.start()
        defer { nginx.stop() }
        let file = try nginx.ensureFile(size: 1024)
        // The fixture's readiness probes (a bare connect to each listener) may still sit in
        // nginx's backlog: take the baseline once two status reads in a row differ by the
        // status fetch alone, so every later accept is this test's.
        var before = try nginx.status()
        var settled = false
        for _ in 0..<50 where !settled {
            let next = try nginx.status()
            settled = next.accepts - before.accepts == 1
            before = next
        }
        #expect(settled, "nginx kept accepting connections nobody in this test made")

        _ = try curl([
            "-o", "/dev/null", "-o", "/dev/null", nginx.url(.http, file.path).absoluteString,
            nginx.url(.http, file.path).absoluteString,
        ])
        let after = try nginx.status()

        // The status fetches count too: one connection and request each.
        #expect(after.accepts - before.accepts == 2)
        #expect(after.requests - before.requests == 3)
    }

    @Test("nginx serves byte ranges of fixture files")
    func ranges() throws {
        let nginx = try NginxFixture.shared()
        let file = try nginx.ensureFile(size: 16 << 10, seed: 3)

        let out = try curl(["--cacert", nginx.caFile, "-r", "1000-1999", nginx.url(.http2, file.path).absoluteString])

        #expect(out.stdout == TestServer.bytes(seed: 3, offset: 1000, count: 1000))
    }

    @Test("the /slow location limits the rate per connection")
    func rateLimit() throws {
        let nginx = try NginxFixture.shared()
        let file = try nginx.ensureFile(size: 256 << 10, seed: 4)
        let large = try nginx.ensureFile(size: 4 << 20, seed: 5)
        let limited = nginx.slowURL(.http, file.path, bytesPerSecond: 128 << 10).absoluteString
        let unlimited = nginx.url(.http, large.path).absoluteString

        // Both at once; curl writes each line as its transfer completes.
        let out = try curl([
            "--parallel", "--parallel-immediate", "-w", "%{url_effective} %{size_download}\n",
            "-o", "/dev/null", "-o", "/dev/null", limited, unlimited,
        ])

        // nginx lets one second's worth through at once, then paces: 256 KiB at 128 KiB/s
        // comes in after 4 MiB unlimited, sixteen times as large, started with it.
        #expect(out.stdoutText.split(separator: "\n") == ["\(unlimited) \(4 << 20)", "\(limited) \(256 << 10)"],
                "\(out.stdoutText)")
    }

    @Test("a private instance uses fresh free ports and leaves no process behind after stop")
    func privateInstanceStops() throws {
        let shared = try NginxFixture.shared()
        let clock = ContinuousClock()
        let start = clock.now
        let nginx = try NginxFixture.start()
        let startup = clock.now - start
        let ports = Set(NginxFixture.Listener.allCases.map { nginx.port($0) })
        // The master listens before it forks its two workers.
        #expect(Wait.poll { nginx.workerPIDs.count == 2 })
        let workers = nginx.workerPIDs

        #expect(ports.count == 3)
        #expect(ports.isDisjoint(with: NginxFixture.Listener.allCases.map { shared.port($0) }))
        #expect(nginx.isRunning)
        print("nginx fixture started in \(startup)")

        nginx.stop()

        #expect(!nginx.isRunning)
        #expect(!workers.isEmpty)
        #expect(Wait.poll { nginx.workerPIDs.isEmpty })
        #expect(ports.allSatisfy { !NginxFixture.canConnect(port: $0) })
        #expect(!FileManager.default.fileExists(atPath: nginx.directory))
    }

    @Test("nginx stops by itself when the watchdog pipe closes, as on the death of the test process")
    func watchdogStopsNginx() throws {
        let nginx = try NginxFixture.start()
        defer { nginx.stop() }
        #expect(nginx.isRunning)

        nginx.closeWatchdogOnly()

        try Wait.until("nginx to exit", timeout: .seconds(10)) { !nginx.isRunning }
        #expect(!NginxFixture.canConnect(port: nginx.httpPort))
    }
}
