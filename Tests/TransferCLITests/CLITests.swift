import Foundation
import Testing
import TestSupport

@Suite("transfer command: outputs")
struct CLIOutputTests {
    @Test("a body on stdout is byte-exact, and a forced bar on a pipe writes no control characters")
    func stdoutIsByteExactWithProgress() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let count = 3 * 1024 * 1024 + 17

        let output = try CLI.run(["get", "--progress", "bar", server.url("/bytes/\(count)?seed=5").absoluteString])

        #expect(output.status == 0, "\(output.stderrText)")
        #expect(FileDigest.sha256(output.stdout) == TestServer.sha256(seed: 5, count: count))
        #expect(CLI.controlBytes(output.stderr).isEmpty)
        #expect(output.stderrText.contains("100%"))
    }

    @Test("-o writes the file exactly and leaves no part file")
    func outputFileIsExact() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let path = directory.file("sub/body.bin").path
        let count = 2 * 1024 * 1024 + 3

        let output = try CLI.run(["get", "-s", "--create-dirs", "-o", path,
                                  server.url("/bytes/\(count)?seed=9").absoluteString])

        #expect(output.status == 0, "\(output.stderrText)")
        #expect(output.stdout.isEmpty)
        #expect(try FileDigest.sha256(of: URL(fileURLWithPath: path)) == TestServer.sha256(seed: 9, count: count))
        #expect(CLI.listing(directory.file("sub").path) == ["body.bin"])
    }

    @Test("a failed download leaves nothing at the output path, nor a part file")
    func failureLeavesNothing() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()

        let truncated = try CLI.run(["get", "-o", directory.file("a.bin").path,
                                     server.url("/truncate/100000").absoluteString])
        let notFound = try CLI.run(["get", "-o", directory.file("b.bin").path, server.url("/status/404").absoluteString])

        #expect(truncated.status == 11)
        #expect(notFound.status == 9)
        #expect(CLI.listing(directory.path).isEmpty)
    }

    @Test("-O takes the Content-Disposition name without its directories, dots or control characters")
    func remoteNameIsSanitised() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let hostile = "attachment; filename=\"../../etc/..pass%01wd\""

        let output = try CLI.run(["get", "-O", "--output-dir", directory.path,
                                  server.url("/content-disposition?name=" + hostile).absoluteString])

        #expect(output.status == 0, "\(output.stderrText)")
        let names = CLI.listing(directory.path)
        #expect(names.count == 1)
        let name = try #require(names.first)
        #expect(!name.hasPrefix("."))
        #expect(!name.contains("/"))
        #expect(name.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value != 0x7F })
        #expect(name.hasSuffix("wd"))
    }

    @Test("-O without Content-Disposition names the file from the URL path")
    func remoteNameFromPath() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()

        let output = try CLI.run(["get", "-O", "--output-dir", directory.path, server.url("/bytes/1234?seed=2").absoluteString])

        #expect(output.status == 0, "\(output.stderrText)")
        #expect(CLI.listing(directory.path) == ["1234"])
        #expect(try FileDigest.sha256(of: directory.file("1234")) == TestServer.sha256(seed: 2, count: 1234))
    }

    @Test("-O leaves an existing file of the server's name untouched and exits 12; --clobber replaces it")
    func remoteNameDoesNotClobber() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let existing = directory.file("report.pdf")
        let original = Data("precious local data\n".utf8)
        try original.write(to: existing)
        let url = server.url("/content-disposition?name=attachment%3B%20filename%3D%22report.pdf%22").absoluteString

        let refused = try CLI.run(["get", "-s", "-O", "--output-dir", directory.path, url])
        let refusedMemory = try CLI.run(["post", "-s", "-O", "--data", "x=1", "--output-dir", directory.path, url])

        #expect(refused.status == 12, "\(refused.stderrText)")
        #expect(refusedMemory.status == 12, "\(refusedMemory.stderrText)")
        #expect(try Data(contentsOf: existing) == original)
        #expect(CLI.listing(directory.path) == ["report.pdf"])

        let replaced = try CLI.run(["get", "-s", "-O", "--clobber", "--output-dir", directory.path, url])

        #expect(replaced.status == 0, "\(replaced.stderrText)")
        #expect(try String(contentsOf: existing, encoding: .utf8) == "content-disposition body\n")
        #expect(CLI.listing(directory.path) == ["report.pdf"])
    }

    @Test("head prints the status line and the headers")
    func headPrintsHeaders() throws {
        let server = try TestServer.start()
        defer { server.stop() }

        let output = try CLI.run(["head", server.url("/bytes/4096").absoluteString])

        #expect(output.status == 0, "\(output.stderrText)")
        #expect(output.stdoutText.hasPrefix("HTTP/1.1 200\n"))
        #expect(output.stdoutText.lowercased().contains("content-length: 4096"))
    }

    @Test("--discard stores nothing and --metrics - prints one JSON object with the contract's fields")
    func metricsFields() throws {
        let server = try TestServer.start()
        defer { server.stop() }

        let output = try CLI.run(["get", "--discard", "--metrics", "-", server.url("/bytes/65536").absoluteString])

        #expect(output.status == 0, "\(output.stderrText)")
        let lines = output.stdoutText.split(separator: "\n")
        #expect(lines.count == 1)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        let expected: Set<String> = [
            "url", "status", "http_version", "bytes_received", "bytes_sent", "name_lookup", "connect", "tls",
            "request_sent", "first_byte", "total", "redirect", "redirects", "reused_connection", "remote_address",
            "error_code", "error_message",
        ]
        #expect(Set(object.keys) == expected)
        #expect(object["status"] as? Int == 200)
        #expect(object["bytes_received"] as? Int == 65536)
        #expect(object["remote_address"] as? String == "127.0.0.1")
        #expect(object["error_code"] as? Int == 0)
    }
}

