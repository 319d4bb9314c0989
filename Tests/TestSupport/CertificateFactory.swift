import Foundation
import Synchronization

/// One certificate made by ``CertificateFactory``: its files and its DER bytes.
public struct TestCertificate: Sendable, Hashable {
    public let name: String
    /// PEM certificate.
    public let certificateFile: URL
    /// PEM private key (EC P-256).
    public let keyFile: URL
    /// The certificate in DER.
    public let der: Data

    /// A certificate made outside the factory (e.g. by a test with ``CertificateFactory/openssl(_:in:environment:)``).
    public init(name: String, certificateFile: URL, keyFile: URL, der: Data) {
        self.name = name
        self.certificateFile = certificateFile
        self.keyFile = keyFile
        self.der = der
    }
}

/// Failure to run the `openssl` command line while building test certificates.
public struct CertificateFactoryError: Error, CustomStringConvertible {
    public let description: String
}

/// Builds a throwaway PKI with the `openssl` command line in a temporary directory, once per
/// test process (key generation is the slow part).
///
/// Layout (EC P-256, SHA-256):
/// - `root` (CA, 2024-01-01 … 2036-01-01) → `intermediate` (CA, pathlen 0) → leaves:
///   - `leaf`: `localhost`, `127.0.0.1`, `::1`, `*.pin.test`, valid 2024-01-01 … 2035-01-01;
///   - `rotatedLeaf`: the same names and issuer, a new key;
///   - `expiredLeaf`: valid 2020-01-01 … 2021-01-01;
///   - `notYetValidLeaf`: valid 2040-01-01 … 2041-01-01;
///   - `wrongHostLeaf`: names only `wrong.example`;
/// - `selfSigned`: a self-signed leaf for `localhost` (no CA);
/// - `otherRoot` → `otherLeaf` (`localhost`): a second, unrelated CA.
///
/// Chains for a server: ``serverChainFile(for:)`` (leaf + intermediate) or the leaf alone
/// (an incomplete chain).
///
/// Evaluate with ``evaluationDate`` (2026-06-01) so the results do not depend on the clock; the
/// validity windows above also make the same results hold "now" until 2035.
///
/// The nginx matrix (issue 5) reuses this set: for each server certificate, one nginx `server`
/// block on its own free port with
/// `ssl_certificate <serverChainFile(for: cert)>` (or `cert.certificateFile` for an incomplete
/// chain), `ssl_certificate_key <cert.keyFile>`, `listen 127.0.0.1:<port> ssl http2;`, plus one
/// block whose `location /redir { return 302 https://127.0.0.1:<bad port>/; }` sends a trusted
/// host to an untrusted one. Then run every case of `SecurityPolicyEvaluationTests` through a
/// session (mode × allowInvalid × validatesDomainName × HTTP/1.1 and HTTP/2) with the session's
/// CA file set to `root.certificateFile`, and expect `.tlsFailure` for chain/hostname refusals and
/// `.serverTrustRejected` for pin refusals, with `tlsReason` as `evaluate` predicts.
/// `OpenSSLServer` (below) is the dependency-free peer for the same checks over HTTP/1.1.
public final class CertificateFactory: Sendable {
    public static let evaluationDate = Date(timeIntervalSince1970: 1_780_272_000)  // 2026-06-01T00:00:00Z

    public let directory: URL
    public let root: TestCertificate
    public let intermediate: TestCertificate
    public let leaf: TestCertificate
    public let rotatedLeaf: TestCertificate
    public let expiredLeaf: TestCertificate
    public let notYetValidLeaf: TestCertificate
    public let wrongHostLeaf: TestCertificate
    public let selfSigned: TestCertificate
    public let otherRoot: TestCertificate
    public let otherLeaf: TestCertificate

    private static let cache = Locked<Result<CertificateFactory, CertificateFactoryError>?>(nil)

    /// The process-wide set, generated on first use (about a second). Thread-safe.
    public static func shared() throws -> CertificateFactory {
        try cache.withLock { cached in
            if let cached { return try cached.get() }
            let result: Result<CertificateFactory, CertificateFactoryError>
            do {
                result = .success(try CertificateFactory())
            } catch let error as CertificateFactoryError {
                result = .failure(error)
            } catch {
                result = .failure(CertificateFactoryError(description: "\(error)"))
            }
            cached = result
            return try result.get()
        }
    }

