import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// TLS in front of a loopback TCP service, by a real peer: Debian's `socat`
/// (`OPENSSL-LISTEN` on 127.0.0.1 at a free port, forking per connection, forwarding the
/// plaintext to `127.0.0.1:<backendPort>`). With ``TestHTTPProxy`` behind it, it is an
/// HTTPS proxy. `scripts/bootstrap.sh` installs socat.
public final class TLSFront: Sendable {
    public let port: UInt16
    private let pid: pid_t
    private let stopped = Locked(false)

    /// Path of the socat binary: `$TRANSFER_SOCAT` or `/usr/bin/socat`.
    public static var socatPath: String {
        ProcessInfo.processInfo.environment["TRANSFER_SOCAT"] ?? "/usr/bin/socat"
    }

    /// Starts socat and waits (at most 10 s) until it accepts connections.
    ///
    /// - Parameters:
    ///   - backendPort: Where the decrypted bytes go (127.0.0.1).
    ///   - certificateChain: PEM chain the front presents (leaf first).
    ///   - key: The leaf's PEM private key.
    /// - Throws: `TestSupportError` when socat is missing or does not start.
    public init(backendPort: UInt16, certificateChain: String, key: String) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.socatPath) else {
            throw TestSupportError("socat is not installed (\(Self.socatPath)); run scripts/bootstrap.sh")
        }
        var lastError = TestSupportError("socat did not start")
        for _ in 0..<5 {
            // A free port (bind to 0, release): socat cannot report the port it picked.
            let port = try NginxFixture.freePorts(1)[0]
            let address =
                "OPENSSL-LISTEN:\(port),bind=127.0.0.1,reuseaddr,fork,verify=0,"
                + "cert=\(certificateChain),key=\(key)"
            let pid = try Spawn.start(Self.socatPath, [address, "TCP:127.0.0.1:\(backendPort)"])
            let clock = ContinuousClock()
            let deadline = clock.now.advanced(by: .seconds(10))
            var exited = false
            while clock.now < deadline {
                if Spawn.reap(pid) != nil {
                    exited = true
                    break
                }
                if NginxFixture.canConnect(port: port) {
                    self.port = port
                    self.pid = pid
                    return
                }
                Thread.sleep(forTimeInterval: 0.005)
            }
            if !exited {
                kill(pid, SIGKILL)
                _ = Wait.poll(timeout: .seconds(5)) { Spawn.reap(pid) != nil }
                throw TestSupportError("socat did not listen on 127.0.0.1:\(port) within 10 s")
            }
            lastError = TestSupportError("socat exited at start-up (port \(port) taken?)")
        }
        throw lastError
    }

    deinit { stop() }

    /// Stops socat (SIGTERM, then SIGKILL after 5 s). Idempotent.
    public func stop() {
        let first = stopped.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        guard first else { return }
        kill(pid, SIGTERM)
        if !Wait.poll(timeout: .seconds(5), { Spawn.reap(pid) != nil }) {
            kill(pid, SIGKILL)
            _ = Wait.poll(timeout: .seconds(5)) { Spawn.reap(pid) != nil }
        }
    }
}
