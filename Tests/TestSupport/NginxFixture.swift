import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Thrown by `NginxFixture.start()` when nginx is not installed; tests turn it into a skip.
///
/// `scripts/test.sh` installs nginx, so CI never sees this.
public struct NginxUnavailable: Error, CustomStringConvertible, Sendable {
    public var reason: String
    public var description: String { "nginx unavailable: \(reason) (apt-get install nginx)" }
}

/// A real nginx on free loopback ports with a throwaway CA, for the nginx integration suite.
///
/// Listeners (all 127.0.0.1): plain HTTP/1.1, HTTPS limited to HTTP/1.1, and HTTPS with
/// HTTP/2. TLS material comes from `scripts/gen-tls.sh` (root CA -> intermediate -> leaf for
/// `localhost`, `127.0.0.1` and `::1`); the server sends leaf + intermediate, clients trust
/// `caFile`. The configuration is written by `scripts/nginx-fixture.sh conf`, so the shell
/// demo and the tests serve the same locations:
///
/// - `/files/...` static files (`ensureFile(size:seed:)`), with Range, ETag, Last-Modified;
/// - `/slow/files/...?rate=BYTES_PER_SEC` the same files, rate-limited per connection
///   (nginx `limit_rate`, default 1 MiB/s; suffixes `k` and `m` accepted; nginx sends the
///   first second's worth at once, then paces);
/// - `/upload` any method and size: nginx reads the whole body, drops it and answers
///   200 `{"request_length":N,"content_length":"L"}`;
/// - `/nginx_status` stub_status.
///
/// Use `shared()` (one instance per test process, started lazily, stopped at exit); `start()`
/// makes a private instance. nginx also stops when this process dies without running exit
/// handlers: its wrapper watches a pipe only this process holds.
public final class NginxFixture: Sendable {
    /// Which of the three listeners.
    public enum Listener: Sendable, CaseIterable {
        /// Plain HTTP/1.1.
        case http
        /// TLS, ALPN offers only http/1.1.
        case https
        /// TLS with HTTP/2 (ALPN h2).
        case http2
    }

    /// The fixture's private directory (config, logs, TLS material, content root).
    public let directory: String
    public let httpPort: UInt16
    public let httpsPort: UInt16
    public let http2Port: UInt16
    /// The nginx master process.
    public let masterPID: pid_t

    private let wrapperPID: pid_t
    private let ownedDirectory: TemporaryDirectory
    /// Write end of the watchdog pipe; -1 once closed. Also serialises `ensureFile`.
    private let state: Locked<State>

    private struct State: Sendable {
        var watchdogFD: Int32
        var stopped = false
        var files: [String: String] = [:]
    }

    /// The root CA (PEM) that signed the server chain: the trust anchor for clients.
    public var caFile: String { directory + "/tls/ca.pem" }
    /// Leaf + intermediate (PEM), as the server sends it.
    public var chainFile: String { directory + "/tls/chain.pem" }
    /// The leaf certificate alone (PEM).
    public var serverCertificateFile: String { directory + "/tls/server.pem" }
    /// The intermediate CA certificate (PEM).
    public var intermediateFile: String { directory + "/tls/intermediate.pem" }
    /// The leaf's private key (PEM).
    public var serverKeyFile: String { directory + "/tls/server.key" }
    /// The content root; URL path `/x` is the file `contentRoot + "/x"`.
    public var contentRoot: String { directory + "/www" }
    /// nginx's error log.
    public var errorLog: String { directory + "/logs/error.log" }

    /// Path of the nginx binary: `$TRANSFER_NGINX` or `/usr/sbin/nginx`.
    public static var nginxPath: String {
        let configured = ProcessInfo.processInfo.environment["TRANSFER_NGINX"] ?? ""
        return configured.isEmpty ? "/usr/sbin/nginx" : configured
    }

    /// Whether nginx is installed, for `.enabled(if: NginxFixture.isInstalled)` traits.
    public static var isInstalled: Bool {
        FileManager.default.isExecutableFile(atPath: nginxPath)
    }

