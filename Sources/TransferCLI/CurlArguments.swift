import Transfer

/// What a curl command line means that ArgumentParser alone cannot say,
/// decided before it parses (docs/CLI.md, "curl's options"):
/// - no verb: `transfer URL…` is `transfer get URL…` (a body option then
///   makes it a POST in ``RunPlan``, as curl does);
/// - `--version` / `-V` anywhere: the version lines, exit 0;
/// - `-#` is `--progress-bar`, `-C -` is `--resume`, `--socks5 HOST:PORT`
///   is `-x socks5://HOST:PORT`, and `--parallel` without a number is
///   curl's flag (`-Z`), not our `--parallel N`;
/// - a curl option we do not support is refused by name, with our
///   equivalent where there is one (never ArgumentParser's "Unknown option").
enum CurlArguments {
    enum Outcome: Equatable {
        case arguments([String])
        case version
        /// A usage error: the message names the option.
        case refused(String)
    }

    /// The verbs, and ArgumentParser's own root words: a command line that
    /// starts with one of them is left as it is.
    static let rootWords: Set<String> = [
        "get", "head", "post", "put", "patch", "delete", "help", "-h", "--help",
        "--experimental-dump-help", "--generate-completion-script",
    ]

    /// Our short options that take a value, and those that do not (Options,
    /// CurlOptions; `C` is `-C -`). curl lets a value stick to its short
    /// option (`-XPOST`, `-d@file`, `-sSLofile`); ArgumentParser does not.
    static let valueShorts: Set<Character> = ["o", "H", "X", "d", "F", "T", "u", "m", "Y", "y", "b", "c", "x", "U",
                                              "E", "A", "e", "r", "z", "D", "w", "C"]
    static let flagShorts: Set<Character> = ["O", "k", "i", "v", "s", "G", "n", "I", "N", "S", "f", "R", "J", "L",
                                             "Z", "g", "q", "4", "6", "V", "h"]

    /// `-XPOST` → `-X`, `POST`; `-sSLofile` → `-sSLo`, `file`; nil when
    /// `token` is not flags then one value option with its value attached.
    static func splitAttached(_ token: String) -> [String]? {
        guard token.hasPrefix("-"), !token.hasPrefix("--"), token.count > 2 else { return nil }
        var index = token.index(after: token.startIndex)
        while index < token.endIndex {
            let character = token[index]
            let next = token.index(after: index)
            if valueShorts.contains(character) {
                guard next < token.endIndex else { return nil }   // a bundle ArgumentParser reads itself
                return [String(token[..<next]), String(token[next...])]
            }
            guard flagShorts.contains(character) else { return nil }
            index = next
        }
        return nil
    }

    static func rewrite(_ given: [String]) -> Outcome {
        var arguments = given
        var out: [String] = []
        var index = 0
        var afterDashes = false
        while index < arguments.count {
            let token = arguments[index]
            index += 1
            // A negative number is a value (`--retry -1` reaches its own check).
            if afterDashes || !token.hasPrefix("-") || token == "-" || Double(token) != nil {
                out.append(token)
                continue
            }
            if token == "--" {
                afterDashes = true
                out.append(token)
                continue
            }
            if token == "--version" || token == "-V" { return .version }
            let name = token.split(separator: "=", maxSplits: 1).first.map(String.init) ?? token
            if let reason = unsupported[name] { return .refused("\(name): \(reason)") }
            if let parts = splitAttached(token) {
                arguments.replaceSubrange((index - 1)..<index, with: parts)
                index -= 1
                continue
            }
            switch token {
            case "-#":
                out.append("--progress-bar")
            case "-C", "--continue-at":
                // Only curl's "work it out" form fits our resume (the file
                // and its journal say where to continue).
                guard index < arguments.count, arguments[index] == "-" else {
                    let value = index < arguments.count ? " " + arguments[index] : ""
                    return .refused("\(token)\(value): only \(token) - is supported (it means --resume)")
                }
                index += 1
                out.append("--resume")
            case "--socks5", "--socks5-hostname":
                // curl's older spelling of -x socks5://HOST:PORT (socks5h: names resolved by the proxy).
                guard index < arguments.count else { return .refused("\(token): needs HOST[:PORT]") }
                out += ["-x", (token == "--socks5" ? "socks5://" : "socks5h://") + arguments[index]]
                index += 1
            case "--parallel":
                // curl's --parallel is a flag; ours takes N. A number next: ours.
                if index < arguments.count, Int(arguments[index]) != nil {
                    out.append(token)
                    out.append(arguments[index])
                    index += 1
                } else {
                    out.append("-Z")
                }
            default:
                out.append(token)
            }
        }
        if let first = out.first, !rootWords.contains(first) { out.insert("get", at: 0) }
        return .arguments(out)
    }

