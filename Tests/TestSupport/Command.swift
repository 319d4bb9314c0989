import Foundation

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
        timeout: Duration = .seconds(120)
    ) throws -> Output {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        do {
            try process.run()
        } catch {
            throw TestSupportError("cannot run \(executable): \(error)")
        }
        // Both pipes are drained on their own threads so a chatty child never blocks on a full
        // pipe, and a child that hangs still meets the timeout below.
        let collected = Locked<(out: Data, err: Data)>((Data(), Data()))
        let readers = DispatchGroup()
        readers.enter()
        Thread.detachNewThread {
            let data = out.fileHandleForReading.readDataToEndOfFile()
            collected.withLock { $0.out = data }
            readers.leave()
        }
        readers.enter()
        Thread.detachNewThread {
            let data = err.fileHandleForReading.readDataToEndOfFile()
            collected.withLock { $0.err = data }
            readers.leave()
        }
        if exited.wait(timeout: .now() + Wait.seconds(timeout)) == .timedOut {
            kill(process.processIdentifier, SIGKILL)
            exited.wait()
            throw TestSupportError("\(executable) \(arguments.joined(separator: " ")) timed out after \(timeout)")
        }
        // A daemon the child left behind may hold the pipes open; do not wait for it forever.
        _ = readers.wait(timeout: .now() + 5)
        let (stdout, stderr) = collected.withLock { $0 }
        var status = process.terminationStatus
        if process.terminationReason == .uncaughtSignal {
            status += 128
        }
        return Output(status: status, stdout: stdout, stderr: stderr)
    }
}
