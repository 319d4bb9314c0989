import Dispatch
import FoundationEssentials
import Glibc
import Transfer

/// What curl's options (``CurlOptions``) add to a run, validated.
struct CurlSettings: Sendable {
    /// `--fail-with-body`: the body of an unacceptable status is still output.
    var failWithBody = false
    /// `--proto` ∩ `--proto-redir`: the schemes a redirect may go to; nil: any.
    var redirectSchemes: Set<String>?
    /// `-D FILE`: the final response's head is written there ("-": stdout).
    var dumpHeader: String?
    /// `-w FORMAT`.
    var writeOut: WriteOutFormat?
    /// `--trace FILE` / `--trace-ascii FILE` ("-": stdout).
    var tracePath: String?
    /// `--trace-time`: trace lines start with the time of day.
    var traceTime = false
    /// `-z` or `--etag-compare`: a 304 is success, and nothing is written.
    var conditional = false
    /// `--etag-save FILE`.
    var etagSave: String?
    /// `-R`: a placed file gets the response's Last-Modified time.
    var remoteTime = false
}

/// How curl's options become headers, bodies and session settings.
enum CurlPlan {
    /// `text` with each `[...]` (a bracketed IPv6 address) replaced by `A`;
    /// an unclosed `[` is kept as it is.
    static func replacingBracketed(_ text: String) -> String {
        var out = ""
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "["), let close = rest[open...].firstIndex(of: "]") {
            out += rest[..<open] + "A"
            rest = rest[rest.index(after: close)...]
        }
        return out + rest
    }

    /// The default User-Agent: `transfer/<version>`.
    static var userAgent: String { "transfer/\(TransferVersion.library)" }

    /// Adds the headers of `-A`, `-e`, `-r`, `-z` and `--etag-compare`, and the
    /// default User-Agent, to those of `-H`, which win (curl's rule). A
    /// `-H "Name:"` with nothing after the colon stays in `headers` with an
    /// empty value: libcurl then sends no such header (curl's meaning).
    static func addHeaders(_ headers: inout HTTPHeaders, _ curl: CurlOptions) throws(Failure) {
        func setDefault(_ name: String, _ value: String) {
            if !headers.contains(name) { headers.add(name: name, value: value) }
        }
        func checked(_ flag: String, _ value: String) throws(Failure) -> String {
            guard !value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else {
                throw Failure(.invalidRequest, "\(flag): a CR, LF or NUL in \(value.debugDescription)")
            }
            return value
        }
        setDefault("User-Agent", try checked("-A", curl.userAgent ?? userAgent))
        if let token = curl.oauth2Bearer {
            setDefault("Authorization", "Bearer " + (try checked("--oauth2-bearer", token)))
        }
        if let referer = curl.referer {
            var value = referer
            if value.hasSuffix(";auto") { value.removeLast(5) }
            if !value.isEmpty { setDefault("Referer", try checked("-e", value)) }
        }
        if let range = curl.range {
            guard isRange(range) else {
                throw Failure(.usage, "-r: expected ranges like 0-499, 500- or -500, got \(range.debugDescription)")
            }
            setDefault("Range", "bytes=" + range)
        }
        if let condition = curl.timeCondition {
            let (name, date) = try timeCondition(condition)
            setDefault(name, date)
        }
        if let path = curl.etagCompare {
            // curl sends no condition when the file is missing or empty.
            if let text = try? String(contentsOfFile: path, encoding: .utf8),
                let etag = text.split(whereSeparator: \.isNewline).first.map(String.init), !etag.isEmpty
            {
                setDefault("If-None-Match", try checked("--etag-compare", etag))
            }
        }
    }

    /// `-H` values with each `@FILE` replaced by the file's lines (curl's
    /// headers from a file: blank lines skipped, CR LF or LF endings).
    static func expandedHeaders(_ values: [String]) throws(Failure) -> [String] {
        var lines: [String] = []
        for value in values {
            guard value.hasPrefix("@") else {
                lines.append(value)
                continue
            }
            let text = String(decoding: try read(String(value.dropFirst()), flag: "-H"), as: UTF8.self)
            lines += text.split(whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" }).map(String.init)
                .filter { !$0.trimmingWhitespace().isEmpty }
        }
        return lines
    }

    /// `--pinnedpubkey sha256//A;sha256//B`: the same pins as `--pin-sha256`,
    /// with `--pinning-mode public-key` unless another mode was given.
    static func mergePinnedPublicKey(_ options: inout Options) throws(Failure) {
        guard let value = options.curl.pinnedPublicKey else { return }
        for item in value.split(separator: ";") {
            guard item.hasPrefix("sha256//") else {
                throw Failure(.usage, "--pinnedpubkey: only sha256//BASE64 hashes are supported "
                    + "(for a certificate file use --pinning-mode certificate --pin-cert FILE)")
            }
            options.pinSHA256.append(String(item))
        }
        if options.pinningMode == "none" { options.pinningMode = "public-key" }
    }

    /// `0-499`, `500-`, `-500`, and comma-separated lists of them.
    static func isRange(_ text: String) -> Bool {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        return !parts.isEmpty && parts.allSatisfy { part in
            let bounds = part.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
            guard bounds.count == 2, !(bounds[0].isEmpty && bounds[1].isEmpty) else { return false }
            guard bounds.allSatisfy({ $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }) else { return false }
            if let low = UInt64(bounds[0]), let high = UInt64(bounds[1]) { return low <= high }
            return true
        }
    }

    /// `-z`: `DATE` → If-Modified-Since, `-DATE` → If-Unmodified-Since; a
    /// path to an existing file gives its modification time instead.
    static func timeCondition(_ value: String) throws(Failure) -> (String, String) {
        var text = value
        var name = "If-Modified-Since"
        if text.hasPrefix("-") {
            text.removeFirst()
            name = "If-Unmodified-Since"
        }
        var info = stat()
        let date: Date
        if stat(text, &info) == 0 {
            date = Date(timeIntervalSince1970: TimeInterval(info.st_mtim.tv_sec))
        } else if let parsed = parseDate(text) {
            date = parsed
        } else {
            throw Failure(.usage, "-z: neither a file nor a date: \(value.debugDescription)")
        }
        return (name, httpDate(date))
    }

    /// RFC 9110's IMF-fixdate.
    static func httpDate(_ date: Date) -> String { CurlDate.httpDate(date) }

    /// The date forms curl users write most: HTTP dates, ISO 8601, and
    /// `yyyy-MM-dd[ HH:mm:ss]` or `dd MMM yyyy` (UTC).
    static func parseDate(_ text: String) -> Date? { CurlDate.parse(text) }

    /// The `-d`, `--data-raw` and `--data-urlencode` values joined with `&`
    /// (curl's rule), or nil when none was given. `-d @FILE` is the file
    /// without its CR and LF bytes, as curl reads it (`--data-binary @FILE`
    /// streams a file as is).
    static func joinedData(_ options: Options) throws(Failure) -> String? {
        var pieces: [String] = []
        for value in options.data {
            if value.hasPrefix("@") {
                // curl's -d @FILE: the file without its CR and LF bytes.
                let bytes = try read(String(value.dropFirst()), flag: "-d")
                pieces.append(String(decoding: bytes.filter { $0 != 0x0A && $0 != 0x0D }, as: UTF8.self))
            } else {
                pieces.append(value)
            }
        }
        pieces += options.curl.dataRaw
        for value in options.curl.dataURLEncode { pieces.append(try urlencoded(value)) }
        return pieces.isEmpty ? nil : pieces.joined(separator: "&")
    }

    /// curl's `--data-urlencode` forms: `CONTENT`, `=CONTENT`, `NAME=CONTENT`,
    /// `@FILE`, `NAME@FILE`; the content (not the name) is percent-encoded.
    static func urlencoded(_ value: String) throws(Failure) -> String {
        if let equals = value.firstIndex(of: "="),
            value.firstIndex(of: "@").map({ $0 > equals }) ?? true
        {
            let name = String(value[..<equals])
            let content = escape(Array(value[value.index(after: equals)...].utf8))
            return name.isEmpty ? content : name + "=" + content
        }
        if let at = value.firstIndex(of: "@") {
            let name = String(value[..<at])
            let content = escape(try read(String(value[value.index(after: at)...]), flag: "--data-urlencode"))
            return name.isEmpty ? content : name + "=" + content
        }
        return escape(Array(value.utf8))
    }

    /// curl_easy_escape: every byte but ALPHA, DIGIT, `-`, `.`, `_` and `~` as `%XX`.
    static func escape(_ bytes: [UInt8]) -> String {
        var out = ""
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += "%" + String(byte >> 4, radix: 16, uppercase: true) + String(byte & 0x0F, radix: 16, uppercase: true)
            }
        }
        return out
    }

    /// A file's bytes (`-` is stdin); exit 3 when it cannot be read.
    static func read(_ path: String, flag: String) throws(Failure) -> [UInt8] {
        if path == "-" { return DescriptorBodySource(path: "-").readToEnd() }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw Failure(.invalidRequest, "cannot read \(flag) file \(path)")
        }
        return Array(data)
    }

    /// `-G`: `query` appended to the URL's query.
    static func appendingQuery(_ query: String, to url: String) -> String {
        guard !query.isEmpty else { return url }
        var base = url
        var fragment = ""
        if let hash = base.firstIndex(of: "#") {
            fragment = String(base[hash...])
            base = String(base[..<hash])
        }
        return base + (base.contains("?") ? "&" : "?") + query + fragment
    }

    /// The session settings of `-4`/`-6`, `--unix-socket`, the TLS versions,
    /// `--path-as-is`, netrc and the HTTP versions.
    static func configure(_ configuration: inout SessionConfiguration, _ options: Options) throws(Failure) {
        let curl = options.curl
        guard !(curl.ipv4 && curl.ipv6) else { throw Failure(.usage, "-4 and -6 exclude each other") }
        if curl.ipv4 { configuration.transport.ipVersion = .v4 }
        if curl.ipv6 { configuration.transport.ipVersion = .v6 }
        if let path = curl.unixSocket {
            guard !path.isEmpty else { throw Failure(.usage, "--unix-socket: empty path") }
            configuration.transport.unixSocketPath = path
        }
        guard !(curl.tls12 && curl.tls13) else { throw Failure(.usage, "--tlsv1.2 and --tlsv1.3 exclude each other") }
        if curl.tls12 { configuration.transport.minimumTLSVersion = .tls1_2 }
        if curl.tls13 { configuration.transport.minimumTLSVersion = .tls1_3 }
        if let text = curl.tlsMax {
            switch text {
            case "1.2": configuration.transport.maximumTLSVersion = .tls1_2
            case "1.3", "default": configuration.transport.maximumTLSVersion = .tls1_3
            default:
                throw Failure(.usage, "--tls-max: expected 1.2 or 1.3 (1.0 and 1.1 are not supported), got \(text)")
            }
        }
        if let low = configuration.transport.minimumTLSVersion, let high = configuration.transport.maximumTLSVersion,
            low > high
        {
            throw Failure(.usage, "--tls-max is below the --tlsv1.x minimum")
        }
        for (flag, list) in [("--ciphers", curl.ciphers), ("--tls13-ciphers", curl.tls13Ciphers)] {
            if let list, list.isEmpty || !list.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) {
                throw Failure(.usage, "\(flag): expected a cipher list such as ECDHE-RSA-AES128-GCM-SHA256")
            }
        }
        for entry in curl.connectTo {
            // Four fields; a bracketed IPv6 address may hold colons of its own.
            let unbracketed = CurlPlan.replacingBracketed(entry)
            guard unbracketed.split(separator: ":", omittingEmptySubsequences: false).count == 4,
                !entry.contains(where: { $0.isWhitespace || $0.isNewline })
            else {
                let expected = "HOST:PORT:CONNECT-HOST:CONNECT-PORT"
                throw Failure(.usage, "--connect-to: expected \(expected), got \(entry.debugDescription)")
            }
        }
        configuration.transport.connectTo = curl.connectTo
        configuration.transport.cipherList = curl.ciphers
        configuration.transport.tls13CipherSuites = curl.tls13Ciphers
        configuration.transport.keepsPathAsIs = curl.pathAsIs
        if let file = curl.netrcFile {
            guard FileManager.default.isReadableFile(atPath: file) else {
                throw Failure(.invalidRequest, "cannot read --netrc-file \(file)")
            }
            configuration.transport.netrcFile = file
        }
        if curl.netrc {
            configuration.transport.netrc = .required
        } else if curl.netrcOptional || curl.netrcFile != nil {
            configuration.transport.netrc = .optional
        }
        let versions = [options.http11, options.http2, curl.http10, curl.http2PriorKnowledge].filter { $0 }.count
        guard versions <= 1 else {
            throw Failure(.usage, "--http1.0, --http1.1, --http2 and --http2-prior-knowledge exclude each other")
        }
        if curl.http10 { configuration.httpVersion = .http1_0 }
        if curl.http2PriorKnowledge { configuration.httpVersion = .http2PriorKnowledge }
    }

    /// The schemes transfer speaks.
    static let allSchemes: Set<String> = ["http", "https"]

    /// curl's `--proto` list: comma-separated names, each added (`+`, the
    /// default), removed (`-`) or the only ones (`=`), `all` for every one,
    /// starting from all; schemes other than ours are ignored, as curl
    /// ignores unknown ones. nil when not given.
    static func schemes(_ list: String?, flag: String) throws(Failure) -> Set<String>? {
        guard let list else { return nil }
        var set = allSchemes
        for item in list.split(separator: ",").map({ $0.trimmingWhitespace() }) where !item.isEmpty {
            var name = Substring(item)
            var modifier: Character = "+"
            if let first = name.first, "=+-".contains(first) {
                modifier = first
                name = name.dropFirst()
            }
            let names = name.lowercased() == "all" ? allSchemes : [name.lowercased()]
            switch modifier {
            case "=": set = names.intersection(allSchemes)
            case "-": set.subtract(names)
            default: set.formUnion(names.intersection(allSchemes))
            }
        }
        return set
    }

    /// The output settings of curl's options.
    static func settings(_ options: Options) throws(Failure) -> CurlSettings {
        let curl = options.curl
        var settings = CurlSettings()
        settings.failWithBody = curl.failWithBody
        settings.dumpHeader = curl.dumpHeader
        if let format = curl.writeOut { settings.writeOut = try WriteOutFormat(argument: format) }
        guard curl.trace == nil || curl.traceASCII == nil else {
            throw Failure(.usage, "--trace and --trace-ascii exclude each other")
        }
        settings.tracePath = curl.trace ?? curl.traceASCII
        settings.traceTime = curl.traceTime
        settings.conditional = curl.timeCondition != nil || curl.etagCompare != nil
        settings.etagSave = curl.etagSave
        settings.remoteTime = curl.remoteTime
        let proto = try schemes(curl.proto, flag: "--proto")
        let redirect = try schemes(curl.protoRedir, flag: "--proto-redir")
        if proto != nil || redirect != nil {
            settings.redirectSchemes = (proto ?? allSchemes).intersection(redirect ?? allSchemes)
        }
        return settings
    }
}
