import ArgumentParser

/// Every option of docs/CLI.md, shared by all verbs. Parsing only: what the
/// values mean is decided in `RunPlan`.
struct Options: ParsableArguments {
    // MARK: Output

    @Option(name: [.customShort("o"), .customLong("output")], help: "Write the body to PATH (via PATH.part).")
    var output: String?

    @Flag(name: [.customShort("O"), .customLong("remote-name")],
          help: "Name the file from Content-Disposition or the URL path.")
    var remoteName = false

    @Option(name: .customLong("output-dir"), help: "Where -O and multi-URL downloads go.")
    var outputDir: String?

    @Flag(name: .customLong("clobber"), help: "Let -O and --output-dir replace an existing file.")
    var clobber = false

    @Flag(name: .customLong("discard"), help: "Count the body bytes, store nothing.")
    var discard = false

    // MARK: Many transfers

    @Option(name: .customLong("url-file"), help: "One URL per line (blank lines and # comments skipped).")
    var urlFile: String?

    @Option(name: .customLong("parallel"), help: "At most N transfers at once.")
    var parallel: Int = 8

    @Option(name: .customLong("segments"), help: "Download one file over N connections (Range requests).")
    var segments: Int = 1

    // MARK: Resume and integrity

    @Flag(name: .customLong("resume"), help: "Keep the partial file when interrupted; continue it next time.")
    var resume = false

    @Option(name: .customLong("sha256"), help: "Expected SHA-256 of the body (hex).")
    var sha256: String?

    // MARK: Request

    @Option(name: [.customShort("H"), .customLong("header")], help: "\"Name: value\" (repeatable).")
    var headers: [String] = []

    @Option(name: [.customShort("X"), .customLong("request")], help: "Override the method.")
    var method: String?

    @Option(name: .customLong("data"), help: "Body: STRING or @FILE (form-encoded or raw).")
    var data: String?

    @Option(name: .customLong("data-binary"), help: "Body sent as is: STRING, @FILE or @- (stdin, streamed).")
    var dataBinary: String?

    @Option(name: .customLong("json"), help: "JSON body: STRING or @FILE.")
    var json: String?

    @Option(name: [.customShort("F"), .customLong("form")], help: "Multipart part: name=value or name=@file[;type=mime].")
    var form: [String] = []

    @Option(name: [.customShort("T"), .customLong("upload-file")], help: "Body streamed from FILE (- for stdin).")
    var uploadFile: String?

    @Option(name: [.customShort("u"), .customLong("user")],
            help: "USER:PASSWORD: Basic sent up front, or Digest with --digest.")
    var user: String?

    @Flag(name: .customLong("digest"), help: "Answer the server's Digest challenge with --user (RFC 7616).")
    var digest = false

    // MARK: Limits

    @Option(name: [.customShort("m"), .customLong("max-time"), .customLong("timeout")],
            help: "Seconds the whole transfer may take.")
    var timeout: Double?

    @Option(name: [.customShort("Y"), .customLong("speed-limit")],
            help: "Bytes per second below which --speed-time aborts (default 1 with --speed-time).")
    var speedLimit: Int64?

    @Option(name: [.customShort("y"), .customLong("speed-time")],
            help: "Seconds below --speed-limit before aborting (default 30 with --speed-limit).")
    var speedTime: Double?

    @Option(name: .customLong("connect-timeout"), help: "Seconds to connect (TCP + TLS).")
    var connectTimeout: Double?

    @Option(name: .customLong("max-redirects"), help: "Redirects to follow at most.")
    var maxRedirects: Int = 16

    @Flag(name: .customLong("no-follow"), help: "Do not follow redirects.")
    var noFollow = false

    @Option(name: .customLong("limit-rate"), help: "Bytes per second per transfer (e.g. 2M).")
    var limitRate: String?

    @Option(name: .customLong("limit-rate-total"), help: "Bytes per second shared by all transfers.")
    var limitRateTotal: String?

    @Option(
        name: .customLong("max-filesize"),
        help: "Largest body accepted, in bytes (e.g. 100M); larger fails with exit 11.")
    var maxFilesize: String?

