import ArgumentParser

/// Every option of docs/CLI.md, shared by all verbs. Parsing only: what the
/// values mean is decided in `RunPlan`.
///
/// Numeric options take their value with `parsing: .unconditional`: ArgumentParser
/// would otherwise read `-1` as an option and report "Missing value for
/// '--retry <N>'"; this way `--retry -1` reaches the range check, which names
/// the flag and the number.
struct Options: ParsableArguments {
    // MARK: Output

    @Option(name: [.customShort("o"), .customLong("output")],
            help: ArgumentHelp("Write the body to PATH (via PATH.part).", valueName: "PATH"))
    var output: String?

    @Flag(name: [.customShort("O"), .customLong("remote-name"), .customLong("remote-name-all")],
          help: "Name the file from Content-Disposition or the URL path.")
    var remoteName = false

    @Option(name: .customLong("output-dir"),
            help: ArgumentHelp("Where -O and multi-URL downloads go.", valueName: "DIR"))
    var outputDir: String?

    @Flag(name: .customLong("clobber"), help: "Let -O and --output-dir replace an existing file.")
    var clobber = false

    @Flag(name: .customLong("create-dirs"), help: "Create the missing folders of -o PATH and --output-dir.")
    var createDirs = false

    @Flag(name: .customLong("discard"), help: "Count the body bytes, store nothing.")
    var discard = false

    // MARK: Many transfers

    @Option(name: .customLong("url-file"),
            help: ArgumentHelp("One URL per line (blank lines and # comments skipped).", valueName: "FILE"))
    var urlFile: String?

    @Option(name: [.customLong("parallel"), .customLong("parallel-max")], parsing: .unconditional,
            help: ArgumentHelp("At most N transfers at once.", valueName: "N"))
    var parallel: Int = 8

    @Option(name: .customLong("segments"),
            parsing: .unconditional,
            help: ArgumentHelp("Download one file over N connections (Range requests).", valueName: "N"))
    var segments: Int = 1

    // MARK: Resume and integrity

    @Flag(name: .customLong("resume"), help: "Keep the partial file when interrupted; continue it next time.")
    var resume = false

    @Option(name: .customLong("sha256"), help: ArgumentHelp("Expected SHA-256 of the body (hex).", valueName: "HEX"))
    var sha256: String?

    // MARK: Request

    @Option(name: [.customShort("H"), .customLong("header")],
            help: ArgumentHelp("\"Name: value\" (repeatable).", valueName: "NAME: VALUE"))
    var headers: [String] = []

    @Option(name: [.customShort("X"), .customLong("request")],
            help: ArgumentHelp("Override the method.", valueName: "METHOD"))
    var method: String?

    @Option(name: [.customShort("d"), .customLong("data"), .customLong("data-ascii")],
            help: ArgumentHelp("Body: STRING or @FILE (form-encoded or raw; repeatable, joined with &).",
                               valueName: "STRING|@FILE"))
    var data: [String] = []

    @Option(name: .customLong("data-binary"),
            help: ArgumentHelp("Body sent as is: STRING, @FILE or @- (stdin, streamed).", valueName: "STRING|@FILE|@-"))
    var dataBinary: String?

    @Option(name: .customLong("json"), help: ArgumentHelp("JSON body: STRING or @FILE.", valueName: "STRING|@FILE"))
    var json: String?

    @Option(name: [.customShort("F"), .customLong("form")],
            help: ArgumentHelp("Multipart part: name=value or name=@file[;type=mime].",
                               valueName: "NAME=VALUE|NAME=@FILE"))
    var form: [String] = []

    @Option(name: [.customShort("T"), .customLong("upload-file")],
            help: ArgumentHelp("Body streamed from FILE (- for stdin).", valueName: "FILE|-"))
    var uploadFile: String?

    @Option(name: [.customShort("u"), .customLong("user")],
            help: ArgumentHelp("USER:PASSWORD: Basic sent up front, or Digest with --digest.",
                               valueName: "USER:PASSWORD"))
    var user: String?

