import ArgumentParser

/// curl's options with curl's meaning (docs/CLI.md, "curl's options"), where
/// they fit our model. Parsing only: ``RunPlan`` decides what they do. Some
/// are accepted as the defaults they already are (`-L`, `--compressed`, `-f`,
/// `-S`, `-N`, `-J`); `-#`, `-C -` and curl's `--parallel` flag are rewritten
/// before parsing (``CurlArguments``).
struct CurlOptions: ParsableArguments {
    // MARK: Request

    @Option(name: .customLong("data-raw"),
            help: ArgumentHelp("Body data as is, @ not special (repeatable, joined with &).", valueName: "DATA"))
    var dataRaw: [String] = []

    @Option(name: .customLong("data-urlencode"),
            help: ArgumentHelp("Body data URL-encoded: CONTENT, NAME=CONTENT, @FILE or NAME@FILE (repeatable).",
                               valueName: "DATA"))
    var dataURLEncode: [String] = []

    @Option(name: .customLong("form-string"),
            help: ArgumentHelp("A multipart field whose value is taken as is (repeatable, after the -F parts).",
                               valueName: "NAME=VALUE"))
    var formString: [String] = []

    @Flag(name: [.customShort("G"), .customLong("get")], help: "Send the -d data in the URL's query with GET.")
    var get = false

    @Option(name: [.customShort("A"), .customLong("user-agent")],
            help: ArgumentHelp("The User-Agent (default transfer/VERSION; -H \"User-Agent:\" sends none).",
                               valueName: "NAME"))
    var userAgent: String?

    @Option(name: [.customShort("e"), .customLong("referer")],
            help: ArgumentHelp("The Referer header (curl's \";auto\" suffix is ignored).", valueName: "URL"))
    var referer: String?

    @Option(name: [.customShort("r"), .customLong("range")],
            help: ArgumentHelp("Ask for bytes: 0-499, 500-, -500 or several, comma-separated.", valueName: "RANGE"))
    var range: String?

    @Option(name: .customLong("url"), help: ArgumentHelp("A URL to fetch (repeatable).", valueName: "URL"))
    var urls: [String] = []

    @Option(name: [.customShort("z"), .customLong("time-cond")], parsing: .unconditional,
            help: ArgumentHelp("Only if modified since DATE or FILE's time (-DATE: unmodified since); a 304 exits 0.",
                               valueName: "DATE|FILE"))
    var timeCondition: String?

    @Option(name: .customLong("etag-save"),
            help: ArgumentHelp("Write the response's ETag to FILE.", valueName: "FILE"))
    var etagSave: String?

    @Option(name: .customLong("etag-compare"),
            help: ArgumentHelp("Send FILE's ETag as If-None-Match; a 304 exits 0.", valueName: "FILE"))
    var etagCompare: String?

    @Option(name: .customLong("proto"), parsing: .unconditional,
            help: ArgumentHelp("Schemes allowed, curl's syntax (=https: https only; -http: not http).",
                               valueName: "LIST"))
    var proto: String?

    @Option(name: .customLong("proto-redir"), parsing: .unconditional,
            help: ArgumentHelp("Schemes a redirect may go to, curl's syntax (a refused one exits 8).",
                               valueName: "LIST"))
    var protoRedir: String?

    @Option(name: .customLong("oauth2-bearer"),
            help: ArgumentHelp("Send Authorization: Bearer TOKEN.", valueName: "TOKEN"))
    var oauth2Bearer: String?

    @Option(name: .customLong("pinnedpubkey"),
            help: ArgumentHelp("sha256//BASE64[;sha256//BASE64]: --pinning-mode public-key with these pins.",
                               valueName: "HASHES"))
    var pinnedPublicKey: String?

    @Flag(name: .customLong("path-as-is"), help: "Send /../ and /./ in the URL path as they are.")
    var pathAsIs = false

    @Flag(name: [.customShort("n"), .customLong("netrc")], help: "Take credentials from ~/.netrc.")
    var netrc = false

    @Flag(name: .customLong("netrc-optional"), help: "Take credentials from ~/.netrc when it has the host.")
    var netrcOptional = false

    @Option(name: .customLong("netrc-file"),
            help: ArgumentHelp("Take credentials from FILE (netrc format).", valueName: "FILE"))
    var netrcFile: String?

    // MARK: Output

    @Option(name: [.customShort("D"), .customLong("dump-header")],
            help: ArgumentHelp("Write the response's status line and headers to FILE (- for stdout).",
                               valueName: "FILE"))
    var dumpHeader: String?

    @Flag(name: [.customShort("I"), .customLong("head")], help: "HEAD: print the status line and headers.")
    var head = false

    @Flag(name: [.customShort("N"), .customLong("no-buffer")], help: "Accepted: output is never buffered.")
    var noBuffer = false