@Suite("transfer command: exit codes")
struct CLIExitCodeTests {
    @Test("each failure class exits with its code and names URL and class on stderr")
    func exitCodes() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let blocker = directory.file("plain-file").path
        #expect(FileManager.default.createFile(atPath: blocker, contents: Data("x".utf8)))
        let refused = "http://127.0.0.1:\(try CLI.refusedPort())/"

        let cases: [(arguments: [String], status: Int32, phrase: String)] = [
            (["get", server.url("/bytes/10").absoluteString], 0, ""),
            (["get", "--no-such-flag", server.url("/bytes/10").absoluteString], 2, ""),
            (["get", "--parallel", "0", server.url("/bytes/10").absoluteString], 2, "usage error"),
            (["get", "ftp://127.0.0.1/file"], 3, "invalid request"),
            (["post", "-T", directory.file("missing").path, server.url("/upload").absoluteString], 3, "invalid request"),
            (["get", refused], 4, "cannot connect"),
            (["get", "--timeout", "1", server.url("/stall").absoluteString], 5, "timed out"),
            (["get", server.url("/redirect-loop").absoluteString], 8, "redirect"),
            (["get", server.url("/status/404").absoluteString], 9, "HTTP status not acceptable"),
            (["get", "--serializer", "json", server.url("/bytes/10").absoluteString], 10, "content"),
            (["get", server.url("/truncate/100000").absoluteString], 11, "truncated"),
            (["get", "-o", blocker + "/sub/out.bin", server.url("/bytes/10").absoluteString], 12, "local file"),
            (["get", "--accept-status", "404", server.url("/status/404").absoluteString], 0, ""),
        ]
        for (arguments, status, phrase) in cases {
            let output = try CLI.run(arguments, timeout: .seconds(30))
            #expect(output.status == status, "\(arguments): \(output.stderrText)")
            if status != 0 && status != 2 {
                let lines = output.stderrText.split(separator: "\n")
                #expect(lines.count == 1, "\(arguments): \(output.stderrText)")
                #expect(output.stderrText.contains(phrase), "\(arguments): \(output.stderrText)")
                #expect(output.stderrText.contains(arguments.last ?? ""), "\(arguments): \(output.stderrText)")
            }
            #expect(CLI.controlBytes(output.stderr).isEmpty)
        }
    }

    @Test("with many URLs the first failure in input order decides, one line per failure")
    func manyURLsFirstFailureWins() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        var urls = (0..<20).map { server.url("/bytes/\(10_000 + $0)?seed=\($0)").absoluteString }
        urls[7] = server.url("/status/500").absoluteString
        urls[13] = server.url("/truncate/50000").absoluteString
        let list = directory.file("urls.txt").path
        try ("# the list\n\n" + urls[10...].joined(separator: "\n") + "\n").write(toFile: list, atomically: true,
                                                                               encoding: .utf8)
        let out = directory.file("out").path

        let output = try CLI.run(["get", "--parallel", "4", "--create-dirs", "--output-dir", out, "--url-file", list] + urls[..<10])

        #expect(output.status == 9, "\(output.stderrText)")
        let lines = output.stderrText.split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines.first?.contains("/status/500") == true)
        #expect(lines.last?.contains("/truncate/50000") == true)
        let names = CLI.listing(out)
        #expect(names.count == 18, "\(names)")
        for index in 0..<20 where index != 7 && index != 13 {
            let name = "\(10_000 + index)"
            #expect(try FileDigest.sha256(of: URL(fileURLWithPath: out + "/" + name))
                == TestServer.sha256(seed: UInt64(index), count: 10_000 + index))
        }
    }

    @Test("a --discard batch from a URL file: invalid lines fail in place, the first failure in input order decides")
    func discardBatchWithInvalidLines() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        // Given: 300 URLs, with a bad status at 40, a URL that does not parse at 120
        // (the batch never sees it) and a refused scheme at 250.
        var urls = (0..<300).map { server.url("/bytes/\(100 + $0 % 50)").absoluteString }
        urls[40] = server.url("/status/404").absoluteString
        urls[120] = "http://[not-a-host/x"
        urls[250] = "ftp://127.0.0.1/file"
        let list = directory.file("urls.txt").path
        try (urls.joined(separator: "\n") + "\n").write(toFile: list, atomically: true, encoding: .utf8)

        // When
        let output = try CLI.run(["get", "-s", "--parallel", "8", "--discard", "--url-file", list])

        // Then: one line per failure, in input order; the 404 (exit 9) came first.
        #expect(output.status == 9, "\(output.stderrText)")
        let lines = output.stderrText.split(separator: "\n")
        #expect(lines.count == 3, "\(output.stderrText)")
        #expect(lines.first?.contains("/status/404") == true)
        #expect(lines.dropFirst().first?.contains("[not-a-host") == true)
        #expect(lines.last?.contains("ftp://127.0.0.1/file") == true)
        #expect(server.requestCount == 298)
    }

    @Test("--parallel runs transfers to one host at once: a small body does not wait for slow ones")
    func parallelDoesNotSerialise() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        // The two large bodies stop halfway at a gate that the test opens only once the small
        // body's metrics line is out: if the small one queued behind them, it never would be.
        let slow = server.url("/hold/786432?seed=1&gate=slow").absoluteString
        let slow2 = server.url("/hold/786432?seed=2&gate=slow").absoluteString
        let fast = server.url("/bytes/100?seed=3").absoluteString
        func records(_ lines: [String]) -> [[String: Any]] {
            lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        }

        let run = try RunningCLI(["get", "--parallel", "3", "--discard", "--metrics", "-", slow, slow2, fast])
        let fastDone = await Wait.poll(timeout: .seconds(30)) {
            records(run.stdoutLines).contains { $0["url"] as? String == fast }
        }
        // Both slow responses reached the gate: they were in flight, half sent, all along.
        let slowHeld = await Wait.poll(timeout: .seconds(30)) { server.heldAtGate("slow") == 2 }
        let linesBeforeRelease = run.stdoutLines
        server.openGate("slow")
        let status = await run.wait()

        #expect(fastDone, "the small body did not complete while the slow ones were held: \(linesBeforeRelease)")
        #expect(slowHeld, "the slow responses did not both reach the gate")
        #expect(records(linesBeforeRelease).map { $0["url"] as? String } == [fast], "\(linesBeforeRelease)")
        #expect(status == 0)
        var byURL: [String: [String: Any]] = [:]
        for object in records(run.stdoutLines) {
            if let url = object["url"] as? String { byURL[url] = object }
        }
        #expect(byURL.count == 3, "\(run.stdoutLines)")
        #expect(byURL[slow]?["bytes_received"] as? Int == 786_432)
        #expect(byURL[slow2]?["bytes_received"] as? Int == 786_432)
        #expect(byURL[fast]?["bytes_received"] as? Int == 100)
        // Started together on their own connections, not one after the other.
        #expect(byURL[slow2]?["reused_connection"] as? Bool == false)
        #expect(byURL[fast]?["reused_connection"] as? Bool == false)
        #expect(server.acceptedConnections == 3)
    }

    @Test("SIGINT cancels: exit 14 and nothing partial at the output path")
    func interruptCleansUp() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let path = directory.file("slow.bin").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try CLI.binary())
        process.arguments = ["get", "-s", "-o", path, server.url("/slow?rate=65536&size=4194304").absoluteString]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        try process.run()

        try Wait.until("the part file appears", timeout: .seconds(10)) {
            FileManager.default.fileExists(atPath: path + ".part")
        }
        kill(process.processIdentifier, SIGINT)

        #expect(exited.wait(timeout: .now() + 10) == .success)
        #expect(process.terminationStatus == 14)
        #expect(CLI.listing(directory.path).isEmpty)
    }
}