    @Option(name: .customLong("retry"), help: "Retry transient failures up to N times (curl's --retry).")
    var retry: Int?

    @Option(name: .customLong("retry-max-time"), help: "Start no retry after SECONDS since the first attempt.")
    var retryMaxTime: Double?

    @Option(name: .customLong("retry-delay"), help: "Wait SECONDS between retries (default: 1 s doubling).")
    var retryDelay: Double?

    @Flag(name: .customLong("http1.1"), help: "Prefer HTTP/1.1.")
    var http11 = false

    @Flag(name: .customLong("http2"), help: "Prefer HTTP/2.")
    var http2 = false

    // MARK: Cookies (CookieOptions)

    @Option(name: [.customShort("b"), .customLong("cookie")],
            help: "\"NAME=VALUE; N2=V2\" sent as is, or (no '=') a Netscape cookie FILE to start from.")
    var cookie: String?

    @Option(name: [.customShort("c"), .customLong("cookie-jar")],
            help: "Write every cookie of the run to FILE (Netscape format) at the end.")
    var cookieJar: String?

    // MARK: Proxy (ProxyOptions)

    @Option(name: [.customShort("x"), .customLong("proxy")],
            help: "[SCHEME://][USER:PASSWORD@]HOST[:PORT]; http (default), https, socks5, socks5h; \"\" for none.")
    var proxy: String?

    @Option(name: [.customShort("U"), .customLong("proxy-user")], help: "USER:PASSWORD for the proxy (with -x).")
    var proxyUser: String?

    @Option(name: .customLong("noproxy"), help: "Hosts that bypass the proxy, comma-separated; \"*\" for all.")
    var noProxy: String?

    @Option(name: .customLong("proxy-cacert"), help: "Trust anchors (PEM) for an https proxy (with -x).")
    var proxyCACert: String?

    // MARK: Server trust

    @Option(name: .customLong("resolve"), help: "HOST:PORT:ADDR[,ADDR] - connect there for HOST:PORT (repeatable).")
    var resolve: [String] = []

    @Option(name: .customLong("cacert"), help: "Trust anchors (PEM) instead of the system store.")
    var cacert: String?

    @Option(name: .customLong("pinning-mode"), help: "none, public-key or certificate.")
    var pinningMode: String = "none"

    @Option(name: .customLong("pin-cert"), help: "Pinned certificate, DER or PEM (repeatable).")
    var pinCerts: [String] = []

    @Option(name: .customLong("pin-sha256"), help: "Pinned SPKI SHA-256, base64 (repeatable).")
    var pinSHA256: [String] = []

    @Flag(name: .customLong("allow-invalid-certificates"), help: "Accept untrusted or expired chains.")
    var allowInvalidCertificates = false

    @Flag(name: .customLong("no-validate-domain"), help: "Do not check the host name.")
    var noValidateDomain = false

    @Flag(name: [.customShort("k"), .customLong("insecure")], help: "Both of the two flags above.")
    var insecure = false

    @Option(name: .customLong("cert"), help: "Client certificate (PEM).")
    var cert: String?

    @Option(name: .customLong("key"), help: "Client key (PEM).")
    var key: String?

    // MARK: Response

    @Option(name: .customLong("serializer"), help: "data, json, xml, plist or text.")
    var serializer: String?

    @Option(name: .customLong("accept-status"), help: "Acceptable status codes, e.g. 200-299,304.")
    var acceptStatus: String = "200-299"

    @Flag(name: [.customShort("i"), .customLong("include")], help: "Print the status line and headers before the body.")
    var include = false

    @Option(name: .customLong("print"), help: "body, headers, status or none.")
    var printMode: String?

    // MARK: Display and data

    @Option(name: .customLong("progress"), help: "auto, bar, percent, spinner or none.")
    var progress: String = "auto"

    @Option(name: .customLong("metrics"), help: "One JSON object per finished transfer, to FILE or - (stdout).")
    var metrics: String?

    @Flag(name: [.customShort("v"), .customLong("verbose")], help: "Describe each transfer on stderr.")
    var verbose = false

    @Flag(name: [.customShort("s"), .customLong("silent")], help: "No progress and no notes (failures still print).")
    var silent = false
}