    /// Generates a fresh set in a new temporary directory.
    public init() throws {
        let dir = FileManager.default.temporaryDirectory
            .appendingPathComponent("transfer-pki-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        directory = dir
        let ca = try CA(directory: dir)

        let fullNames = "DNS:localhost,IP:127.0.0.1,IP:::1,DNS:*.pin.test"
        root = try ca.make("root", subject: "/CN=Transfer Test Root/O=Transfer", issuer: nil,
                           extensions: "v3_root", from: "20240101000000Z", to: "20360101000000Z")
        intermediate = try ca.make("intermediate", subject: "/CN=Transfer Test Intermediate/O=Transfer",
                                   issuer: root, extensions: "v3_inter",
                                   from: "20240101000000Z", to: "20360101000000Z")
        leaf = try ca.make("leaf", subject: "/CN=localhost/O=Transfer", issuer: intermediate,
                           extensions: "v3_leaf", san: fullNames, from: "20240101000000Z", to: "20350101000000Z")
        rotatedLeaf = try ca.make("rotated", subject: "/CN=localhost/O=Transfer", issuer: intermediate,
                                  extensions: "v3_leaf", san: fullNames,
                                  from: "20240101000000Z", to: "20350101000000Z")
        expiredLeaf = try ca.make("expired", subject: "/CN=localhost/O=Transfer Expired", issuer: intermediate,
                                  extensions: "v3_leaf", san: fullNames,
                                  from: "20200101000000Z", to: "20210101000000Z")
        notYetValidLeaf = try ca.make("future", subject: "/CN=localhost/O=Transfer Future",
                                      issuer: intermediate, extensions: "v3_leaf", san: fullNames,
                                      from: "20400101000000Z", to: "20410101000000Z")
        wrongHostLeaf = try ca.make("wronghost", subject: "/CN=wrong.example/O=Transfer", issuer: intermediate,
                                    extensions: "v3_leaf", san: "DNS:wrong.example",
                                    from: "20240101000000Z", to: "20350101000000Z")
        selfSigned = try ca.make("selfsigned", subject: "/CN=localhost/O=Transfer Self", issuer: nil,
                                 extensions: "v3_leaf", san: fullNames,
                                 from: "20240101000000Z", to: "20350101000000Z")
        otherRoot = try ca.make("otherroot", subject: "/CN=Other Test Root/O=Elsewhere", issuer: nil,
                                extensions: "v3_root", from: "20240101000000Z", to: "20360101000000Z")
        otherLeaf = try ca.make("otherleaf", subject: "/CN=localhost/O=Elsewhere", issuer: otherRoot,
                                extensions: "v3_leaf", san: fullNames,
                                from: "20240101000000Z", to: "20350101000000Z")
    }

    /// A PEM file with `leaf` followed by the intermediate (what a server sends).
    public func serverChainFile(for leaf: TestCertificate) throws -> URL {
        let url = directory.appendingPathComponent("\(leaf.name)-chain.pem")
        if !FileManager.default.fileExists(atPath: url.path) {
            guard let first = readWholeFile(leaf.certificateFile.path),
                  let second = readWholeFile(intermediate.certificateFile.path) else {
                throw CertificateFactoryError(description: "cannot read \(leaf.name) or the intermediate")
            }
            let pem = first + second
            try pem.write(to: url, options: .atomic)
        }
        return url
    }

    /// Removes the directory (the shared set is left for the process to end with).
    public func remove() {
        try? FileManager.default.removeItem(at: directory)
    }

    /// Runs `openssl` with `arguments`; throws with its stderr when it fails.
    @discardableResult
    public static func openssl(_ arguments: [String], in directory: URL? = nil,
                               environment: [String: String] = [:]) throws -> String {
        let process = Process()
        process.executableURL = try opensslExecutable()
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = directory }
        var env = ProcessInfo.processInfo.environment
        env.merge(environment) { _, new in new }
        process.environment = env
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // Read both pipes to the end before waiting, so a full pipe cannot block the child.
        let errData = Locked(Data())
        let errDone = DispatchSemaphore(value: 0)
        let errHandle = err.fileHandleForReading
        DispatchQueue.global().async {
            let data = errHandle.readDataToEndOfFile()
            errData.withLock { $0 = data }
            errDone.signal()
        }
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        errDone.wait()  // returns when the child closes stderr, i.e. exits
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let text = errData.withLock { String(decoding: $0, as: UTF8.self) }
            throw CertificateFactoryError(
                description: "openssl \(arguments.joined(separator: " ")) failed (\(process.terminationStatus)): \(text)")
        }
        return String(decoding: outData, as: UTF8.self)
    }

    static func opensslExecutable() throws -> URL {
        for path in ["/usr/bin/openssl", "/usr/local/bin/openssl", "/opt/homebrew/bin/openssl"]
        where FileManager.default.isExecutableFile(atPath: path) {
            return URL(fileURLWithPath: path)
        }
        throw CertificateFactoryError(description: "the openssl command line is not installed")
    }
}

