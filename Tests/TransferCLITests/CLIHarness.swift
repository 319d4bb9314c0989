import Foundation
import TestSupport

/// Finds and runs the built `transfer` binary.
///
/// The binary is a separate product: build it before the tests with
/// `swift build --product transfer` (plain `swift build` also does); it is
/// looked up next to the test bundle (`.build/<config>/transfer`), or at
/// `$TRANSFER_CLI` when set.
enum CLI {
    struct Missing: Error, CustomStringConvertible {
        var path: String
        var description: String {
            "the transfer binary is not at \(path): run `swift build --product transfer` before `swift test`"
        }
    }

    static func binary() throws -> String {
        if let explicit = ProcessInfo.processInfo.environment["TRANSFER_CLI"] { return explicit }
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0]
        var directory = URL(fileURLWithPath: executable).deletingLastPathComponent()
        // The test binary may sit inside `<name>.xctest/` or next to it.
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("transfer").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        throw Missing(path: URL(fileURLWithPath: executable).deletingLastPathComponent().path + "/transfer")
    }

    /// Runs `transfer arguments...` to completion, stdin from /dev/null.
    static func run(_ arguments: [String], timeout: Duration = .seconds(60)) throws -> Command.Output {
        try Command.run(try binary(), arguments, timeout: timeout)
    }

    /// Bytes of `data` that are control characters other than newline.
    static func controlBytes(_ data: Data) -> [UInt8] {
        data.filter { ($0 < 0x20 && $0 != 0x0A) || $0 == 0x7F }
    }

    /// A loopback port with nothing listening (bound, then closed).
    static func refusedPort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Missing(path: "socket()") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                bind(fd, raw, length) == 0 && getsockname(fd, raw, &length) == 0
            }
        }
        guard bound else { throw Missing(path: "bind()") }
        return UInt16(bigEndian: address.sin_port)
    }

    /// Names in `directory`, hidden ones included, sorted.
    static func listing(_ directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
    }
}

/// A `transfer` process whose standard output is collected while it runs, so that a test
/// can wait for a line (an event) before it lets the server go on. Its waits are async and
/// sleep the task, not a thread: a blocked pool thread could starve the engines of other
/// tests running in parallel.
final class RunningCLI {
    private let process = Process()
    private let stdoutPipe = Pipe()
    /// The output so far, and whether the reader saw end of file.
    private let collected = Locked((data: Data(), eof: false))
    private let exited = Locked(false)

    /// Starts `transfer arguments...`, stdin from /dev/null, stderr discarded.
    init(_ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: try CLI.binary())
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = stdoutPipe
        process.standardError = FileHandle.nullDevice
        let exited = exited
        process.terminationHandler = { _ in exited.withLock { $0 = true } }
        try process.run()
        let fd = stdoutPipe.fileHandleForReading.fileDescriptor
        let collected = collected
        Thread.detachNewThread {
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                collected.withLock { $0.data.append(contentsOf: buffer[0..<n]) }
            }
            collected.withLock { $0.eof = true }
        }
    }

    /// The complete lines written to stdout so far.
    var stdoutLines: [String] {
        let text = String(decoding: collected.withLock { $0.data }, as: UTF8.self)
        guard let end = text.lastIndex(of: "\n") else { return [] }
        return text[..<end].split(separator: "\n").map(String.init)
    }

    /// Waits for the process to exit and its stdout to reach end of file; kills it when
    /// `timeout` passes first.
    ///
    /// - Returns: The exit status, or nil when the process had to be killed.
    func wait(timeout: Duration = .seconds(60)) async -> Int32? {
        let done = await Wait.poll(timeout: timeout) {
            exited.withLock { $0 } && collected.withLock { $0.eof }
        }
        guard done else {
            process.terminate()
            return nil
        }
        return process.terminationStatus
    }
}
