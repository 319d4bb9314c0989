import Foundation
import TestSupport
import Testing
import Transfer
@testable import TransferCLI

/// `Parse.urlLines` as it was before the byte-level rewrite: the reference.
private func referenceURLLines(_ text: String) -> [String] {
    text.split(whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" })
        .map { $0.trimmingCharacters(in: .whitespaces) }
        .filter { !$0.isEmpty && !$0.hasPrefix("#") }
}

@Suite("transfer command: planning")
struct RunPlanTests {
    @Test("URL files split and trim as before: LF, CR, CRLF, tabs, Unicode spaces, comments, blank lines")
    func urlLinesMatchReference() {
        let texts = [
            "", "\n", "\r\n\r\n", "http://a/1", "http://a/1\nhttp://a/2\n", "http://a/1\r\nhttp://a/2\rhttp://a/3",
            "  \thttp://a/1\t  \n# comment\n   # indented comment\n\n\nhttp://a/2",
            "\u{A0}http://a/nbsp\u{3000}\n\u{2009}\u{2009}\n\u{202F}#\u{A0}not a url\n",
            "#\u{20E3}keycap is not a comment character\n#plain comment\n", "http://a/é?q=日本\n",
            "http://a/1\u{85}still one line\u{2028}too\n", "x\r\r\ny\n\n\rz", "\u{1680}\u{205F}",
            "http://a/trailing-combining\u{301}\n#",
        ]
        for text in texts {
            #expect(Parse.urlLines(text) == referenceURLLines(text), "\(text.debugDescription)")
        }
    }

    @Test("20,000 URLs become 20,000 jobs in input order, each with its own parsed request")
    func twentyThousandURLs() throws {
        let directory = try TemporaryDirectory()
        let first = "http://127.0.0.1:9/first"
        // Given: 19,999 lines after one argument: one URL repeated (as load tests do), distinct
        // ones, an invalid one every 1,000, with comments, blank lines and CRLF in between.
        var expected = [first]
        var text = "# the list\r\n"
        for index in 0..<19_999 {
            let url: String
            if index % 1000 == 999 {
                url = "ftp://127.0.0.1/\(index)"
            } else if index % 2 == 0 {
                url = "http://127.0.0.1:8080/same/1k.bin"
            } else {
                url = "http://127.0.0.1:8080/files/\(index).bin?q=\(index % 7)"
            }
            expected.append(url)
            text += "  \(url)\t" + (index % 3 == 0 ? "\r\n" : "\n") + (index % 500 == 0 ? "\n# a comment\n\n" : "")
        }
        let list = directory.file("urls.txt")
        try text.write(to: list, atomically: true, encoding: .utf8)

        // When
        let command = try TransferTool.parseAsRoot(["get", "--discard", "-H", "X-Run: 14", "--url-file", list.path,
                                                    first])
        let verb = try #require(command as? any Verb)
        let plan = try RunPlan.make(verb: verb)
        let jobs = Array(plan.jobs)

        // Then
        #expect(jobs.count == 20_000)
        var mismatches: [String] = []
        for (position, job) in jobs.enumerated() {
            let url = position < expected.count ? expected[position] : "(none)"
            var ok = job.index == position && job.urlString == url && job.output == .discard
            if url.hasPrefix("ftp:") {
                ok = ok && job.request == nil && job.invalidFailure?.status == .invalidRequest
            } else {
                ok = ok && job.invalidFailure == nil && job.request?.url.absoluteString == url
                    && job.request?.method == .get && job.request?.headers["X-Run"] == "14"
            }
            if !ok { mismatches.append("\(position): \(job.urlString)") }
        }
        #expect(mismatches.isEmpty, "\(mismatches.count) jobs differ, first: \(mismatches.prefix(5))")
        // One URL named many times: equal requests.
        #expect(jobs[1].request == jobs[3].request)
        #expect(jobs[1].request != jobs[2].request)
    }

    @Test("every job of a multipart upload gets its own form body")
    func multipartJobsAreSeparate() throws {
        let command = try TransferTool.parseAsRoot(["post", "-F", "a=1", "http://127.0.0.1:9/x", "http://127.0.0.1:9/x"])
        let verb = try #require(command as? any Verb)

        let jobs = Array(try RunPlan.make(verb: verb).jobs)

        #expect(jobs.count == 2)
        let bodies = jobs.compactMap { $0.request?.body }
        #expect(bodies.count == 2)
        // Each finalised form is its own stream provider (no shared stream between jobs).
        #expect(bodies[0] != bodies[1])
    }

    @Test("the URL file is read as jobs are taken: a plan is made from a pipe whose writer has not finished")
    func urlFileIsStreamed() throws {
        let directory = try TemporaryDirectory()
        let fifo = directory.file("urls.fifo").path
        #expect(mkfifo(fifo, 0o600) == 0)
        // Read-write: the open does not wait for a reader, and the plan's open finds a writer.
        let writer = open(fifo, O_RDWR | O_CLOEXEC)
        try #require(writer >= 0)
        var writerOpen = true
        defer { if writerOpen { close(writer) } }
        func send(_ text: String) { #expect(text.utf8.withContiguousStorageIfAvailable { write(writer, $0.baseAddress, $0.count) } == text.utf8.count) }
        send("http://127.0.0.1:9/a\n# comment\nhttp://127.0.0.1:9/b\n")

        // When: two lines are there and the file goes on.
        let command = try TransferTool.parseAsRoot(["get", "--discard", "--url-file", fifo])
        let plan = try RunPlan.make(verb: try #require(command as? any Verb))
        var jobs = plan.jobs.makeIterator()

        // Then: the plan was made, and the jobs come as the lines do.
        #expect(jobs.next()?.urlString == "http://127.0.0.1:9/a")
        #expect(jobs.next()?.urlString == "http://127.0.0.1:9/b")
        send("http://127.0.0.1:9/c")   // the last line, without a line break
        close(writer)
        writerOpen = false
        let last = jobs.next()
        #expect(last?.urlString == "http://127.0.0.1:9/c" && last?.index == 2 && last?.request != nil)
        #expect(jobs.next() == nil)
    }

    @Test("a URL file line longer than 1 MiB fails as its own job; the lines around it run")
    func overlongLineIsOneFailure() throws {
        let directory = try TemporaryDirectory()
        let list = directory.file("urls.txt")
        var text = "http://127.0.0.1:9/before\n"
        text += "http://127.0.0.1:9/" + String(repeating: "x", count: 3 << 20) + "\n"
        text += "http://127.0.0.1:9/after\n"
        try text.write(to: list, atomically: true, encoding: .utf8)

        let command = try TransferTool.parseAsRoot(["get", "--discard", "--url-file", list.path])
        let jobs = Array(try RunPlan.make(verb: try #require(command as? any Verb)).jobs)

        #expect(jobs.map(\.index) == [0, 1, 2])
        #expect(jobs.first?.request?.url.absoluteString == "http://127.0.0.1:9/before")
        #expect(jobs.dropFirst().first?.request == nil)
        #expect(jobs.dropFirst().first?.invalidFailure?.detail.contains("longer than 1 MiB") == true)
        #expect(jobs.last?.request?.url.absoluteString == "http://127.0.0.1:9/after")
    }
}