    @Flag(name: [.customShort("S"), .customLong("show-error")], help: "Accepted: failures always print (also with -s).")
    var showError = false

    @Flag(name: .customLong("progress-bar"), help: "A progress bar (curl's -#): --progress bar.")
    var progressBar = false

    @Flag(name: [.customShort("f"), .customLong("fail")],
          help: "Accepted: a status outside --accept-status already fails (exit 9, no body).")
    var fail = false

    @Flag(name: .customLong("fail-with-body"), help: "A status outside --accept-status fails (exit 9) after the body.")
    var failWithBody = false

    @Flag(name: [.customShort("R"), .customLong("remote-time")],
          help: "Give a placed file the server's Last-Modified time.")
    var remoteTime = false

    @Option(name: .customLong("stderr"),
            help: ArgumentHelp("Write what goes to stderr to FILE instead (- for stdout).", valueName: "FILE"))
    var stderr: String?

    @Flag(name: [.customShort("J"), .customLong("remote-header-name")],
          help: "Accepted: -O already takes Content-Disposition's name.")
    var remoteHeaderName = false

    @Option(name: [.customShort("w"), .customLong("write-out")],
            help: ArgumentHelp("After each transfer print FORMAT with curl's %{variables} (@FILE: read it).",
                               valueName: "FORMAT|@FILE"))
    var writeOut: String?

    // MARK: Transport

    @Flag(name: [.customShort("L"), .customLong("location")], help: "Accepted: redirects are followed by default.")
    var location = false

    @Flag(name: .customLong("compressed"), help: "Accepted: compressed responses are asked for by default.")
    var compressed = false

    @Flag(name: .customShort("Z"), help: "curl's --parallel: accepted, transfers already run in parallel.")
    var parallelFlag = false

    @Flag(name: .customLong("retry-connrefused"), help: "Accepted: --retry already retries a refused connection.")
    var retryConnectionRefused = false

    @Flag(name: [.customShort("g"), .customLong("globoff")], help: "Accepted: URLs are never globbed.")
    var globOff = false

    @Flag(name: [.customShort("q"), .customLong("disable")], help: "Accepted: no config file is ever read.")
    var disableConfig = false

    @Flag(name: .customLong("basic"), help: "Accepted: -u already sends Basic.")
    var basic = false

    @Flag(name: .customLong("no-progress-meter"), help: "No progress display (--progress none).")
    var noProgressMeter = false

    @Flag(name: [.customShort("4"), .customLong("ipv4")], help: "Connect over IPv4 only.")
    var ipv4 = false

    @Flag(name: [.customShort("6"), .customLong("ipv6")], help: "Connect over IPv6 only.")
    var ipv6 = false

    @Option(name: .customLong("connect-to"),
            help: ArgumentHelp("HOST:PORT:CONNECT-HOST:CONNECT-PORT - connect there for HOST:PORT (repeatable).",
                               valueName: "HOST:PORT:HOST2:PORT2"))
    var connectTo: [String] = []

    @Option(name: .customLong("unix-socket"),
            help: ArgumentHelp("Connect to the Unix domain socket PATH instead of the host.", valueName: "PATH"))
    var unixSocket: String?

    @Flag(name: .customLong("tlsv1.2"), help: "TLS 1.2 at least.")
    var tls12 = false

    @Flag(name: .customLong("tlsv1.3"), help: "TLS 1.3 at least.")
    var tls13 = false

    @Option(name: .customLong("tls-max"), help: ArgumentHelp("TLS version at most: 1.2 or 1.3.", valueName: "VERSION"))
    var tlsMax: String?

    @Option(name: .customLong("ciphers"),
            help: ArgumentHelp("OpenSSL cipher list for TLS 1.2 and below.", valueName: "LIST"))
    var ciphers: String?

    @Option(name: .customLong("tls13-ciphers"),
            help: ArgumentHelp("TLS 1.3 cipher suites, colon-separated.", valueName: "LIST"))
    var tls13Ciphers: String?

    @Flag(name: .customLong("http1.0"), help: "Use HTTP/1.0.")
    var http10 = false

    @Flag(name: .customLong("http2-prior-knowledge"), help: "HTTP/2 without asking first, also over plain http.")
    var http2PriorKnowledge = false

    // MARK: Diagnostics

    @Option(name: .customLong("trace"),
            help: ArgumentHelp("Write the -v lines (*, > and <, credentials redacted) to FILE (- for stdout).",
                               valueName: "FILE"))
    var trace: String?

    @Option(name: .customLong("trace-ascii"), help: ArgumentHelp("The same as --trace.", valueName: "FILE"))
    var traceASCII: String?

    @Flag(name: .customLong("trace-time"), help: "Start each -v and --trace line with the time of day.")
    var traceTime = false

    @Flag(name: .customLong("tcp-nodelay"), help: "Accepted: TCP_NODELAY is always set.")
    var tcpNoDelay = false
}