@Suite("transfer command: request bodies")
struct CLIRequestBodyTests {
    private func json(_ output: Command.Output) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: output.stdout) as? [String: Any])
    }

    @Test("-T streams the file as the body, byte for byte")
    func uploadFile() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let file = directory.file("up.bin").path
        try DeterministicBytes.write(seed: 4, count: 1_000_003, to: file)

        let output = try CLI.run(["put", "-T", file, server.url("/upload").absoluteString])

        #expect(output.status == 0, "\(output.stderrText)")
        let object = try json(output)
        #expect(object["length"] as? Int == 1_000_003)
        #expect(object["sha256"] as? String == TestServer.sha256(seed: 4, count: 1_000_003))
    }

    @Test("--json, -H and --user reach the server as headers, -X overrides the method")
    func jsonHeadersUser() throws {
        let server = try TestServer.start()
        defer { server.stop() }

        let output = try CLI.run(["post", "-X", "PATCH", "--json", "{\"a\":1}", "-H", "X-Test: yes", "--user", "ann:pw",
                                  server.url("/echo").absoluteString])

        #expect(output.status == 0, "\(output.stderrText)")
        let object = try json(output)
        let headers = try #require(object["headers"] as? [String: String])
        #expect(object["method"] as? String == "PATCH")
        #expect(headers["content-type"] == "application/json")
        #expect(headers["x-test"] == "yes")
        #expect(headers["authorization"] == "Basic " + Data("ann:pw".utf8).base64EncodedString())
        #expect(object["body_length"] as? Int == 7)
    }

    @Test("-F sends a streamed multipart body with an exact Content-Length")
    func multipartForm() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let file = directory.file("part.txt").path
        try "file content\n".write(toFile: file, atomically: true, encoding: .utf8)

        let output = try CLI.run(["post", "-F", "name=value", "-F", "upload=@\(file);type=text/plain",
                                  server.url("/echo").absoluteString])

        #expect(output.status == 0, "\(output.stderrText)")
        let object = try json(output)
        let headers = try #require(object["headers"] as? [String: String])
        let contentType = try #require(headers["content-type"])
        #expect(contentType.hasPrefix("multipart/form-data; boundary="))
        let boundary = String(contentType.dropFirst("multipart/form-data; boundary=".count))
        #expect(!boundary.isEmpty)
        // Streamed with an exact length: the announced length is what arrived.
        let length = try #require(object["body_length"] as? Int)
        #expect(headers["content-length"] == String(length))
        #expect(length > "file content\n".utf8.count + "value".utf8.count + 2 * boundary.utf8.count)
    }
}

