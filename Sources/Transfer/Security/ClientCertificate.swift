import FoundationEssentials
import Glibc

/// A client certificate for mutual TLS: a PEM certificate file and its PEM private key file.
///
/// The files are checked when the value is made (readable, a certificate, a key); the engine
/// reads them again for each connection.
public struct ClientCertificate: Sendable, Hashable {
    /// The PEM certificate file.
    public let certificateFile: URL
    /// The PEM private key file.
    public let keyFile: URL
    /// The client certificate (the first one in the file).
    public let certificate: Certificate

    /// - Throws: `TransferError.fileError` when a file is unreadable, `.invalidRequest` when the
    ///   certificate file holds no certificate or the key file no PEM private key.
    public init(certificateFile: URL, keyFile: URL) throws(TransferError) {
        for url in [certificateFile, keyFile] where !FileManager.default.isReadableFile(atPath: url.path) {
            throw TransferError(.fileError, "cannot read \(url.path)", url: url)
        }
        guard let first = try Certificate.certificates(contentsOf: certificateFile).first else {
            throw TransferError(.invalidRequest, "no certificate in \(certificateFile.path)", url: certificateFile)
        }
        let key: Data
        do {
            key = try Data(contentsOf: keyFile)
        } catch {
            throw TransferError(.fileError, "cannot read \(keyFile.path): \(error)", url: keyFile)
        }
        guard String(decoding: key, as: UTF8.self).contains("PRIVATE KEY-----") else {
            throw TransferError(.invalidRequest, "no PEM private key in \(keyFile.path)", url: keyFile)
        }
        self.certificateFile = certificateFile
        self.keyFile = keyFile
        self.certificate = first
    }
}
