import Foundation
import Testing
import TestSupport

/// `-o` naming something that is not a regular file (`/dev/null`, a FIFO): the body is
/// written into it, as curl does; nothing is staged beside it, renamed over it or removed.
/// (A failed `-o /dev/null` once unlinked the machine's /dev/null; a successful one renamed
/// a regular file over it.) The tests use their own device node and FIFO, never /dev/null.
@Suite("CLI output to devices and pipes", .serialized)
struct CLIDeviceOutputTests {
    /// A node for the null device (the one /dev/null is), at `path`; 0 or an errno.
    private func makeNullDevice(_ path: String) -> Int32 {
        var info = stat()
        guard stat("/dev/null", &info) == 0 else { return errno }
        return mknod(path, S_IFCHR | 0o666, info.st_rdev) == 0 ? 0 : errno
    }

    private func isCharacterDevice(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFCHR
    }

    @Test("-o with a null device writes into it and leaves it a device, on success and on failure",
          .enabled(if: geteuid() == 0, "making a device node needs root"))
    func nullDevice() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let null = directory.file("null").path
        // The device /dev/null is, in a folder of our own.
        try #require(makeNullDevice(null) == 0)

        let ok = try CLI.run(["get", "-o", null, server.url("/bytes/300000?seed=9").absoluteString])
        let refused = try CLI.run(["get", "-o", null, server.url("/no-such-route").absoluteString])
        let discarded = try CLI.run(["post", "--data", "x", "-o", null, server.url("/bytes/1000").absoluteString])

        #expect(ok.status == 0, "\(ok.stderrText)")
        #expect(refused.status == 9, "\(refused.stderrText)")
        #expect(discarded.status == 0, "\(discarded.stderrText)")
        #expect(isCharacterDevice(null))
        #expect(CLI.listing(directory.path) == ["null"])   // no .part, no staging file
    }

    @Test("-o with the null device drops the body as --discard does: no temporary folder is needed",
          .enabled(if: geteuid() == 0, "making a device node needs root"))
    func nullDeviceNeedsNoScratch() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let null = directory.file("null").path
        try #require(makeNullDevice(null) == 0)
        // A temporary folder that cannot be made: a staged body fails with 12.
        let nowhere = ["TMPDIR": directory.file("missing/folder").path]
        let url = server.url("/bytes/300000?seed=9").absoluteString

        let dropped = try Command.run(try CLI.binary(), ["get", "-s", "-o", null, "-w", "%{size_download}", url],
                                      environment: nowhere)
        let staged = try Command.run(try CLI.binary(), ["get", "-s", url], environment: nowhere)

        #expect(dropped.status == 0, "\(dropped.stderrText)")
        #expect(dropped.stdoutText == "300000")
        #expect(staged.status == 12, "\(staged.stderrText)")
        #expect(isCharacterDevice(null))
        #expect(CLI.listing(directory.path) == ["null"])
    }

    @Test("-o with a FIFO streams the whole body into it and leaves the FIFO in place")
    func fifo() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let pipe = directory.file("pipe").path
        #expect(mkfifo(pipe, 0o600) == 0, "mkfifo: \(String(cString: strerror(errno)))")
        let count = 2_000_000
        let received = Locked(Data())
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            // Blocks until the CLI opens the FIFO for writing; ends at its close.
            let fd = open(pipe, O_RDONLY | O_CLOEXEC)
            if fd >= 0 {
                var buffer = [UInt8](repeating: 0, count: 65536)
                while true {
                    let n = read(fd, &buffer, buffer.count)
                    if n <= 0 { break }
                    received.withLock { $0.append(contentsOf: buffer[0..<n]) }
                }
                close(fd)
            }
            done.signal()
        }

        let result = try CLI.run(["get", "-o", pipe, server.url("/bytes/\(count)?seed=3").absoluteString])

        #expect(result.status == 0, "\(result.stderrText)")
        #expect(done.wait(timeout: .now() + 60) == .success, "the reader never saw the FIFO closed")
        #expect(received.withLock { FileDigest.sha256($0) } == DeterministicBytes.sha256(seed: 3, count: count))
        var info = stat()
        #expect(lstat(pipe, &info) == 0 && info.st_mode & S_IFMT == S_IFIFO)
        #expect(CLI.listing(directory.path) == ["pipe"])
    }

    @Test("--resume with -o naming a device is a usage error",
          .enabled(if: geteuid() == 0, "making a device node needs root"))
    func resumeNeedsRegularFile() throws {
        let directory = try TemporaryDirectory()
        let null = directory.file("null").path
        try #require(makeNullDevice(null) == 0)

        let result = try CLI.run(["get", "--resume", "-o", null, "http://127.0.0.1:9/x"])

        #expect(result.status == 2, "\(result.stderrText)")
        #expect(isCharacterDevice(null))
    }
}