    /// The `--version` text: ours, then libcurl's line (OpenSSL, nghttp2 and
    /// the other libraries it was built with), protocols and features.
    static var versionText: String {
        """
        transfer \(TransferVersion.library) \(TransferVersion.libcurl)
        Protocols: http https
        Features: \(TransferVersion.features.joined(separator: " "))

        """
    }

    /// The message for an option ArgumentParser does not know (one that is
    /// neither ours nor in ``unsupported``).
    static func unknownOption(_ name: String) -> String {
        "\(name): not an option of transfer (see transfer --help; curl's options that fit are accepted)"
    }

    /// curl options the command refuses, and why: our equivalent, or the reason.
    static let unsupported: [String: String] = {
        var table: [String: String] = [:]
        func add(_ names: [String], _ reason: String) { for name in names { table[name] = reason } }
        let noHTTP3 = TransferVersion.features.contains("HTTP3") ? "not supported by transfer"
            : "not supported by this build's libcurl"
        add(["--http3", "--http3-only"], noHTTP3)
        add(["--http0.9"], "not supported: HTTP/0.9 responses are refused (exit 11)")
        add(["-K", "--config"], "not supported: give the options on the command line (URLs: --url-file FILE)")
        add(["-:", "--next"], "not supported: one set of options applies to every URL of a run")
        add(["--libcurl"], "not supported")
        add(["-M", "--manual"], "not supported: see transfer(1) and transfer --help")
        add(["--cert-type", "--key-type"], "not supported: use --cert FILE --key FILE (PEM)")
        add(["--pass"], "not supported: use an unencrypted PEM key with --key")
        add(["--capath"], "not supported: use --cacert FILE (PEM)")
        add(["--crlfile", "--ssl-revoke-best-effort", "--ssl-no-revoke"], "not supported: no revocation checks")
        add(["--engine", "--ssl-allow-beast", "--false-start", "--sessionid", "--no-sessionid"], "not supported")
        add(["--tlsv1", "--tlsv1.0", "--tlsv1.1", "--sslv2", "--sslv3"],
            "not supported: use --tlsv1.2 or --tlsv1.3")
        add(["--curves"], "not supported: OpenSSL's default groups are used")
        add(["--proxy-insecure"], "not supported: use --proxy-cacert FILE")
        add(["--socks4", "--socks4a"], "not supported: use -x socks5://HOST:PORT")
        add(["-p", "--proxytunnel", "--preproxy", "--proxy-anyauth", "--proxy-digest", "--proxy-ntlm",
             "--proxy-negotiate", "--proxy-header"], "not supported (see -x and -U)")
        add(["--anyauth", "--ntlm", "--ntlm-wb", "--negotiate", "--sasl-ir", "--delegation"],
            "not supported: -u sends Basic; --digest answers a Digest challenge")
        add(["--aws-sigv4"], "not supported")
        add(["--proto-default"], "not supported: a URL without a scheme is refused")
        add(["--interface", "--local-port", "--dns-servers", "--dns-interface", "--dns-ipv4-addr",
             "--dns-ipv6-addr", "--doh-url", "--happy-eyeballs-timeout-ms"], "not supported")
        add(["--alt-svc", "--hsts"], "not supported")
        add(["--retry-all-errors"], "not supported: --retry N retries transient failures")
        add(["--raw", "--tr-encoding"], "not supported: bodies are always decoded")
        add(["--xattr"], "not supported")
        add(["--trace-ids", "--trace-config"], "not supported")
        add(["-j", "--junk-session-cookies", "--cookie-session"], "not supported")
        add(["--fail-early"], "not supported: every URL runs; the first failure in input order sets the exit code")
        add(["--keepalive-time", "--no-keepalive", "--no-tcp-nodelay", "--tcp-fastopen"], "not supported")
        add(["-l", "--list-only", "-P", "--ftp-port", "-Q", "--quote", "--ftp-pasv", "--ftp-ssl", "--ftp-create-dirs",
             "--crlf", "-a", "--append", "-B", "--use-ascii", "-t", "--telnet-option", "--mail-from",
             "--mail-rcpt", "--mail-auth", "--tftp-blksize", "--ssl", "--ssl-reqd", "--hostpubmd5",
             "--pubkey", "--krb"],
            "not supported: transfer speaks http and https only")
        add(["--ignore-content-length"], "not supported")
        add(["--request-target"], "not supported")
        add(["--expect100-timeout"], "not supported")
        return table
    }()
}