/// An `openssl ca` working directory: config, database, serial.
private struct CA {
    let directory: URL
    let config: URL

    init(directory: URL) throws {
        self.directory = directory
        config = directory.appendingPathComponent("ca.cnf")
        let text = """
            [ ca ]
            default_ca = test_ca
            [ test_ca ]
            dir = \(directory.path)
            database = $dir/index.txt
            new_certs_dir = $dir/issued
            serial = $dir/serial
            default_md = sha256
            policy = policy_any
            unique_subject = no
            copy_extensions = none
            email_in_dn = no
            [ policy_any ]
            commonName = supplied
            organizationName = optional
            [ req ]
            distinguished_name = req_dn
            prompt = no
            [ req_dn ]
            CN = unused
            [ v3_root ]
            basicConstraints = critical, CA:TRUE
            keyUsage = critical, keyCertSign, cRLSign
            subjectKeyIdentifier = hash
            [ v3_inter ]
            basicConstraints = critical, CA:TRUE, pathlen:0
            keyUsage = critical, keyCertSign, cRLSign
            subjectKeyIdentifier = hash
            authorityKeyIdentifier = keyid:always
            [ v3_leaf ]
            basicConstraints = critical, CA:FALSE
            keyUsage = critical, digitalSignature
            extendedKeyUsage = serverAuth, clientAuth
            subjectKeyIdentifier = hash
            subjectAltName = $ENV::TRANSFER_SAN

            """
        try text.write(to: config, atomically: true, encoding: .utf8)
        try Data().write(to: directory.appendingPathComponent("index.txt"))
        try "1000\n".write(to: directory.appendingPathComponent("serial"), atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("issued"),
                                                withIntermediateDirectories: true)
    }

    /// Key, CSR, then `openssl ca` with explicit dates; `issuer` nil self-signs.
    func make(_ name: String, subject: String, issuer: TestCertificate?, extensions: String,
              san: String = "DNS:unused.invalid", from start: String, to end: String) throws -> TestCertificate {
        let key = directory.appendingPathComponent("\(name).key")
        let csr = directory.appendingPathComponent("\(name).csr")
        let cert = directory.appendingPathComponent("\(name).pem")
        let der = directory.appendingPathComponent("\(name).der")
        let env = ["TRANSFER_SAN": san]
        try CertificateFactory.openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                                        "-out", key.path])
        try CertificateFactory.openssl(["req", "-new", "-config", config.path, "-key", key.path,
                                        "-subj", subject, "-out", csr.path], environment: env)
        var args = ["ca", "-batch", "-notext", "-config", config.path, "-extensions", extensions,
                    "-startdate", start, "-enddate", end, "-in", csr.path, "-out", cert.path]
        if let issuer {
            args += ["-cert", issuer.certificateFile.path, "-keyfile", issuer.keyFile.path]
        } else {
            args += ["-selfsign", "-keyfile", key.path]
        }
        try CertificateFactory.openssl(args, environment: env)
        try CertificateFactory.openssl(["x509", "-in", cert.path, "-outform", "DER", "-out", der.path])
        guard let bytes = readWholeFile(der.path) else {
            throw CertificateFactoryError(description: "cannot read \(der.path)")
        }
        return TestCertificate(name: name, certificateFile: cert, keyFile: key, der: bytes)
    }
}

/// `openssl s_server -www` on a free loopback port, serving a given chain: the TLS peer for
/// handshake tests. Stop it with ``stop()`` (it is also stopped on deinit).
public final class OpenSSLServer: Sendable {
    public let port: Int
    private let process: Process  // Process is thread-safe for terminate/isRunning
    private let outputFile: URL
    private let input: FileHandle  // s_server's stdin: in interactive mode, what it sends to the client