@Suite("transfer command: terminal")
struct CLITerminalTests {
    @Test("in a pseudo-terminal a progress bar is drawn and redrawn in place")
    func barInTerminal() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/script") else {
            Issue.record("util-linux `script` is needed for the pseudo-terminal test")
            return
        }
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let path = directory.file("tty.bin").path
        let url = server.url("/slow?rate=262144&size=524288&seed=3").absoluteString
        // `script` gives the command a pty for stdin/stdout/stderr; the body goes to a file.
        let command = "'\(try CLI.binary())' get -o '\(path)' '\(url)'"

        let output = try Command.run("/usr/bin/script", ["-qfec", command, "/dev/null"], timeout: .seconds(30))

        #expect(output.status == 0, "\(output.stdoutText)")
        let drawn = output.stdoutText
        #expect(drawn.contains("\u{1B}["), "no cursor control: \(drawn.debugDescription)")
        #expect(drawn.contains("[="), "no bar: \(drawn.debugDescription)")
        #expect(drawn.contains("100%"))
        #expect(try FileDigest.sha256(of: URL(fileURLWithPath: path)) == TestServer.sha256(seed: 3, count: 524_288))
    }
}

@Suite("transfer command: TLS", .enabled(if: NginxFixture.isInstalled, "nginx is not installed (apt-get install nginx)"))
struct CLITLSTests {
    @Test("--cacert trusts the fixture's CA over HTTPS and HTTP/2; without it the chain is refused (exit 6)")
    func cacert() throws {
        let nginx = try NginxFixture.shared()
        let file = try nginx.ensureFile(size: 1 << 20, seed: 21)
        let directory = try TemporaryDirectory()

        let https = try CLI.run(["get", "--cacert", nginx.caFile, "-o", directory.file("a").path, "--metrics",
                                 directory.file("m.json").path, nginx.url(.https, file.path).absoluteString])
        let http2 = try CLI.run(["get", "--http2", "--cacert", nginx.caFile, "--metrics", "-", "--discard",
                                 nginx.url(.http2, file.path).absoluteString])
        let untrusted = try CLI.run(["get", "-o", directory.file("b").path, nginx.url(.https, file.path).absoluteString])

        #expect(https.status == 0, "\(https.stderrText)")
        #expect(try FileDigest.sha256(of: directory.file("a")) == file.sha256)
        #expect(http2.status == 0, "\(http2.stderrText)")
        #expect(http2.stdoutText.contains("\"http_version\":\"2\""), "\(http2.stdoutText)")
        #expect(untrusted.status == 6, "\(untrusted.stderrText)")
        #expect(untrusted.stderrText.contains("TLS failure"))
        #expect(!FileManager.default.fileExists(atPath: directory.file("b").path))
    }
}

