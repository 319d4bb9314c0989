import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Runs a subprocess to completion and captures its output; for scripts and `curl` in tests.
public enum Command {
    /// The outcome of a finished subprocess.
    public struct Output: Sendable {
        /// The exit status, or 128 + signal number when a signal ended it.
        public var status: Int32
        public var stdout: Data
        public var stderr: Data
        public var stdoutText: String { String(decoding: stdout, as: UTF8.self) }
        public var stderrText: String { String(decoding: stderr, as: UTF8.self) }
    }

    /// Runs `executable` with `arguments` and waits for it to exit.
    ///
    /// - Parameters:
    ///   - executable: Absolute path of the program.
    ///   - arguments: Its arguments (no shell is involved).
    ///   - environment: Extra variables on top of this process's environment.
    ///   - timeout: The child is sent SIGKILL once this passes.
    /// - Throws: `TestSupportError` when it cannot be started or exceeds `timeout`.
    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:],
        stdin input: Data? = nil, timeout: Duration = .seconds(120)
    ) throws -> Output {
        // With `input`: written to the child's stdin through a close-on-exec pipe, then closed.
        let stdinPipe = try input.map { _ in try Spawn.pipe() }
        defer { if let stdinPipe { close(stdinPipe.read) } }
        let out = try Spawn.pipe()
        let err: (read: Int32, write: Int32)
        do {
            err = try Spawn.pipe()
        } catch {
            close(out.read)
            close(out.write)
            throw error
        }
        let pid: pid_t
        do {
            pid = try Spawn.start(
                executable, arguments, environment: environment,
                stdin: stdinPipe.map { .descriptor($0.read) } ?? .null, stdout: .descriptor(out.write),
                stderr: .descriptor(err.write))
        } catch {
            [out.read, out.write, err.read, err.write].forEach { close($0) }
            if let stdinPipe { close(stdinPipe.write) }
            throw error
        }
        close(out.write)
        close(err.write)
        if let stdinPipe, let input {
            let fd = stdinPipe.write
            Thread.detachNewThread {
                // A child that exits early gives EPIPE here, not a SIGPIPE for the test process.
                var block = sigset_t()
                sigemptyset(&block)
                sigaddset(&block, SIGPIPE)
                pthread_sigmask(SIG_BLOCK, &block, nil)
                writeAll(fd, input)
                close(fd)
            }
        }

        // Both pipes are drained on their own threads so a chatty child never blocks on a full
        // pipe, and a child that hangs still meets the timeout below.
        let collected = Locked<(out: Data, err: Data)>((Data(), Data()))
        let readers = DispatchGroup()
        for (fd, isOut) in [(out.read, true), (err.read, false)] {
            readers.enter()
            Thread.detachNewThread {
                let data = readAll(fd)
                close(fd)
                collected.withLock { isOut ? ($0.out = data) : ($0.err = data) }
                readers.leave()
            }
        }
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        var status: Int32?
        while status == nil {
            status = Spawn.reap(pid)
            if status == nil {
                if clock.now >= deadline {
                    kill(pid, SIGKILL)
                    let reaped = Wait.poll(timeout: .seconds(5)) { Spawn.reap(pid) != nil }
                    throw TestSupportError(
                        "\(executable) \(arguments.joined(separator: " ")) timed out after \(timeout)"
                            + (reaped ? "" : "; it survived SIGKILL for 5 s"))
                }
                _ = poll(nil, 0, 2)
            }
        }
        // A daemon the child left behind may hold the pipes open; do not wait for it forever.
        _ = readers.wait(timeout: .now() + 5)
        let (stdout, stderr) = collected.withLock { $0 }
        return Output(status: Spawn.exitCode(status ?? 0), stdout: stdout, stderr: stderr)
    }

    private static func writeAll(_ fd: Int32, _ data: Data) {
        data.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return }
                offset += n
            }
        }
    }

    private static func readAll(_ fd: Int32) -> Data {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return data }
            data.append(contentsOf: buffer[0..<n])
        }
    }
}
