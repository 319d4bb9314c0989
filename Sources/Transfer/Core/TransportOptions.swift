/// curl's connection options a session applies to every transfer it makes
/// (``SessionConfiguration/transport``): address family, a Unix domain
/// socket, TLS versions, the URL path as given, and netrc credentials.
///
/// Each is part of what makes a connection reusable: a transfer never reuses
/// a connection made under other values.
public struct TransportOptions: Sendable, Hashable {
    /// Which addresses a host name may resolve to (curl's `-4` / `-6`).
    public enum IPVersion: Sendable, Hashable {
        /// IPv4 and IPv6 (the default).
        case any
        /// IPv4 only: a name with only IPv6 addresses fails to connect.
        case v4
        /// IPv6 only: a name with only IPv4 addresses fails to connect.
        case v6
    }

    /// A TLS protocol version (curl's `--tlsv1.2`, `--tlsv1.3`, `--tls-max`).
    public enum TLSVersion: Int, Sendable, Hashable, Comparable {
        /// TLS 1.2.
        case tls1_2 = 12
        /// TLS 1.3.
        case tls1_3 = 13

        /// Orders versions from older to newer.
        public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// Whether credentials come from a netrc file (curl's `-n`, `--netrc-optional`).
    public enum Netrc: Sendable, Hashable {
        /// No netrc file is read (the default).
        case ignored
        /// The file's entry for the host is used when the URL has no credentials.
        case optional
        /// The file's entry for the host is used; credentials in the URL are ignored.
        case required
    }

    /// The address family of connections (default ``IPVersion/any``).
    public var ipVersion: IPVersion = .any
    /// Connect to this Unix domain socket instead of the URL's host and port
    /// (the URL still names the `Host` header and the path); nil: TCP.
    public var unixSocketPath: String?
    /// The oldest TLS version a handshake may settle on; nil: libcurl's default.
    public var minimumTLSVersion: TLSVersion?
    /// The newest TLS version a handshake may settle on; nil: the newest OpenSSL has.
    /// A server outside the range fails the task with ``TransferError/Code/tlsFailure``.
    public var maximumTLSVersion: TLSVersion?
    /// curl's `--connect-to` entries, `HOST:PORT:CONNECT-HOST:CONNECT-PORT`:
    /// a request for HOST:PORT connects to CONNECT-HOST:CONNECT-PORT instead
    /// (an empty HOST or PORT matches any; an empty CONNECT field keeps the
    /// original), while TLS and the `Host` header still name HOST.
    public var connectTo: [String] = []
    /// OpenSSL's cipher list for TLS 1.2 and below (curl's `--ciphers`,
    /// e.g. `ECDHE-RSA-AES128-GCM-SHA256`); nil: OpenSSL's default. A list
    /// with no cipher the server accepts fails with ``TransferError/Code/tlsFailure``.
    public var cipherList: String?
    /// The TLS 1.3 cipher suites (curl's `--tls13-ciphers`, e.g.
    /// `TLS_AES_128_GCM_SHA256`); nil: OpenSSL's default.
    public var tls13CipherSuites: String?
    /// Send the URL's path as given: `/../` and `/./` segments are not
    /// removed before the request is sent (default false: they are, as curl does).
    public var keepsPathAsIs = false
    /// Whether a netrc file supplies credentials (default ``Netrc/ignored``).
    public var netrc: Netrc = .ignored
    /// The netrc file; nil: `~/.netrc`.
    public var netrcFile: String?

    /// The defaults: any address family, TCP, libcurl's TLS versions, the
    /// path normalised, no netrc.
    public init() {}
}
