import Foundation
import TestSupport
import Testing

@Suite("transfer command: --metrics output")
struct CLIMetricsTests {
    private func records(_ text: String) -> [[String: Any]] {
        text.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    @Test("a run that ends in failures still writes one line per URL, past several batches")
    func everyLineOfAFailedRun() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        // Given: 14 URLs with 8,000-byte query strings (over 100 KiB of lines: more than
        // one 64 KiB batch), with a refused connection and an unacceptable status among them.
        let padding = String(repeating: "p", count: 8000)
        var urls = (0..<14).map { server.url("/bytes/\(100 + $0)?seed=\($0)&pad=\(padding)").absoluteString }
        urls[5] = "http://127.0.0.1:\(try CLI.refusedPort())/refused"
        urls[11] = server.url("/status/404?pad=\(padding)").absoluteString
        let list = directory.file("urls.txt").path
        try (urls.joined(separator: "\n") + "\n").write(toFile: list, atomically: true, encoding: .utf8)
        let metrics = directory.file("metrics.jsonl").path

        // When
        let output = try CLI.run(["get", "-s", "--parallel", "4", "--discard", "--metrics", metrics,
                                  "--url-file", list])

        // Then
        #expect(output.status == 4, "\(output.stderrText)")
        let text = try String(contentsOfFile: metrics, encoding: .utf8)
        #expect(text.hasSuffix("\n"))
        #expect(text.utf8.count > 64 * 1024)
        let lines = records(text)
        #expect(lines.count == 14, "\(text.split(separator: "\n").count) lines")
        #expect(Set(lines.compactMap { $0["url"] as? String }) == Set(urls))
        let failed = lines.filter { ($0["error_code"] as? Int) != 0 }
        #expect(Set(failed.compactMap { $0["url"] as? String }) == [urls[5], urls[11]])
        #expect(failed.first { $0["url"] as? String == urls[5] }?["error_code"] as? Int == 4)
        #expect(failed.first { $0["url"] as? String == urls[11] }?["error_code"] as? Int == 9)
        for line in lines where (line["error_code"] as? Int) == 0 {
            #expect(line["status"] as? Int == 200)
        }
    }

    @Test("a finished transfer's line is in the file while a slower transfer of the run is still held")
    func lineBeforeTheSlowerTransferEnds() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let metrics = directory.file("metrics.jsonl").path
        let held = server.url("/hold/4096?gate=metrics-held&seed=1").absoluteString
        let quick = server.url("/bytes/32?seed=2").absoluteString

        // When: the run is under way, one transfer held at the server's gate.
        let run = Task.detached {
            try CLI.run(["get", "-s", "--parallel", "2", "--discard", "--metrics", metrics, held, quick])
        }
        // Then: the quick transfer's line is written before the held one can end.
        var open = false
        defer { if !open { server.openGate("metrics-held") } }   // the run ends if a wait failed
        try await Wait.until("the quick transfer's line while the other is held", timeout: .seconds(30)) {
            let text = (try? String(contentsOfFile: metrics, encoding: .utf8)) ?? ""
            return server.heldAtGate("metrics-held") == 1 && records(text).count == 1
        }
        let first = records(try String(contentsOfFile: metrics, encoding: .utf8))
        #expect(first.first?["url"] as? String == quick)
        #expect(server.heldAtGate("metrics-held") == 1)

        server.openGate("metrics-held")
        open = true
        let output = try await run.value
        #expect(output.status == 0, "\(output.stderrText)")
        let lines = records(try String(contentsOfFile: metrics, encoding: .utf8))
        #expect(lines.compactMap { $0["url"] as? String } == [quick, held])
    }

    @Test("--metrics - with headers on stdout keeps each line right after its transfer's headers")
    func linesStayAmongHeaders() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let urls = (0..<4).map { server.url("/bytes/\(10 + $0)?seed=\($0)").absoluteString }

        let output = try CLI.run(["get", "-s", "--parallel", "1", "-i", "--discard", "--metrics", "-"] + urls)

        #expect(output.status == 0, "\(output.stderrText)")
        // Each transfer: status line, headers, a blank line, then its metrics line.
        let blocks = output.stdoutText.components(separatedBy: "\n\n")
        #expect(blocks.count == 5, "\(output.stdoutText)")
        #expect(blocks.first?.hasPrefix("HTTP/1.1 200") == true, "\(output.stdoutText)")
        for (index, url) in urls.enumerated() where index + 1 < blocks.count {
            let lines = blocks[index + 1].split(separator: "\n", omittingEmptySubsequences: false)
            let record = records(String(lines.first ?? ""))
            #expect(record.first?["url"] as? String == url, "\(output.stdoutText)")
            if index + 1 < urls.count {
                #expect(lines.dropFirst().first?.hasPrefix("HTTP/1.1 200") == true, "\(output.stdoutText)")
            }
        }
    }
}