@Suite("transfer command: server trust", .enabled(if: NginxFixture.isInstalled, "nginx is not installed (apt-get install nginx)"))
struct CLITrustTests {
    /// The base64 SHA-256 of the server's SubjectPublicKeyInfo, by openssl.
    private func serverPin(_ nginx: NginxFixture) throws -> String {
        let script = "openssl x509 -in '\(nginx.serverCertificateFile)' -pubkey -noout"
            + " | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64"
        let output = try Command.run("/bin/sh", ["-c", script])
        return output.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("public-key pinning: the right pin downloads, a wrong one exits 7 and leaves nothing")
    func publicKeyPins() throws {
        let nginx = try NginxFixture.shared()
        let file = try nginx.ensureFile(size: 256 * 1024, seed: 31)
        let directory = try TemporaryDirectory()
        let pin = try serverPin(nginx)
        let wrong = Data(repeating: 7, count: 32).base64EncodedString()
        let url = nginx.url(.https, file.path).absoluteString

        let good = try CLI.run(["get", "--cacert", nginx.caFile, "--pinning-mode", "public-key", "--pin-sha256", pin,
                                "--pin-sha256", wrong, "-o", directory.file("good").path, url])
        let bad = try CLI.run(["get", "--cacert", nginx.caFile, "--pinning-mode", "public-key", "--pin-sha256", wrong,
                               "-o", directory.file("bad").path, url])

        #expect(pin.count == 44, "\(pin)")
        #expect(good.status == 0, "\(good.stderrText)")
        #expect(try FileDigest.sha256(of: directory.file("good")) == file.sha256)
        #expect(bad.status == 7, "\(bad.stderrText)")
        #expect(bad.stderrText.contains("server trust refused"))
        #expect(CLI.listing(directory.path) == ["good"])
    }

    @Test("certificate pinning to the CA trusts the chain without --cacert; -k accepts it without anything")
    func certificatePinsAndInsecure() throws {
        let nginx = try NginxFixture.shared()
        let file = try nginx.ensureFile(size: 64 * 1024, seed: 32)
        let url = nginx.url(.https, file.path).absoluteString

        let pinned = try CLI.run(["get", "--pinning-mode", "certificate", "--pin-cert", nginx.caFile, url])
        let insecure = try CLI.run(["get", "-k", url])

        #expect(pinned.status == 0, "\(pinned.stderrText)")
        #expect(FileDigest.sha256(pinned.stdout) == file.sha256)
        #expect(insecure.status == 0, "\(insecure.stderrText)")
        #expect(FileDigest.sha256(insecure.stdout) == file.sha256)
    }
}
