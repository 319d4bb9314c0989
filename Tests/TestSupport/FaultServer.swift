import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A misbehaving TLS or HTTP/2 server: `Tests/Fixtures/faultserver.py` run by Debian's
/// `/usr/bin/python3` on 127.0.0.1 at a free port (the script binds port 0 and prints it).
/// The HTTP/2 modes need Python's `h2` package (`python3-h2`); `scripts/bootstrap.sh`
/// installs it. The script's docstring lists the modes.
///
/// The server reports what it did as `EVENT …` lines (``events``), so a test can check that
/// the fault really happened (a GOAWAY with streams in flight, a reset stream) instead of
/// trusting the outcome alone.
public final class FaultServer: Sendable {
    public let port: UInt16
    private let pid: pid_t
    private let outputFile: URL
    private let stopped = Locked(false)

    /// The Python interpreter: `$TRANSFER_PYTHON` or `/usr/bin/python3` (the one Debian's
    /// python3-h2 installs into, whatever `python3` is first on PATH).
    public static var pythonPath: String {
        ProcessInfo.processInfo.environment["TRANSFER_PYTHON"] ?? "/usr/bin/python3"
    }

    /// `Tests/Fixtures/faultserver.py`, found from this source file's location.
    public static var scriptPath: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/faultserver.py").path
    }

    /// Starts the script in `mode` and waits (at most 10 s) for its port.
    ///
    /// - Parameters:
    ///   - mode: One of the script's modes (`tls-no-notify`, `h2-goaway`, …).
    ///   - certificateChain: PEM chain the server presents (leaf first).
    ///   - key: The leaf's PEM private key.
    ///   - arguments: Extra arguments for the mode (`--wait 3`).
    /// - Throws: `TestSupportError` when python3 (or `h2` for an h2 mode) is missing or the
    ///   script does not start; the message carries what it printed.
    public init(mode: String, certificateChain: String, key: String, arguments: [String] = []) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.pythonPath) else {
            throw TestSupportError("python3 is not installed (\(Self.pythonPath)); run scripts/bootstrap.sh")
        }
        let output = FileManager.default.temporaryDirectory
            .appendingPathComponent("transfer-faultserver-\(UUID().uuidString).log")
        let pid = try Spawn.start(
            Self.pythonPath, ["-u", Self.scriptPath, mode, "--cert", certificateChain, "--key", key] + arguments,
            stdout: .appending(output.path), stderr: .appending(output.path))
        var found: UInt16?
        var exited = false
        _ = Wait.poll(timeout: .seconds(10)) {
            if Spawn.reap(pid) != nil {
                exited = true
                return true
            }
            let text = String(decoding: readWholeFile(output.path) ?? Data(), as: UTF8.self)
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("PORT ") }) {
                found = UInt16(line.dropFirst(5))
            }
            return found != nil
        }
        guard let found, !exited else {
            if !exited {
                kill(pid, SIGKILL)
                _ = Wait.poll(timeout: .seconds(5)) { Spawn.reap(pid) != nil }
            }
            let text = String(decoding: readWholeFile(output.path) ?? Data(), as: UTF8.self)
            try? FileManager.default.removeItem(at: output)
            let hint = text.contains("No module named 'h2'") ? " (install python3-h2: scripts/bootstrap.sh)" : ""
            throw TestSupportError("faultserver.py \(mode) did not start\(hint): \(text)")
        }
        self.port = found
        self.pid = pid
        self.outputFile = output
    }

    deinit { stop() }

    /// The `EVENT` lines so far, without the prefix, oldest first.
    public var events: [String] {
        let text = String(decoding: readWholeFile(outputFile.path) ?? Data(), as: UTF8.self)
        return text.split(separator: "\n").filter { $0.hasPrefix("EVENT ") }.map { String($0.dropFirst(6)) }
    }

    /// Everything the script printed (for failure messages).
    public var output: String {
        String(decoding: readWholeFile(outputFile.path) ?? Data(), as: UTF8.self)
    }

    /// `https://127.0.0.1:<port><path>`.
    public func url(_ path: String) -> URL {
        URL(string: "https://127.0.0.1:\(port)\(path)")!
    }

    /// Waits (bounded) until an event containing `text` was printed.
    public func waitForEvent(containing text: String, timeout: Duration = .seconds(10)) -> Bool {
        Wait.poll(timeout: timeout) { events.contains { $0.contains(text) } }
    }

    /// Lets a mode that waits for the test go on (SIGUSR1; see the script's modes).
    public func openGate() {
        kill(pid, SIGUSR1)
    }

    /// Kills the script (SIGKILL: it holds no state worth a clean exit). Idempotent.
    public func stop() {
        let first = stopped.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        guard first else { return }
        kill(pid, SIGKILL)
        _ = Wait.poll(timeout: .seconds(5)) { Spawn.reap(pid) != nil }
        try? FileManager.default.removeItem(at: outputFile)
    }

    /// The body the script sends for `path` (its path and a newline, repeated), `size` bytes
    /// (default four repetitions).
    public static func body(for path: String, size: Int? = nil) -> Data {
        let unit = Array((path + "\n").utf8)
        let count = size ?? 4 * unit.count
        var out = [UInt8]()
        out.reserveCapacity(count)
        while out.count < count { out += unit }
        return Data(out[0..<count])
    }
}