    /// The repository's `scripts/` directory, found from this source file's location.
    public static var scriptsDirectory: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts").path
    }

    // MARK: Lifecycle

    /// The process-wide instance, started on first use (thread-safe) and stopped at exit.
    ///
    /// - Throws: `NginxUnavailable` when nginx is not installed; `TestSupportError` when it
    ///   cannot be started. A failure is remembered and rethrown to later callers.
    public static func shared() throws -> NginxFixture {
        try sharedInstance.withLock { slot in
            if let slot { return try slot.get() }
            let result = Result { try NginxFixture.start() }
            slot = result
            return try result.get()
        }
    }

    /// Starts a private nginx (most tests want `shared()`); stop it with `stop()`.
    ///
    /// Picks three free ports (bind port 0, close), and retries with new ones when nginx
    /// cannot bind one because another process took it in between.
    ///
    /// - Throws: `NginxUnavailable` or `TestSupportError`.
    /// - Parameter serverCertificate: PEM files (chain: leaf first, and key) that
    ///   replace the generated server certificate on every TLS listener.
    public static func start(serverCertificate: (chain: String, key: String)? = nil) throws -> NginxFixture {
        guard isInstalled else { throw NginxUnavailable(reason: "\(nginxPath) not found") }
        installExitHandler()
        let directory = try TemporaryDirectory(prefix: "transfer-nginx")
        let tls = try Command.run("/bin/sh", [scriptsDirectory + "/gen-tls.sh", directory.path + "/tls"])
        guard tls.status == 0 else {
            throw TestSupportError("gen-tls.sh failed (\(tls.status)): \(tls.stderrText)")
        }
        if let serverCertificate {
            for (source, target) in [(serverCertificate.chain, "chain.pem"), (serverCertificate.key, "server.key")] {
                let path = directory.path + "/tls/" + target
                try? FileManager.default.removeItem(atPath: path)
                try FileManager.default.copyItem(atPath: source, toPath: path)
            }
        }
        var lastError = TestSupportError("nginx did not start")
        for _ in 0..<8 {
            let ports = try freePorts(3)
            do {
                return try launch(in: directory, ports: ports)
            } catch let error as PortTaken {
                lastError = TestSupportError("port taken, retrying: \(error.log)")
                continue
            }
        }
        throw lastError
    }

    private struct PortTaken: Error {
        var log: String
    }

    private init(
        directory: TemporaryDirectory, ports: [UInt16], masterPID: pid_t, wrapperPID: pid_t, watchdogFD: Int32
    ) {
        ownedDirectory = directory
        self.directory = directory.path
        httpPort = ports[0]
        httpsPort = ports[1]
        http2Port = ports[2]
        self.masterPID = masterPID
        self.wrapperPID = wrapperPID
        state = Locked(State(watchdogFD: watchdogFD))
    }

    private static func launch(in directory: TemporaryDirectory, ports: [UInt16]) throws -> NginxFixture {
        let script = scriptsDirectory + "/nginx-fixture.sh"
        let conf = try Command.run(
            "/bin/sh", [script, "conf", directory.path] + ports.map(String.init),
            environment: ["NGINX": nginxPath])
        guard conf.status == 0 else {
            throw TestSupportError("nginx-fixture.sh conf failed: \(conf.stderrText)")
        }
        let errorLog = directory.path + "/logs/error.log"
        _ = FileManager.default.createFile(atPath: errorLog, contents: nil)
        try? FileManager.default.removeItem(atPath: directory.path + "/master.pid")

        // The watchdog pipe: the wrapper reads its end as stdin and stops nginx at end of
        // file, which comes when we close the write end or when this process dies.
        let pipe = try Spawn.pipe()
        let fds = [pipe.read, pipe.write]
        let wrapper: pid_t
        do {
            let log = directory.path + "/logs/stdout.log"
            wrapper = try Spawn.start(
                "/bin/sh", [script, "run", directory.path],
                environment: ["NGINX": nginxPath, "FIXTURE_REMOVE_DIR": "1"], stdin: .descriptor(fds[0]),
                stdout: .appending(log), stderr: .appending(log))
        } catch {
            close(fds[0])
            close(fds[1])
            throw error
        }
        close(fds[0])
        let exited = { Spawn.reap(wrapper) != nil }

        // Ready when all three ports accept connections; failed when the wrapper exits.
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: .seconds(20))
        while true {
            if exited() {
                close(fds[1])
                let log = (try? String(contentsOfFile: errorLog, encoding: .utf8)) ?? ""
                if log.contains("Address already in use") { throw PortTaken(log: log) }
                throw TestSupportError("nginx exited during start-up: \(log)")
            }
            if ports.allSatisfy({ canConnect(port: $0) }) { break }
            if clock.now >= deadline {
                close(fds[1])
                if !Wait.poll(timeout: .seconds(5), { exited() }) {
                    kill(wrapper, SIGKILL)
                    _ = Spawn.reap(wrapper)
                }
                throw TestSupportError("nginx did not listen within 20 s")
            }
            Thread.sleep(forTimeInterval: 0.005)
        }
        let master =
            (try? String(contentsOfFile: directory.path + "/master.pid", encoding: .utf8))
            .flatMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) } ?? 0
        let fixture = NginxFixture(
            directory: directory, ports: ports, masterPID: master, wrapperPID: wrapper, watchdogFD: fds[1])
        liveFixtures.withLock { $0[ObjectIdentifier(fixture)] = fixture }
        return fixture
    }

    /// Stops nginx (SIGTERM, fast shutdown) and waits up to 10 s for the master and its
    /// wrapper to exit, then removes the directory. Idempotent, any thread.
    public func stop() {
        let (first, fd) = state.withLock { state -> (Bool, Int32) in
            if state.stopped { return (false, -1) }
            state.stopped = true
            defer { state.watchdogFD = -1 }
            return (true, state.watchdogFD)
        }
        guard first else { return }
        _ = NginxFixture.liveFixtures.withLock { $0.removeValue(forKey: ObjectIdentifier(self)) }
        if fd >= 0 {
            close(fd)  // the wrapper sends SIGTERM to the master
        }
        if masterPID > 0 {
            kill(masterPID, SIGTERM)
        }
        if !Wait.poll(timeout: .seconds(10), { !isRunning && Spawn.reap(wrapperPID) != nil }) {
            // A master that ignored SIGTERM for 10 s is killed, so that no test run leaves
            // an nginx behind; its directory goes either way.
            if masterPID > 0 { kill(masterPID, SIGKILL) }
            kill(wrapperPID, SIGKILL)
            if !Wait.poll(timeout: .seconds(5), { !isRunning && Spawn.reap(wrapperPID) != nil }) {
                FileHandle.standardError.write(Data("nginx fixture: pid \(masterPID) survived SIGKILL\n".utf8))
            }
        }
        ownedDirectory.remove()
    }

    /// Closes only the watchdog pipe, as the death of this process would, without signalling
    /// nginx; the wrapper must then stop it. For the test that proves the watchdog works.
    public func closeWatchdogOnly() {
        let fd = state.withLock { state -> Int32 in
            defer { state.watchdogFD = -1 }
            return state.watchdogFD
        }
        if fd >= 0 {
            close(fd)
        }
    }

    /// Whether the nginx master process still exists.
    public var isRunning: Bool {
        masterPID > 0 && NginxFixture.processExists(masterPID)
    }

    /// The PIDs of the processes whose parent is our master (its workers).
    public var workerPIDs: [pid_t] {
        guard masterPID > 0, let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else {
            return []
        }
        return entries.compactMap { entry -> pid_t? in
            guard let pid = pid_t(entry),
                let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { return nil }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 1 && pid_t(fields[1]) == masterPID ? pid : nil
        }
    }

    static func processExists(_ pid: pid_t) -> Bool {
        guard pid > 0 else { return false }
        // A zombie still "exists" for kill(0); read its state to tell it apart.
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        let rest = stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces)
        return !rest.hasPrefix("Z") && !rest.hasPrefix("X")
    }

    // MARK: URLs and content

    /// The port of `listener`.
    public func port(_ listener: Listener) -> UInt16 {
        switch listener {
        case .http: httpPort
        case .https: httpsPort
        case .http2: http2Port
        }
    }

    /// The URL of `path` (starting with `/`, query allowed) on `listener`.
    ///
    /// - Parameter host: Defaults to `localhost` for TLS listeners (a SAN of the leaf, so
    ///   hostname checks pass; the leaf also names `127.0.0.1` and `::1`) and `127.0.0.1` for
    ///   plain HTTP. nginx listens on 127.0.0.1 only; a client that tries `::1` first for
    ///   `localhost` is refused at once and falls back.
    public func url(_ listener: Listener, _ path: String, host: String? = nil) -> URL {
        let base: String
        switch listener {
        case .http: base = "http://\(host ?? "127.0.0.1"):\(httpPort)"
        case .https: base = "https://\(host ?? "localhost"):\(httpsPort)"
        case .http2: base = "https://\(host ?? "localhost"):\(http2Port)"
        }
        return URL(string: base + path) ?? URL(string: base + "/")!
    }

    /// nginx's connection counters (`stub_status`), e.g. to check that a client reused its
    /// connections: `accepts` grows by one per new TCP connection.
    public struct Status: Sendable, Equatable {
        public var active: Int
        public var accepts: Int
        public var handled: Int
        public var requests: Int
    }

    /// Reads `/nginx_status` over plain HTTP on a connection of its own (which counts in
    /// `accepts` and `requests`).
    ///
    /// - Throws: `TestSupportError` when nginx does not answer or the page is unexpected.
    public func status() throws -> Status {
        let text = try NginxFixture.get(port: httpPort, path: "/nginx_status")
        // "Active connections: 1 \nserver accepts handled requests\n 5 5 9 \nReading: ..."
        let numbers = text.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
        guard text.contains("Active connections"), numbers.count >= 4 else {
            throw TestSupportError("unexpected stub_status page: \(text)")
        }
        return Status(active: numbers[0], accepts: numbers[1], handled: numbers[2], requests: numbers[3])
    }

    /// A minimal HTTP/1.0 GET on 127.0.0.1; returns the body.
    static func get(port: UInt16, path: String) throws -> String {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestSupportError.posix("socket") }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { throw TestSupportError.posix("connect 127.0.0.1:\(port)") }
        let request = Array("GET \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }) == request.count
        else { throw TestSupportError.posix("send") }
        var response = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while response.count < 1 << 20 {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            response += buffer[0..<n]
        }
        let text = String(decoding: response, as: UTF8.self)
        guard let split = text.range(of: "\r\n\r\n") else {
            throw TestSupportError("no HTTP response from 127.0.0.1:\(port)\(path)")
        }
        return String(text[split.upperBound...])
    }

    /// The upload sink: reads and discards any body, answers 200 JSON.
    public func uploadURL(_ listener: Listener) -> URL {
        url(listener, "/upload")
    }

    /// The rate-limited copy of a content path, e.g. `slowURL(.http, "/files/x.bin", rate: 65536)`.
    public func slowURL(_ listener: Listener, _ path: String, bytesPerSecond: Int) -> URL {
        url(listener, "/slow\(path)?rate=\(bytesPerSecond)")
    }

    /// Makes sure `/files/<size>-<seed>.bin` exists with the bytes of
    /// `DeterministicBytes` (the same as `TestServer`'s `/bytes/<size>?seed=<seed>`).
    ///
    /// Files are written once per fixture (about 0.4 s for 64 MiB, digest included) and reused.
    ///
    /// - Returns: The URL path (give it to `url(_:_:)`) and the hex SHA-256 of the content.
    /// - Throws: `TestSupportError` when the file cannot be written.
    public func ensureFile(size: Int, seed: UInt64 = 0) throws -> (path: String, sha256: String) {
        let path = "/files/\(size)-\(seed).bin"
        // Held while writing: two tests asking for the same file wait for one copy.
        return try state.withLock { state in
            if let digest = state.files[path] { return (path, digest) }
            let file = contentRoot + path
            try FileManager.default.createDirectory(
                atPath: contentRoot + "/files", withIntermediateDirectories: true)
            let partial = file + ".partial"
            let digest = try DeterministicBytes.write(seed: seed, count: size, to: partial)
            guard rename(partial, file) == 0 else { throw TestSupportError.posix("rename \(partial)") }
            state.files[path] = digest
            return (path, digest)
        }
    }

    // MARK: Helpers

    private static let sharedInstance = Locked<Result<NginxFixture, any Error>?>(nil)
    private static let liveFixtures = Locked<[ObjectIdentifier: NginxFixture]>([:])
    private static let exitHandlerInstalled = Locked(false)

    private static func installExitHandler() {
        let install = exitHandlerInstalled.withLock { installed -> Bool in
            defer { installed = true }
            return !installed
        }
        if install {
            atexit {
                NginxFixture.stopAll()
            }
        }
    }

    /// Stops every fixture still running (the exit handler).
    public static func stopAll() {
        let fixtures = liveFixtures.withLock { Array($0.values) }
        for fixture in fixtures {
            fixture.stop()
        }
    }

    /// `count` distinct free loopback ports: bound together to port 0, then released.
    static func freePorts(_ count: Int) throws -> [UInt16] {
        var sockets: [Int32] = []
        defer { sockets.forEach { close($0) } }
        var ports: [UInt16] = []
        for _ in 0..<count {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw TestSupportError.posix("socket") }
            sockets.append(fd)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard bound == 0, let port = ServerCore.localPort(of: fd) else {
                throw TestSupportError.posix("bind 127.0.0.1:0")
            }
            ports.append(port)
        }
        return ports
    }

    /// Whether a TCP connection to 127.0.0.1:`port` succeeds right now.
    public static func canConnect(port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        return result == 0
    }
}
