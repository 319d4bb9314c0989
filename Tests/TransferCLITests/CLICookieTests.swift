import Foundation
import Testing
import TestSupport

/// `-b/--cookie` and `-c/--cookie-jar`, against TestServer's /response-headers (sets
/// cookies) and /echo (shows the Cookie header), and checked with the real curl.
@Suite("CLI cookies")
struct CLICookieTests {
    private func cookieHeader(_ output: Command.Output) throws -> String? {
        let object = try JSONSerialization.jsonObject(with: output.stdout) as? [String: Any]
        return (object?["headers"] as? [String: Any])?["cookie"] as? String
    }

    private func setURL(_ server: TestServer, _ cookies: String...) -> String {
        var components = URLComponents(url: server.url("/response-headers"), resolvingAgainstBaseURL: false)!
        components.queryItems = cookies.map { URLQueryItem(name: "Set-Cookie", value: $0) }
        return components.url!.absoluteString
    }

    @Test("-b NAME=VALUE is sent as is")
    func cookieString() throws {
        let server = try TestServer.start()
        defer { server.stop() }

        let run = try CLI.run(["get", "-s", "-b", "a=1; b=two", server.url("/echo").absoluteString])

        #expect(run.status == 0, "\(run.stderrText)")
        #expect(try cookieHeader(run) == "a=1; b=two")
    }

    @Test("-b FILE starts the engine from a Netscape file; a missing file starts it empty")
    func cookieFile() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let folder = try TemporaryDirectory()
        let file = folder.file("in.txt")
        try Data("# Netscape HTTP Cookie File\n127.0.0.1\tFALSE\t/\tFALSE\t0\tfromfile\tyes\ngarbage line\n".utf8)
            .write(to: file)

        let run = try CLI.run(["get", "-s", "-b", file.path, server.url("/echo").absoluteString])
        let missing = try CLI.run(["get", "-s", "-b", folder.file("none.txt").path, server.url("/echo").absoluteString])

        #expect(run.status == 0, "\(run.stderrText)")
        #expect(try cookieHeader(run) == "fromfile=yes")
        #expect(missing.status == 0, "\(missing.stderrText)")
        #expect(try cookieHeader(missing) == nil)
    }

    @Test("-b with a binary file fails with exit 3 and a clear message")
    func garbledFile() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let folder = try TemporaryDirectory()
        let file = folder.file("binary")
        try Data([0x00, 0x01, 0xff, 0x09]).write(to: file)

        let run = try CLI.run(["get", "-s", "-b", file.path, server.url("/echo").absoluteString])

        #expect(run.status == 3)
        #expect(run.stderrText.contains("cookie file"))
    }

    @Test("-c FILE holds every cookie of the run, and real curl -b sends them")
    func cookieJarReadByCurl() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let folder = try TemporaryDirectory()
        let jar = folder.file("jar.txt")

        let run = try CLI.run(["get", "-s", "-o", "/dev/null", "-c", jar.path,
                               setURL(server, "one=1; Max-Age=600", "two=2; HttpOnly")])
        #expect(run.status == 0, "\(run.stderrText)")
        let text = try String(contentsOf: jar, encoding: .utf8)
        #expect(text.hasPrefix("# Netscape HTTP Cookie File"))
        #expect(text.contains("#HttpOnly_127.0.0.1\t"))

        let curl = try Command.run("/usr/bin/curl", ["-sS", "-b", jar.path, server.url("/echo").absoluteString])
        #expect(curl.status == 0, "\(curl.stderrText)")
        let sent = try cookieHeader(curl)?.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(sent?.sorted() == ["one=1", "two=2"])
    }

    @Test("with -c, a cookie set by one URL of the run is sent to the next")
    func cookiesFlowWithinARun() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let folder = try TemporaryDirectory()

        let out = try TemporaryDirectory()

        let run = try CLI.run(["get", "-s", "--parallel", "1", "-c", folder.file("jar").path,
                               "--output-dir", out.url.path, setURL(server, "flow=1"),
                               server.url("/echo").absoluteString])

        #expect(run.status == 0, "\(run.stderrText)")
        // Several URLs: each body goes to a file named after the URL, /echo's to "echo".
        let echo = try Data(contentsOf: out.file("echo"))
        let object = try JSONSerialization.jsonObject(with: echo) as? [String: Any]
        #expect((object?["headers"] as? [String: Any])?["cookie"] as? String == "flow=1")
    }

    @Test("-c FILE writes a new jar 0600 and keeps an existing jar's 0600 under a 022 umask (issue 25 item 6)")
    func cookieJarPermissions() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let folder = try TemporaryDirectory()
        let fresh = folder.file("new.txt")
        let kept = folder.file("kept.txt")
        try Data("# Netscape HTTP Cookie File\n".utf8).write(to: kept)
        #expect(chmod(kept.path, 0o600) == 0)
        // The child inherits the umask; Foundation's atomic write made 0644 under it.
        let previous = umask(0o022)
        defer { umask(previous) }

        for jar in [fresh, kept] {
            let run = try CLI.run(["get", "-s", "-o", "/dev/null", "-c", jar.path,
                                   setURL(server, "sid=s3cret; HttpOnly")])
            #expect(run.status == 0, "\(run.stderrText)")
        }

        var info = stat()
        #expect(stat(fresh.path, &info) == 0 && info.st_mode & 0o777 == 0o600, "\(String(info.st_mode, radix: 8))")
        #expect(stat(kept.path, &info) == 0 && info.st_mode & 0o777 == 0o600, "\(String(info.st_mode, radix: 8))")
        #expect(try String(contentsOf: kept, encoding: .utf8).contains("\tsid\ts3cret"))
    }
}
