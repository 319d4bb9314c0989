/// The versions of Transfer and of the libraries under it, for `--version`
/// lines, bug reports and User-Agent strings.
public enum TransferVersion {
    /// This package's version (``HTTPRequestSerializer/libraryVersion``).
    public static var library: String { HTTPRequestSerializer.libraryVersion }

    /// libcurl's version line as `curl --version` shows it: libcurl, then the
    /// TLS library (OpenSSL), compression, nghttp2 and the others it was built
    /// with, e.g. `libcurl/7.88.1 OpenSSL/3.0.19 zlib/1.2.13 nghttp2/1.52.0`.
    public static var libcurl: String { EngineVersion.curlVersion }

    /// libcurl's features as `curl --version` names them (`HTTP2`, `IPv6`,
    /// `UnixSockets`, ...), in curl's order.
    public static var features: [String] {
        EngineVersion.curlFeatures.split(separator: " ").map(String.init)
    }
}
