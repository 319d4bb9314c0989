import FoundationEssentials
import Glibc

/// Which proxy a session's connections go through (``SessionConfiguration/proxy``).
public enum ProxySetting: Sendable, Hashable {
    /// The environment decides, as curl does: `http_proxy` for http URLs, `https_proxy`
    /// for https URLs, `all_proxy` for both when the specific one is unset, and `no_proxy`
    /// (comma-separated hosts or domains, `*` for all) for the hosts that go straight.
    /// The upper-case spellings work too, except `HTTP_PROXY` (as in curl, a CGI
    /// program could otherwise be steered by a request's `Proxy:` header).
    /// When none of the proxy variables is set as the session is made, its
    /// requests go direct and the variables are not read again; otherwise
    /// they are read for every request, as curl does.
    case environment
    /// No proxy at all; the environment variables are ignored.
    case none
    /// Every connection goes through this proxy, except to hosts of its bypass list.
    case through(ProxyConfiguration)
}

/// One proxy: its kind, address, credentials, bypass list and, for an HTTPS proxy, the
/// anchors that its certificate must chain to.
///
/// Trust: an HTTPS proxy's certificate is checked by OpenSSL against ``caFile`` (or the
/// system anchors) and the proxy's host name; the session's ``SecurityPolicy`` (pins,
/// challenge hook) judges the origin server only, through the tunnel, as without a proxy.
public struct ProxyConfiguration: Sendable, Hashable {
    /// The protocol spoken to the proxy.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// Plain HTTP to the proxy: `CONNECT` tunnels for https URLs, absolute-form
        /// requests for http URLs.
        case http
        /// TLS to the proxy, then as ``http``.
        case https
        /// SOCKS5; the client resolves the origin's name and sends an address.
        case socks5
        /// SOCKS5 with the name sent to the proxy, which resolves it.
        case socks5h
    }

    /// User name and password for the proxy: `Proxy-Authorization: Basic` for HTTP(S)
    /// proxies, RFC 1929 for SOCKS5. They are sent to the proxy only, never to an origin.
    public struct Credentials: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
        /// The user name sent to the proxy.
        public var user: String
        /// The password sent to the proxy.
        public var password: String

        /// A user and password for the proxy.
        public init(user: String, password: String) {
            self.user = user
            self.password = password
        }

        /// The user and a redacted password: configurations get logged.
        public var description: String { "\(user):<redacted>" }
        public var debugDescription: String { description }
    }

    /// The protocol spoken to the proxy.
    public var kind: Kind
    /// A host name, an IPv4 address or an IPv6 address (with or without brackets).
    public var host: String
    /// 1...65535.
    public var port: Int
    /// Credentials for the proxy, or nil for none.
    public var credentials: Credentials?
    /// Hosts that bypass the proxy, with curl's `--noproxy` meaning: an entry matches the
    /// host itself and its subdomains (`example.com` matches `a.example.com`), an IP
    /// address matches exactly, and `*` alone matches every host.
    public var bypass: [String]
    /// PEM trust anchors for an HTTPS proxy's certificate (nil: the system anchors).
    public var caFile: String?

    /// A proxy of `kind` at `host`:`port`.
    public init(_ kind: Kind, host: String, port: Int, credentials: Credentials? = nil,
                bypass: [String] = [], caFile: String? = nil)
    {
        self.kind = kind
        self.host = host
        self.port = port
        self.credentials = credentials
        self.bypass = bypass
        self.caFile = caFile
    }

    /// Reads a proxy URL as curl's `-x` does: `[SCHEME://]HOST[:PORT]`, SCHEME one of
    /// http (the default), https, socks5 and socks5h; the port defaults to 1080 for
    /// SOCKS and 80 otherwise (443 for https). `user:password@` credentials are taken
    /// (percent-decoded).
    ///
    /// - Throws: ``TransferError/Code/invalidRequest`` for another scheme, a path, or a
    ///   host or port that ``validate()`` refuses.
    public init(url input: String) throws(TransferError) {
        // Error messages quote the URL without its password (they reach
        // logs and the command's stderr).
        let text = Self.redactingPassword(in: input)
        var rest = Substring(input)
        var kind = Kind.http
        if let range = rest.firstRange(of: "://") {
            let scheme = rest[..<range.lowerBound].lowercased()
            guard let known = Kind(rawValue: scheme) else {
                throw TransferError(.invalidRequest, "unsupported proxy scheme \"\(scheme)\" (http, https, socks5, socks5h)")
            }
            kind = known
            rest = rest[range.upperBound...]
        }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.contains("/"), !rest.contains("?"), !rest.contains("#") else {
            throw TransferError(.invalidRequest, "a proxy URL has no path: \(text.debugDescription)")
        }
        var credentials: Credentials?
        if let at = rest.lastIndex(of: "@") {
            let userInfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let parts = userInfo.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            let user = String(parts[0]).percentDecoded ?? String(parts[0])
            let password = parts.count > 1 ? (String(parts[1]).percentDecoded ?? String(parts[1])) : ""
            credentials = Credentials(user: user, password: password)
        }
        var host = String(rest)
        var port: Int?
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else {
                throw TransferError(.invalidRequest, "unbalanced [ in proxy \(text.debugDescription)")
            }
            let after = host[host.index(after: close)...]
            if after.hasPrefix(":") {
                guard let number = Int(after.dropFirst()) else {
                    throw TransferError(.invalidRequest, "bad proxy port in \(text.debugDescription)")
                }
                port = number
            } else if !after.isEmpty {
                throw TransferError(.invalidRequest, "bad proxy address \(text.debugDescription)")
            }
            host = String(host[host.index(after: host.startIndex)..<close])
        } else if let colon = host.lastIndex(of: ":") {
            guard let number = Int(host[host.index(after: colon)...]) else {
                throw TransferError(.invalidRequest, "bad proxy port in \(text.debugDescription)")
            }
            port = number
            host = String(host[..<colon])
        }
        let defaultPort: Int
        switch kind {
        case .http: defaultPort = 80
        case .https: defaultPort = 443
        case .socks5, .socks5h: defaultPort = 1080
        }
        self.init(kind, host: host, port: port ?? defaultPort, credentials: credentials)
        try validate()
    }

    /// `text`, a proxy URL, with its user info shown as `user:<redacted>@`
    /// (`<redacted>@` when there is no colon: a lone name may be a token).
    static func redactingPassword(in text: String) -> String {
        let start = text.firstRange(of: "://")?.upperBound ?? text.startIndex
        guard let at = text[start...].lastIndex(of: "@") else { return text }
        let userInfo = text[start..<at]
        let shown = userInfo.firstIndex(of: ":").map { userInfo[..<$0] + ":<redacted>" } ?? "<redacted>"
        return text[..<start] + shown + text[at...]
    }

    /// Checks the host, the port, the bypass list and the credentials.
    ///
    /// - Throws: ``TransferError/Code/invalidRequest`` naming what is wrong.
    public func validate() throws(TransferError) {
        let bare = Self.bareHost(host)
        guard !bare.isEmpty else { throw TransferError(.invalidRequest, "the proxy host is empty") }
        let forbidden = { (scalar: Unicode.Scalar) in
            scalar.isBlankOrNewline || scalar.isControlOrFormat || "/?#@[]\\,%\"".unicodeScalars.contains(scalar)
        }
        let isIPv6 = bare.contains(":")
        if isIPv6 {
            guard bare.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else {
                throw TransferError(.invalidRequest, "bad proxy IPv6 address \(host.debugDescription)")
            }
        } else if bare.unicodeScalars.contains(where: forbidden) {
            throw TransferError(.invalidRequest, "bad proxy host \(host.debugDescription)")
        }
        guard (1...65535).contains(port) else {
            throw TransferError(.invalidRequest, "the proxy port \(port) is not in 1...65535")
        }
        for entry in bypass {
            let trimmed = entry.trimmingBlanks()
            guard !trimmed.isEmpty else {
                throw TransferError(.invalidRequest, "an empty entry in the proxy bypass list")
            }
            guard !trimmed.unicodeScalars.contains(where: {
                $0.isBlankOrNewline || $0.isControlOrFormat || $0 == ","
            }) else {
                throw TransferError(.invalidRequest, "bad proxy bypass entry \(entry.debugDescription)")
            }
        }
        if let credentials {
            guard !credentials.user.unicodeScalars.contains(where: \.isControlOrFormat),
                !credentials.password.unicodeScalars.contains(where: \.isControlOrFormat)
            else {
                throw TransferError(.invalidRequest, "proxy credentials with a control character")
            }
        }
        if let caFile, caFile.isEmpty || caFile.contains("\n") || caFile.contains("\r") {
            throw TransferError(.invalidRequest, "bad proxy CA file path \(caFile.debugDescription)")
        }
    }

    /// `SCHEME://HOST:PORT` for libcurl (IPv6 in brackets; no credentials).
    var curlURL: String {
        let bare = Self.bareHost(host)
        let hostPart = bare.contains(":") ? "[\(bare)]" : bare
        return "\(kind.rawValue)://\(hostPart):\(port)"
    }

    private static func bareHost(_ host: String) -> String {
        host.hasPrefix("[") && host.hasSuffix("]") && host.count >= 2 ? String(host.dropFirst().dropLast()) : host
    }
}