    @Flag(name: .customLong("digest"), help: "Answer the server's Digest challenge with --user (RFC 7616).")
    var digest = false

    // MARK: Limits

    @Option(name: [.customShort("m"), .customLong("max-time"), .customLong("timeout")],
            parsing: .unconditional, help: ArgumentHelp("Seconds the whole transfer may take.", valueName: "SECONDS"))
    var timeout: Double?

    @Option(name: [.customShort("Y"), .customLong("speed-limit")],
            parsing: .unconditional,
            help: ArgumentHelp("Bytes per second below which --speed-time aborts (default 1 with --speed-time).",
                               valueName: "BYTES"))
    var speedLimit: Int64?

    @Option(name: [.customShort("y"), .customLong("speed-time")],
            parsing: .unconditional,
            help: ArgumentHelp("Seconds below --speed-limit before aborting (default 30 with --speed-limit).",
                               valueName: "SECONDS"))
    var speedTime: Double?

    @Option(name: .customLong("connect-timeout"),
            parsing: .unconditional, help: ArgumentHelp("Seconds to connect (TCP + TLS).", valueName: "SECONDS"))
    var connectTimeout: Double?

    @Option(name: .customLong("max-redirects"), parsing: .unconditional,
            help: ArgumentHelp("Redirects to follow at most.", valueName: "N"))
    var maxRedirects: Int = 16

    @Flag(name: .customLong("no-follow"), help: "Do not follow redirects.")
    var noFollow = false

    @Option(name: .customLong("limit-rate"),
            parsing: .unconditional,
            help: ArgumentHelp("Bytes per second per transfer (e.g. 2M; 0: no limit).", valueName: "RATE"))
    var limitRate: String?

    @Option(name: .customLong("limit-rate-total"),
            parsing: .unconditional,
            help: ArgumentHelp("Bytes per second shared by all transfers (0: no limit).", valueName: "RATE"))
    var limitRateTotal: String?

    @Option(
        name: .customLong("max-filesize"),
        parsing: .unconditional,
        help: ArgumentHelp("Largest body accepted, in bytes (e.g. 100M); larger fails with exit 11.",
                           valueName: "BYTES"))
    var maxFilesize: String?

    @Option(name: .customLong("retry"),
            parsing: .unconditional,
            help: ArgumentHelp("Retry transient failures up to N times (curl's --retry).", valueName: "N"))
    var retry: Int?

    @Option(name: .customLong("retry-max-time"),
            parsing: .unconditional,
            help: ArgumentHelp("Start no retry after SECONDS since the first attempt.", valueName: "SECONDS"))
    var retryMaxTime: Double?

    @Option(name: .customLong("retry-delay"),
            parsing: .unconditional,
            help: ArgumentHelp("Wait SECONDS between retries (default: 1 s doubling).", valueName: "SECONDS"))
    var retryDelay: Double?

    @Flag(name: .customLong("http1.1"), help: "Prefer HTTP/1.1.")
    var http11 = false

    @Flag(name: .customLong("http2"), help: "Prefer HTTP/2.")
    var http2 = false

    // MARK: Cookies (CookieOptions)

    @Option(name: [.customShort("b"), .customLong("cookie")],
            help: ArgumentHelp("\"NAME=VALUE; N2=V2\" sent as is, or (no '=') a Netscape cookie FILE to start from.",
                               valueName: "DATA|FILE"))
    var cookie: String?

    @Option(name: [.customShort("c"), .customLong("cookie-jar")],
            help: ArgumentHelp("Write every cookie of the run to FILE (Netscape format) at the end.",
                               valueName: "FILE"))
    var cookieJar: String?

    // MARK: Proxy (ProxyOptions)

    @Option(name: [.customShort("x"), .customLong("proxy")],
            help: ArgumentHelp("Go through a proxy: http (default), https, socks5, socks5h; \"\" for none.",
                               valueName: "[SCHEME://][USER:PASSWORD@]HOST[:PORT]"))
    var proxy: String?

