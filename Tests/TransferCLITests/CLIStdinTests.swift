import Foundation
import Testing
import TestSupport

/// Runs `transfer arguments...` with `input` written to its standard input through a
/// close-on-exec pipe (then closed), so no other child of the test process holds it open.
func runCLI(_ arguments: [String], stdin input: Data) throws -> Command.Output {
    try Command.run(try CLI.binary(), arguments, stdin: input)
}

/// The `/upload` route's JSON on stdout: body length and SHA-256 as the server saw them.
func uploadReceipt(_ output: Command.Output) -> (length: Int, sha256: String)? {
    uploadReceipt(output.stdout)
}

func uploadReceipt(_ stdout: Data) -> (length: Int, sha256: String)? {
    guard let object = try? JSONSerialization.jsonObject(with: stdout) as? [String: Any],
        let length = object["length"] as? Int, let sha = object["sha256"] as? String
    else { return nil }
    return (length, sha)
}

@Suite("transfer command: bodies from standard input and pipes")
struct CLIStdinTests {
    @Test("-T - sends standard input as a chunked upload of unknown length, intact")
    func uploadFileDash() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let body = TestServer.bytes(seed: 71, count: (3 << 20) + 5)

        let output = try runCLI(["put", "-s", "-T", "-", server.url("/upload").absoluteString], stdin: body)

        #expect(output.status == 0, "\(output.stderrText)")
        let receipt = try #require(uploadReceipt(output), "\(output.stdoutText) \(output.stderrText)")
        #expect(receipt.length == body.count)
        #expect(receipt.sha256 == FileDigest.sha256(body))
        let request = try #require(server.requests.last)
        #expect(request.method == "PUT")
        #expect(request.header("transfer-encoding")?.lowercased() == "chunked")
        #expect(request.header("content-length") == nil)
    }

    @Test("--data-binary @- sends standard input unchanged: newlines and CRs are kept")
    func dataBinaryStdin() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        var body = Data("line one\r\nline two\n\n".utf8)
        body.append(TestServer.bytes(seed: 72, count: 200_000))
        body.append(Data("\nlast\n".utf8))

        let output = try runCLI(["post", "-s", "--data-binary", "@-", server.url("/upload").absoluteString],
                                      stdin: body)

        #expect(output.status == 0, "\(output.stderrText)")
        let receipt = try #require(uploadReceipt(output), "\(output.stdoutText) \(output.stderrText)")
        #expect(receipt.length == body.count)
        #expect(receipt.sha256 == FileDigest.sha256(body))
        #expect(server.requests.last?.header("transfer-encoding")?.lowercased() == "chunked")
    }

    @Test("-d @- and --json @- read the whole of standard input, over many reads")
    func dataAndJSONStdin() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let lines = Data(String(repeating: "abcdefghij\r\n", count: 20_000).utf8)   // 240,000 bytes
        let data = try runCLI(["-s", "-d", "@-", server.url("/upload").absoluteString], stdin: lines)
        #expect(data.status == 0, "\(data.stderrText)")
        let sent = Data(lines.filter { $0 != 0x0A && $0 != 0x0D })   // curl's -d @FILE drops CR and LF
        let dataReceipt = try #require(uploadReceipt(data), "\(data.stdoutText) \(data.stderrText)")
        #expect(dataReceipt.length == sent.count)
        #expect(dataReceipt.sha256 == FileDigest.sha256(sent))

        let json = Data(("[" + Array(repeating: "\"0123456789\"", count: 15_000).joined(separator: ",\n") + "]").utf8)
        let posted = try runCLI(["post", "-s", "--json", "@-", server.url("/upload").absoluteString], stdin: json)
        #expect(posted.status == 0, "\(posted.stderrText)")
        let jsonReceipt = try #require(uploadReceipt(posted), "\(posted.stdoutText) \(posted.stderrText)")
        #expect(jsonReceipt.length == json.count)
        #expect(jsonReceipt.sha256 == FileDigest.sha256(json))
    }

    @Test("--data-binary STRING and @FILE send the bytes as they are")
    func dataBinaryStringAndFile() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let file = directory.file("body.bin")
        let body = Data("a=1\r\nb=2\n".utf8) + TestServer.bytes(seed: 73, count: 70_000)
        try body.write(to: file)

        let fromFile = try CLI.run(["post", "-s", "--data-binary", "@" + file.path, server.url("/upload").absoluteString])
        let fromString = try CLI.run(["post", "-s", "--data-binary", "x=1\ny=2", server.url("/upload").absoluteString])

        #expect(fromFile.status == 0, "\(fromFile.stderrText)")
        #expect(uploadReceipt(fromFile)?.sha256 == FileDigest.sha256(body))
        #expect(uploadReceipt(fromFile)?.length == body.count)
        #expect(fromString.status == 0, "\(fromString.stderrText)")
        #expect(uploadReceipt(fromString)?.sha256 == FileDigest.sha256(Data("x=1\ny=2".utf8)))
    }

    @Test("-T /dev/stdin on a pipe streams it instead of failing with 'Illegal seek'")
    func uploadDevStdin() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let body = TestServer.bytes(seed: 74, count: 1 << 20)

        let output = try runCLI(["put", "-s", "-T", "/dev/stdin", server.url("/upload").absoluteString],
                                      stdin: body)

        #expect(output.status == 0, "\(output.stderrText)")
        let receipt = try #require(uploadReceipt(output), "\(output.stdoutText) \(output.stderrText)")
        #expect(receipt.length == body.count)
        #expect(receipt.sha256 == FileDigest.sha256(body))
    }

    @Test("-T FIFO streams what a writer puts into the FIFO")
    func uploadFIFO() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let fifo = directory.file("body.fifo").path
        #expect(mkfifo(fifo, 0o600) == 0)
        let body = TestServer.bytes(seed: 75, count: 2 << 20)
        Thread.detachNewThread {
            // Blocks until the CLI opens the FIFO for reading; close-on-exec, so
            // that no other child of the test process keeps the FIFO open.
            let fd = open(fifo, O_WRONLY | O_CLOEXEC)
            guard fd >= 0 else { return }
            body.withUnsafeBytes { raw in
                var offset = 0
                while offset < raw.count {
                    let n = write(fd, raw.baseAddress! + offset, raw.count - offset)
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { break }
                    offset += n
                }
            }
            close(fd)
        }

        let output = try runCLI(["put", "-s", "-T", fifo, server.url("/upload").absoluteString], stdin: Data())

        #expect(output.status == 0, "\(output.stderrText)")
        let receipt = try #require(uploadReceipt(output), "\(output.stdoutText) \(output.stderrText)")
        #expect(receipt.length == body.count)
        #expect(receipt.sha256 == FileDigest.sha256(body))
    }

    @Test("a 307 that needs standard input again fails clearly instead of sending a partial body")
    func stdinCannotBeSentTwice() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let body = TestServer.bytes(seed: 76, count: 256 << 10)

        let output = try runCLI(
            ["put", "-s", "-T", "-", server.url("/redirect-to?url=/upload&status=307").absoluteString], stdin: body)

        #expect(output.status != 0)
        #expect(output.status != 1, "not an internal error: \(output.stderrText)")
        #expect(output.stderrText.contains("send the body again"), "\(output.stderrText)")
        #expect(uploadReceipt(output) == nil)
    }
}
