import Foundation

/// A throwaway PKI whose leaf hangs under a long line of intermediates.
public struct LongCertificateChain: Sendable {
    /// The self-signed root (the trust anchor to give the client).
    public let rootFile: URL
    /// What the server sends: the leaf, then every intermediate, nearest first.
    public let chainFile: URL
    /// The leaf's private key.
    public let keyFile: URL
}

extension CertificateFactory {
    /// Makes root → `intermediates` CAs → leaf (`127.0.0.1`, `localhost`), EC P-256, each
    /// with a key of its own, valid from now for ten years, with the `openssl` command line
    /// (one `openssl req -x509 -CA …` per certificate, OpenSSL 3.0 or later).
    ///
    /// - Parameter directory: Where the files go (an empty temporary directory).
    /// - Throws: `CertificateFactoryError` with openssl's stderr.
    public static func longChain(intermediates: Int, in directory: URL) throws -> LongCertificateChain {
        let config = directory.appendingPathComponent("chain.cnf")
        try """
            [ req ]
            distinguished_name = dn
            prompt = no
            [ dn ]
            CN = unused
            [ ca ]
            basicConstraints = critical, CA:TRUE
            keyUsage = critical, keyCertSign, cRLSign
            subjectKeyIdentifier = hash
            authorityKeyIdentifier = keyid
            [ leaf ]
            basicConstraints = critical, CA:FALSE
            keyUsage = critical, digitalSignature
            extendedKeyUsage = serverAuth
            subjectAltName = IP:127.0.0.1, DNS:localhost
            subjectKeyIdentifier = hash
            authorityKeyIdentifier = keyid

            """.write(to: config, atomically: true, encoding: .utf8)
        func make(_ name: String, subject: String, extensions: String, issuer: String?) throws {
            var arguments = [
                "req", "-x509", "-config", config.path, "-extensions", extensions,
                "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", "\(name).key", "-out", "\(name).pem", "-subj", subject, "-days", "3650",
            ]
            if let issuer { arguments += ["-CA", "\(issuer).pem", "-CAkey", "\(issuer).key"] }
            try openssl(arguments, in: directory)
        }
        try make("ca0", subject: "/CN=Long Chain Root", extensions: "ca", issuer: nil)
        for index in stride(from: 1, through: intermediates, by: 1) {
            try make("ca\(index)", subject: "/CN=Long Chain Intermediate \(index)", extensions: "ca",
                     issuer: "ca\(index - 1)")
        }
        try make("leaf", subject: "/CN=localhost", extensions: "leaf", issuer: "ca\(intermediates)")
        var pem = Data()
        for name in ["leaf"] + stride(from: intermediates, to: 0, by: -1).map({ "ca\($0)" }) {
            guard let part = readWholeFile(directory.appendingPathComponent("\(name).pem").path) else {
                throw CertificateFactoryError(description: "cannot read \(name).pem")
            }
            pem.append(part)
        }
        let chain = directory.appendingPathComponent("chain.pem")
        try pem.write(to: chain)
        return LongCertificateChain(rootFile: directory.appendingPathComponent("ca0.pem"), chainFile: chain,
                                    keyFile: directory.appendingPathComponent("leaf.key"))
    }
}