    /// Starts the server and waits (at most 10 s) until it accepts connections.
    /// - Parameters:
    ///   - certificateFile: PEM file whose first certificate is the leaf; the others are sent as the chain.
    ///   - keyFile: the leaf's private key.
    ///   - extraArguments: more `s_server` options (e.g. `["-tls1_2"]`).
    ///   - mode: `-www` (a status page for any request), `-HTTP` (serves `./path` from
    ///     `workingDirectory`, the file holding the whole HTTP response, headers included), or `""`
    ///     (interactive: one connection at a time, what the client sends appears in ``output``, and
    ///     ``send(_:)`` writes to the client, so a test decides when and what the server answers).
    ///   - workingDirectory: where `-HTTP` looks for files.
    public init(certificateFile: URL, keyFile: URL, extraArguments: [String] = [], mode: String = "-www",
                workingDirectory: URL? = nil) throws {
        let process = Process()
        process.executableURL = try CertificateFactory.opensslExecutable()
        let output = FileManager.default.temporaryDirectory
            .appendingPathComponent("s_server-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let handle = try FileHandle(forWritingTo: output)
        guard let certs = readWholeFile(certificateFile.path) else {
            throw CertificateFactoryError(description: "cannot read \(certificateFile.path)")
        }
        let chainOnly = output.deletingPathExtension().appendingPathExtension("chain.pem")
        // Everything after the first certificate goes to -cert_chain.
        let text = String(decoding: certs, as: UTF8.self)
        let marker = "-----END CERTIFICATE-----"
        var chainArgs: [String] = []
        if let end = text.range(of: marker) {
            let rest = text[end.upperBound...].trimmingCharacters(in: .whitespacesAndNewlines)
            if rest.contains("BEGIN CERTIFICATE") {
                try rest.write(to: chainOnly, atomically: true, encoding: .utf8)
                chainArgs = ["-cert_chain", chainOnly.path]
            }
        }
        if let workingDirectory { process.currentDirectoryURL = workingDirectory }
        process.arguments = ["s_server"] + (mode.isEmpty ? [] : [mode]) + ["-accept", "127.0.0.1:0",
                             "-cert", certificateFile.path, "-key", keyFile.path] + chainArgs + extraArguments
        process.standardOutput = handle
        process.standardError = handle
        let stdinPipe = Pipe()
        process.standardInput = stdinPipe  // s_server reads commands from stdin; keep it open
        input = stdinPipe.fileHandleForWriting
        try process.run()
        try? handle.close()
        self.process = process
        self.outputFile = output

        let deadline = Date().addingTimeInterval(10)
        var found: Int?
        while found == nil && Date() < deadline && process.isRunning {
            let log = String(decoding: readWholeFile(output.path) ?? Data(), as: UTF8.self)
            if let line = log.split(separator: "\n").first(where: { $0.hasPrefix("ACCEPT") }),
               let colon = line.lastIndex(of: ":"), let value = Int(line[line.index(after: colon)...]) {
                found = value
            } else {
                usleep(10_000)  // polling a log file for a real condition, bounded by the deadline
            }
        }
        guard let found else {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            let log = String(decoding: readWholeFile(output.path) ?? Data(), as: UTF8.self)
            throw CertificateFactoryError(description: "openssl s_server did not start: \(log)")
        }
        port = found
    }

    /// Everything s_server printed so far (in interactive mode: what clients sent, and
    /// `CONNECTION CLOSED` when a client went away).
    public var output: String {
        String(decoding: readWholeFile(outputFile.path) ?? Data(), as: UTF8.self)
    }

    /// Interactive mode: sends `text` to the connected client, as is.
    public func send(_ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { write(input.fileDescriptor, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            offset += n
        }
    }

    /// `https://<host>:<port>/`.
    public func url(host: String = "localhost") -> String {
        host.contains(":") ? "https://[\(host)]:\(port)/" : "https://\(host):\(port)/"
    }

    public func stop() {
        if process.isRunning {
            // SIGKILL, not terminate(): the child inherits the test runner's signal mask, in
            // which SIGTERM is blocked, so SIGTERM would never arrive.
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: outputFile)
    }

    deinit { stop() }
}

/// Reads a file with read(2). (Foundation's file readers report leaks under ASan on this
/// toolchain, which would fail `swift test --sanitize=address`.)
func readWholeFile(_ path: String) -> Data? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var result = Data()
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 {
            if errno == EINTR { continue }
            return nil
        }
        if n == 0 { return result }
        result.append(contentsOf: buffer[0..<n])
    }
}
