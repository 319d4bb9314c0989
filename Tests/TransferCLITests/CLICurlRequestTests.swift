import Foundation
import Testing
import TestSupport

/// Issue 29, item 2: curl's request and output options, checked at the server or in
/// the output.
@Suite("transfer command: curl's request and output options")
struct CLICurlRequestTests {
    private func echo(_ output: Command.Output) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: output.stdout) as? [String: Any]) ?? [:]
    }

    @Test("--data-raw, --data-urlencode and -d join with &; -G puts them in the query of a GET")
    func dataForms() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let file = directory.file("v.txt")
        try Data("x y\n".utf8).write(to: file)
        let url = server.url("/echo").absoluteString

        let post = try CLI.run(["-s", "-d", "a=1", "--data-raw", "@raw", "--data-urlencode", "n=hello world&",
                                "--data-urlencode", "f@\(file.path)", url])
        let get = try CLI.run(["-s", "-G", "-d", "a=1", "--data-urlencode", "q=a b", url + "?z=0"])

        #expect(post.status == 0, "\(post.stderrText)")
        #expect(echo(post)["body_sha256"] as? String
            == FileDigest.sha256(Data("a=1&@raw&n=hello%20world%26&f=x%20y%0A".utf8)))
        #expect(get.status == 0, "\(get.stderrText)")
        #expect(server.requests.map(\.method) == ["POST", "GET"])
        #expect(server.requests.last?.target == "/echo?z=0&a=1&q=a%20b")
        #expect(echo(get)["body_length"] as? Int == 0)
    }

    @Test("--form-string sends @ as text in a multipart field, where -F would read the file")
    func formString() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let url = server.url("/upload").absoluteString

        let literal = try CLI.run(["-s", "--form-string", "f=@/no/such/file", "-F", "g=1", url])
        let file = try CLI.run(["-s", "-F", "f=@/no/such/file", url])

        #expect(literal.status == 0, "\(literal.stderrText)")
        #expect(server.requests.first?.method == "POST")
        #expect(server.requests.first?.header("Content-Type")?.hasPrefix("multipart/form-data; boundary=") == true)
        #expect(file.status == 3, "\(file.stderrText)")
        #expect(server.requests.count == 1)
    }

    @Test("--url, -e and -r reach the server; the range's bytes are the output")
    func urlRefererRange() throws {
        let server = try TestServer.start()
        defer { server.stop() }

        let output = try CLI.run(["-s", "-e", "http://from.example/;auto", "-r", "10-19",
                                  "--url", server.url("/bytes/100?seed=9").absoluteString])

        #expect(output.status == 0, "\(output.stderrText)")
        #expect(output.stdout == TestServer.bytes(seed: 9, offset: 10, count: 10))
        #expect(server.requests.first?.header("Referer") == "http://from.example/")
        #expect(server.requests.first?.header("Range") == "bytes=10-19")
    }

    @Test("-I sends HEAD and prints the head; -D FILE writes the head, -D - prints it before the body")
    func headAndDumpHeader() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let headers = directory.file("h.txt").path
        let url = server.url("/bytes/5?seed=1").absoluteString

        let head = try CLI.run(["-s", "-I", url])
        let dumped = try CLI.run(["-s", "-D", headers, "-o", directory.file("b").path, url])
        let inline = try CLI.run(["-s", "-D", "-", url])

        #expect(head.status == 0, "\(head.stderrText)")
        #expect(head.stdoutText.hasPrefix("HTTP/1.1 200"), "\(head.stdoutText)")
        #expect(head.stdoutText.contains("Content-Length: 5"))
        #expect(server.requests.first?.method == "HEAD")
        #expect(dumped.status == 0, "\(dumped.stderrText)")
        let text = try String(contentsOfFile: headers, encoding: .utf8)
        #expect(text.hasPrefix("HTTP/1.1 200\r\n"), "\(text)")
        #expect(text.contains("Content-Length: 5\r\n"))
        #expect(text.hasSuffix("\r\n\r\n"))
        #expect(inline.stdoutText.hasPrefix("HTTP/1.1 200"))
        #expect(inline.stdout.suffix(5) == TestServer.bytes(seed: 1, count: 5))
    }

    @Test("--fail-with-body prints the body of a 404 and still exits 9")
    func failWithBody() throws {
        let server = try TestServer.start()
        defer { server.stop() }

        let output = try CLI.run(["-s", "--fail-with-body", server.url("/status/404").absoluteString])

        #expect(output.status == 9, "\(output.stderrText)")
        #expect(output.stdoutText == "status 404\n")
    }

    @Test("-z sends If-Modified-Since; a 304 exits 0 and leaves the -o file as it was")
    func timeCondition() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let file = directory.file("page")
        try Data("kept\n".utf8).write(to: file)
        let url = server.url("/cache/page?lm=1").absoluteString

        let notModified = try CLI.run(["-s", "-z", TestServer.lastModified, "-o", file.path, url])
        let older = try CLI.run(["-s", "-z", "2001-01-01", url])
        let unmodified = try CLI.run(["-s", "-z", "-2001-01-01", url])

        #expect(notModified.status == 0, "\(notModified.stderrText)")
        #expect(try String(contentsOf: file, encoding: .utf8) == "kept\n")
        #expect(CLI.listing(directory.path) == ["page"])
        #expect(older.status == 0, "\(older.stderrText)")
        #expect(older.stdoutText == "cached page")
        #expect(server.requests[0].header("If-Modified-Since") == TestServer.lastModified)
        #expect(server.requests[1].header("If-Modified-Since") == "Mon, 01 Jan 2001 00:00:00 GMT")
        #expect(server.requests[2].header("If-Unmodified-Since") == "Mon, 01 Jan 2001 00:00:00 GMT")
        #expect(unmodified.status == 0)
    }

    @Test("--etag-save writes the ETag; --etag-compare sends it and a 304 exits 0 with no output")
    func etags() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let etag = directory.file("etag").path
        let url = server.url("/cache/e?etag=v7").absoluteString

        let first = try CLI.run(["-s", "--etag-save", etag, url])
        let second = try CLI.run(["-s", "--etag-compare", etag, url])

        #expect(first.status == 0, "\(first.stderrText)")
        #expect(first.stdoutText == "cached e")
        #expect(try String(contentsOfFile: etag, encoding: .utf8) == "\"v7\"\n")
        #expect(second.status == 0, "\(second.stderrText)")
        #expect(second.stdout.isEmpty)
        #expect(server.requests.last?.header("If-None-Match") == "\"v7\"")
    }

    @Test("-C - resumes as --resume: a complete download leaves the file and no part file")
    func continueAt() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()

        let output = try CLI.run(["-s", "-C", "-", "-o", directory.file("r").path,
                                  server.url("/bytes/4000?seed=5").absoluteString])

        #expect(output.status == 0, "\(output.stderrText)")
        #expect(try FileDigest.sha256(of: directory.file("r")) == TestServer.sha256(seed: 5, count: 4000))
        #expect(CLI.listing(directory.path) == ["r"])
    }

    @Test("--proto =https refuses an http URL unsent (exit 3); --proto-redir =https a redirect to http (exit 8)")
    func protocols() throws {
        let server = try TestServer.start()
        defer { server.stop() }

        let refused = try CLI.run(["-s", "--proto", "=https", server.url("/bytes/3").absoluteString])
        let redirect = try CLI.run(["-s", "--proto-redir", "=https", server.url("/redirect/1").absoluteString])
        let allowed = try CLI.run(["-s", "--proto", "-all,http", "--proto-redir", "http",
                                   server.url("/redirect/1").absoluteString])

        #expect(refused.status == 3, "\(refused.stderrText)")
        #expect(refused.stderrText.contains("--proto: http is not allowed"))
        #expect(redirect.status == 8, "\(redirect.stderrText)")
        #expect(redirect.stderrText.contains("--proto-redir: the redirect to http://"), "\(redirect.stderrText)")
        #expect(redirect.stdout.isEmpty)
        #expect(allowed.status == 0, "\(allowed.stderrText)")
        #expect(allowed.stdoutText == #"{"redirects":"done"}"#)
        #expect(server.requests.map(\.path) == ["/redirect/1", "/redirect/1", "/redirect/0"])
    }

    @Test("-H @FILE sends the file's headers; --oauth2-bearer sends the token")
    func headerFileAndBearer() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let file = directory.file("headers.txt")
        try Data("X-One: 1\r\n\r\nX-Two: two\n".utf8).write(to: file)

        let headers = try CLI.run(["-s", "--discard", "-H", "@" + file.path, server.url("/bytes/1").absoluteString])
        let bearer = try CLI.run(["-s", "--oauth2-bearer", "tok3n", server.url("/bearer/tok3n").absoluteString])

        #expect(headers.status == 0, "\(headers.stderrText)")
        #expect(server.requests.first?.header("X-One") == "1")
        #expect(server.requests.first?.header("X-Two") == "two")
        #expect(bearer.status == 0, "\(bearer.stderrText)")
        #expect(server.requests.last?.header("Authorization") == "Bearer tok3n")
    }

    @Test("-R gives the file the server's Last-Modified; --stderr FILE takes the failure line")
    func remoteTimeAndStderr() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let file = directory.file("page")
        let log = directory.file("err.txt").path

        let timed = try CLI.run(["-s", "-R", "-o", file.path, server.url("/cache/page?lm=1").absoluteString])
        let failed = try CLI.run(["-s", "--stderr", log, server.url("/status/404").absoluteString])

        #expect(timed.status == 0, "\(timed.stderrText)")
        let modified = try FileManager.default.attributesOfItem(atPath: file.path)[.modificationDate] as? Date
        #expect(modified == Date(timeIntervalSince1970: 1_445_412_480))   // Wed, 21 Oct 2015 07:28:00 GMT
        #expect(failed.status == 9)
        #expect(failed.stderr.isEmpty, "\(failed.stderrText)")
        #expect(try String(contentsOfFile: log, encoding: .utf8).contains("HTTP status not acceptable"))
    }

    @Test("--path-as-is sends /../ as typed; without it the path is squashed")
    func pathAsIs() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let url = server.baseURL.absoluteString + "/a/../bytes/3"

        let squashed = try CLI.run(["-s", "--discard", url])
        let asIs = try CLI.run(["-s", "--discard", "--accept-status", "200-499", "--path-as-is", url])

        #expect(squashed.status == 0, "\(squashed.stderrText)")
        #expect(asIs.status == 0, "\(asIs.stderrText)")
        #expect(server.requests.map(\.target) == ["/bytes/3", "/a/../bytes/3"])
    }

    @Test("--netrc-file and -n (~/.netrc) send the file's credentials for the host")
    func netrc() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let home = try TemporaryDirectory()
        let netrc = home.file(".netrc").path
        try "machine 127.0.0.1 login alice password s3cret\n".write(toFile: netrc, atomically: true, encoding: .utf8)
        chmod(netrc, 0o600)
        let url = server.url("/basic-auth/alice/s3cret").absoluteString

        let file = try CLI.run(["-s", "--discard", "--netrc-file", netrc, url])
        let home_ = try Command.run(try CLI.binary(), ["-s", "--discard", "-n", url], environment: ["HOME": home.path])
        let without = try CLI.run(["-s", "--discard", url])

        #expect(file.status == 0, "\(file.stderrText)")
        #expect(home_.status == 0, "\(home_.stderrText)")
        #expect(without.status == 9)
        let expected = "Basic " + Data("alice:s3cret".utf8).base64EncodedString()
        #expect(server.requests.prefix(2).allSatisfy { $0.header("Authorization") == expected })
    }
}