    @Option(name: [.customShort("U"), .customLong("proxy-user")],
            help: ArgumentHelp("USER:PASSWORD for the proxy (with -x).", valueName: "USER:PASSWORD"))
    var proxyUser: String?

    @Option(name: .customLong("noproxy"),
            help: ArgumentHelp("Hosts that bypass the proxy, comma-separated; \"*\" for all.", valueName: "LIST"))
    var noProxy: String?

    @Option(name: .customLong("proxy-cacert"),
            help: ArgumentHelp("Trust anchors (PEM) for an https proxy (with -x).", valueName: "FILE"))
    var proxyCACert: String?

    // MARK: Server trust

    @Option(name: .customLong("resolve"),
            help: ArgumentHelp("HOST:PORT:ADDR[,ADDR] - connect there for HOST:PORT (repeatable).",
                               valueName: "HOST:PORT:ADDR"))
    var resolve: [String] = []

    @Option(name: .customLong("cacert"),
            help: ArgumentHelp("Trust anchors (PEM) instead of the system store.", valueName: "FILE"))
    var cacert: String?

    @Option(name: .customLong("pinning-mode"),
            help: ArgumentHelp("none, public-key or certificate.", valueName: "MODE"))
    var pinningMode: String = "none"

    @Option(name: .customLong("pin-cert"),
            help: ArgumentHelp("Pinned certificate, DER or PEM (repeatable).", valueName: "FILE"))
    var pinCerts: [String] = []

    @Option(name: .customLong("pin-sha256"),
            help: ArgumentHelp("Pinned SPKI SHA-256, base64 (repeatable).", valueName: "BASE64"))
    var pinSHA256: [String] = []

    @Flag(name: .customLong("allow-invalid-certificates"), help: "Accept untrusted or expired chains.")
    var allowInvalidCertificates = false

    @Flag(name: .customLong("no-validate-domain"), help: "Do not check the host name.")
    var noValidateDomain = false

    @Flag(name: [.customShort("k"), .customLong("insecure")], help: "Both of the two flags above.")
    var insecure = false

    @Option(name: [.customShort("E"), .customLong("cert")],
            help: ArgumentHelp("Client certificate (PEM).", valueName: "FILE"))
    var cert: String?

    @Option(name: .customLong("key"), help: ArgumentHelp("Client key (PEM).", valueName: "FILE"))
    var key: String?

    // MARK: Response

    @Option(name: .customLong("serializer"), help: ArgumentHelp("data, json, xml, plist or text.", valueName: "KIND"))
    var serializer: String?

    @Option(name: .customLong("accept-status"),
            help: ArgumentHelp("Acceptable status codes, e.g. 200-299,304.", valueName: "RANGES"))
    var acceptStatus: String = "200-299"

    @Flag(name: [.customShort("i"), .customLong("include"), .customLong("show-headers")],
          help: "Print the status line and headers before the body.")
    var include = false

    @Option(name: .customLong("print"), help: ArgumentHelp("body, headers, status or none.", valueName: "WHAT"))
    var printMode: String?

    // MARK: Display and data

    @Option(name: .customLong("progress"),
            help: ArgumentHelp("auto, bar, percent, spinner or none.", valueName: "STYLE"))
    var progress: String = "auto"

    @Option(name: .customLong("metrics"),
            help: ArgumentHelp("One JSON object per finished transfer, to FILE or - (stdout).", valueName: "FILE|-"))
    var metrics: String?

    @Flag(name: [.customShort("v"), .customLong("verbose")], help: "Describe each transfer on stderr.")
    var verbose = false

    @Flag(name: [.customShort("s"), .customLong("silent")], help: "No progress and no notes (failures still print).")
    var silent = false

    // MARK: curl's options (CurlOptions)

    @OptionGroup(title: "curl's options") var curl: CurlOptions
}
