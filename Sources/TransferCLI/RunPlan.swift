import Dispatch
import FoundationEssentials
import Glibc
import Transfer

/// Where one transfer's body goes.
enum OutputTarget: Sendable, Equatable {
    case stdout
    /// `-o PATH`.
    case file(String)
    /// `-O` or several URLs: a sanitised remote name inside the directory.
    case remoteName(directory: String)
    case discard
    /// `-o PATH` where PATH already exists and is not a regular file (`/dev/null`, a FIFO, a
    /// terminal): the body is written into it as curl does, never staged beside it or renamed
    /// over it, and nothing there is ever removed.
    case device(String)

    /// `-o PATH`, or `.device` when PATH names something other than a regular file.
    static func path(_ path: String) -> OutputTarget {
        var info = stat()
        if stat(path, &info) == 0, info.st_mode & S_IFMT != S_IFREG { return .device(path) }
        return .file(path)
    }

    /// `-o` names the null device (`/dev/null`, or another node of it): the body
    /// can be counted and dropped, as `--discard` does, with nothing staged.
    var isNullDevice: Bool {
        guard case .device(let path) = self else { return false }
        var info = stat()
        var null = stat()
        return stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFCHR
            && stat("/dev/null", &null) == 0 && null.st_mode & S_IFMT == S_IFCHR && info.st_rdev == null.st_rdev
    }

    /// The body goes somewhere other than a file the run places: it is staged in a
    /// temporary file (removed at the end) and copied out.
    var isStreamed: Bool {
        switch self {
        case .stdout, .discard, .device: return true
        case .file, .remoteName: return false
        }
    }
}

/// What `--print` / `-i` put on stdout.
struct PrintSelection: Sendable {
    var status = false
    var headers = false
    var body = true
}

/// The body of the request, built once for all URLs.
enum RequestBody: Sendable {
    case none
    case data(Data)
    case file(String)
    /// `-F`: each job's request carries its own stream of this form.
    case multipart(MultipartFormData)
    /// `-T -`, `--data-binary @-`, a FIFO or `/dev/stdin` on a pipe: read
    /// once, in order, as a chunked upload of unknown length ("-" is stdin).
    case stream(String)

    var isEmpty: Bool {
        if case .none = self { return true }
        return false
    }
}

/// One transfer to run.
struct Job: Sendable {
    var index: Int
    var urlString: String
    /// nil when the URL is invalid: the job fails with `invalidFailure`.
    var request: Request?
    var invalidFailure: Failure?
    var output: OutputTarget
}

/// The validated run: every flag checked, turned into library values.
struct RunPlan: Sendable {
    /// Made as they are taken: the URL file is read as the run goes.
    var jobs: JobList
    var configuration: SessionConfiguration
    var body: RequestBody
    var acceptStatus: [ClosedRange<Int>]
    var print: PrintSelection
    var parallel: Int
    var progress: ProgressStyle
    var metricsPath: String?
    var verbose: Bool
    var silent: Bool
    var features: FeatureOptions
    /// `--clobber`: a remote name may replace an existing file.
    var clobber = false
    /// `-c FILE`: where the run's cookies are written at the end.
    var cookieJarPath: String?
    /// What curl's options add (CurlPlan.swift).
    var curl = CurlSettings()

    /// A plan failure: exit 2 for usage errors, 3 for unreadable inputs.
    static func make(verb: any Verb) throws(Failure) -> RunPlan {
        var options = verb.options
        try CurlPlan.mergePinnedPublicKey(&options)   // --pinnedpubkey: our pins
        var method = options.method.map { HTTPMethod($0) } ?? type(of: verb).method
        if options.curl.head && options.method == nil { method = .head }   // -I
        if let raw = options.method, raw.isEmpty || !raw.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) {
            throw Failure(.usage, "-X: not an HTTP method: \(raw.debugDescription)")
        }

        // URLs: arguments first, then the URL file, in order, read as the
        // run takes them; only the first two are looked at now.
        let urls = try URLStream(arguments: verb.urls + options.curl.urls, urlFile: options.urlFile)
        let urlCount = urls.count(upTo: 2)
        guard urlCount > 0 else { throw Failure(.usage, "no URL given") }
        let several = urlCount > 1

        // Output.
        let outputFlags = [options.output != nil, options.remoteName, options.discard].filter { $0 }.count
        guard outputFlags <= 1 else { throw Failure(.usage, "-o, -O and --discard exclude each other") }
        if options.output != nil && several {
            throw Failure(.usage, "-o takes one URL; use -O or --output-dir for several")
        }
        let output: OutputTarget
        if options.discard {
            output = .discard
        } else if let path = options.output {
            guard !path.isEmpty else { throw Failure(.usage, "-o: empty path") }
            if path == "-" {
                output = .stdout
            } else if let directory = options.outputDir, !path.hasPrefix("/") {
                output = .path(Path.join(directory, path))
            } else {
                output = .path(path)
            }
        } else if options.remoteName || options.outputDir != nil || several {
            output = .remoteName(directory: options.outputDir ?? ".")
        } else {
            output = .stdout
        }
        if !options.createDirs { try Self.requireFolder(of: output) }

        // Headers.
        var headers = HTTPHeaders()
        for line in try CurlPlan.expandedHeaders(options.headers) {   // -H @FILE: a header per line
            guard let (name, value) = Parse.header(line) else {
                throw Failure(.usage, "-H: expected \"Name: value\", got \(line.debugDescription)")
            }
            do throws(TransferError) {
                try HTTPHeaders.validate(name: name, value: value)
            } catch {
                throw Failure(.invalidRequest, "-H \(line.debugDescription): \(error.message)")
            }
            headers.add(name: name, value: value)
        }
        var digestCredential: Credential?
        if let user = options.user {
            guard user.contains(":") else { throw Failure(.usage, "--user: expected USER:PASSWORD") }
            let parts = user.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            if options.digest {
                // libcurl answers the server's challenge (a wrong password: one 401, no retry).
                digestCredential = Credential(user: String(parts[0]), password: String(parts[1]))
            } else if !headers.contains("Authorization") {
                headers.add(name: "Authorization", value: "Basic " + Data(user.utf8).base64EncodedString())
            }
        } else if options.digest {
            throw Failure(.usage, "--digest needs --user USER:PASSWORD")
        }
        try CurlPlan.addHeaders(&headers, options.curl)   // -A, -e, -r, -z, --etag-compare, User-Agent

        // Body.
        // -d, --data-raw and --data-urlencode: one body joined with & (curl's
        // rule), or with -G the URL's query.
        let hasData = !options.data.isEmpty || !options.curl.dataRaw.isEmpty || !options.curl.dataURLEncode.isEmpty
        let hasForm = !options.form.isEmpty || !options.curl.formString.isEmpty
        let bodySources = [hasData, options.dataBinary != nil, options.json != nil, hasForm,
                           options.uploadFile != nil]
        guard bodySources.filter({ $0 }).count <= 1 else {
            throw Failure(.usage, "--data, --data-binary, --json, --form and --upload-file exclude each other")
        }
        if options.curl.get {
            guard options.dataBinary == nil, options.json == nil, !hasForm, options.uploadFile == nil else {
                throw Failure(.usage, "-G sends -d data in the URL: not --data-binary, --json, -F or -T")
            }
        }
        let query = options.curl.get ? try CurlPlan.joinedData(options) : nil
        var body = RequestBody.none
        func setDefault(_ name: String, _ value: String) {
            if !headers.contains(name) { headers.add(name: name, value: value) }
        }
        if options.curl.get {
            // -G: the data went into the URL.
        } else if hasData, let data = try CurlPlan.joinedData(options) {
            body = .data(Data(data.utf8))
            setDefault("Content-Type", "application/x-www-form-urlencoded")
        } else if let binary = options.dataBinary {
            // curl's meaning: the bytes as they are; @- and pipes are streamed.
            body = try Self.binaryBodyValue(binary)
            setDefault("Content-Type", "application/x-www-form-urlencoded")
        } else if let json = options.json {
            body = try Self.bodyValue(json, flag: "--json")
            setDefault("Content-Type", "application/json")
            setDefault("Accept", "application/json")
        } else if hasForm {
            // The library's multipart builder: parts streamed from disk, exact length.
            var form = MultipartFormData()
            for spec in options.form {
                guard let part = FormPart(spec) else {
                    throw Failure(.usage, "-F: expected name=value or name=@file[;type=mime], got \(spec.debugDescription)")
                }
                switch part {
                case .field(let name, let value):
                    form.append(formField: value, name: name)
                case .file(let name, let path, let mimeType):
                    let url = URL(fileURLWithPath: path)
                    do throws(TransferError) {
                        if let mimeType {
                            try form.append(fileURL: url, name: name, fileName: url.lastPathComponent, mimeType: mimeType)
                        } else {
                            try form.append(fileURL: url, name: name)
                        }
                    } catch {
                        throw Failure(.invalidRequest, "-F \(name): \(error.message)")
                    }
                }
            }
            for spec in options.curl.formString {
                // --form-string: the value as given, `@` and `<` not special (after the -F parts).
                guard let equals = spec.firstIndex(of: "="), equals != spec.startIndex else {
                    throw Failure(.usage, "--form-string: expected name=value, got \(spec.debugDescription)")
                }
                form.append(formField: String(spec[spec.index(after: equals)...]), name: String(spec[..<equals]))
            }
            body = .multipart(form)
        } else if let file = options.uploadFile {
            if file == "-" {
                body = .stream("-")
            } else {
                guard FileManager.default.isReadableFile(atPath: file) else {
                    throw Failure(.invalidRequest, "cannot read --upload-file \(file)")
                }
                body = Self.isRegularFile(file) ? .file(file) : .stream(file)
            }
        }
        // A body on get/head turns it into POST (PUT for -T), as curl does; -X wins.
        var finalMethod = method
        if options.method == nil, method == .get || method == .head, !body.isEmpty {
            finalMethod = options.uploadFile != nil ? .put : .post
        }

        // Jobs, made as the run takes them (JobList.swift).
        if let retries = options.retry, retries < 0 {
            throw Failure(.usage, "--retry: must be 0 or more, got \(retries)")
        }
        var form: MultipartFormData?
        if case .multipart(let built) = body { form = built }
        let maker = JobMaker(method: finalMethod, headers: headers, digestCredential: digestCredential, form: form,
                             retry: try RetryOptions.maker(options),
                             schemes: try CurlPlan.schemes(options.curl.proto, flag: "--proto") ?? CurlPlan.allSchemes,
                             query: query, output: output)
        let jobs = JobList(urls: urls, maker: maker)

        // Limits.
        var configuration = SessionConfiguration()
        guard options.parallel >= 1 else {
            throw Failure(.usage, "--parallel: must be at least 1, got \(options.parallel)")
        }
        configuration.maxConnectionsPerHost = max(configuration.maxConnectionsPerHost, options.parallel)
        if let timeout = options.timeout {
            guard timeout > 0, timeout.isFinite else { throw Failure(.usage, "--timeout: must be a positive number") }
            configuration.timeoutIntervalForResource = timeout
            configuration.timeoutIntervalForRequest = max(configuration.timeoutIntervalForRequest, timeout)
        }
        if options.speedLimit != nil || options.speedTime != nil {
            // curl's defaults: a limit alone lasts 30 s, a time alone means 1 byte/s.
            let limit = options.speedLimit ?? 1
            let time = options.speedTime ?? 30
            guard limit > 0, time > 0, time.isFinite else {
                throw Failure(.usage, "--speed-limit and --speed-time: must be positive numbers")
            }
            configuration.lowSpeedLimit = limit
            configuration.lowSpeedTime = time
        }
        if let connect = options.connectTimeout {
            guard connect > 0, connect.isFinite else {
                throw Failure(.usage, "--connect-timeout: must be a positive number")
            }
            configuration.connectTimeout = connect
        }
        guard options.maxRedirects >= 0 else {
            throw Failure(.usage, "--max-redirects: must be 0 or more, got \(options.maxRedirects)")
        }
        configuration.maxRedirects = options.maxRedirects
        configuration.followRedirects = !options.noFollow
        var perTransferRate: Int64?
        // 0 means no limit, as curl's --limit-rate 0.
        if let limit = options.limitRate {
            guard let rate = Parse.rate(limit, allowingZero: true) else {
                throw Failure(.usage, "--limit-rate: not a rate: \(limit)")
            }
            perTransferRate = rate > 0 ? rate : nil
        }
        if let total = options.limitRateTotal {
            guard let rate = Parse.rate(total, allowingZero: true) else {
                throw Failure(.usage, "--limit-rate-total: not a rate: \(total)")
            }
            if rate > 0 {
                configuration.maxTotalReceiveSpeed = rate
                configuration.maxTotalSendSpeed = rate
                if several {
                    // The engine enforces a session-wide limit for one transfer
                    // only (see FeatureOptions): give each transfer an even share
                    // of the transfers that can run at once, so the sum stays under.
                    let share = max(1, rate / Int64(jobs.count(upTo: options.parallel)))
                    perTransferRate = min(perTransferRate ?? share, share)
                }
            }
        }
        if let text = options.maxFilesize {
            // Downloads get it through DownloadOptions (FeatureOptions);
            // bodies collected in memory through the session.
            guard let size = Parse.rate(text) else { throw Failure(.usage, "--max-filesize: not a size: \(text)") }
            configuration.maximumResponseBodySize = size
        }
        guard !(options.http11 && options.http2) else { throw Failure(.usage, "--http1.1 and --http2 exclude each other") }
        if options.http11 { configuration.httpVersion = .http1_1 }
        if options.http2 { configuration.httpVersion = .http2 }
        try CurlPlan.configure(&configuration, options)   // -4/-6, --unix-socket, TLS, netrc, --http1.0, ...

        for entry in options.resolve {
            guard Parse.isResolveEntry(entry) else {
                throw Failure(.usage, "--resolve: expected HOST:PORT:ADDR[,ADDR...], got \(entry.debugDescription)")
            }
        }
        configuration.resolve = options.resolve
        if let proxy = try ProxyOptions.setting(options) { configuration.proxy = proxy }
        let cookies = try CookieOptions.apply(options, to: &configuration)

        // Trust.
        if let cacert = options.cacert {
            guard FileManager.default.isReadableFile(atPath: cacert) else {
                throw Failure(.invalidRequest, "cannot read --cacert \(cacert)")
            }
            configuration.caFile = cacert
        }
        if options.cert != nil || options.key != nil {
            guard let cert = options.cert else { throw Failure(.usage, "--key needs --cert") }
            let key = options.key ?? cert
            for file in [cert, key] where !FileManager.default.isReadableFile(atPath: file) {
                throw Failure(.invalidRequest, "cannot read client certificate file \(file)")
            }
            configuration.clientCertificatePath = cert
            configuration.clientKeyPath = key
        }

        // Response.
        guard var accept = Parse.statusRanges(options.acceptStatus) else {
            throw Failure(.usage, "--accept-status: expected ranges like 200-299,304, got \(options.acceptStatus)")
        }
        var curl = try CurlPlan.settings(options)
        if curl.conditional { accept.append(304...304) }   // -z, --etag-compare: not modified is success
        var selection = PrintSelection()
        if method == .head && options.printMode == nil {
            selection = PrintSelection(status: true, headers: true, body: false)
        }
        if let mode = options.printMode {
            switch mode {
            case "body": selection = PrintSelection(status: false, headers: false, body: true)
            case "headers": selection = PrintSelection(status: true, headers: true, body: false)
            case "status": selection = PrintSelection(status: true, headers: false, body: false)
            case "none": selection = PrintSelection(status: false, headers: false, body: false)
            default: throw Failure(.usage, "--print: expected body, headers, status or none, got \(mode)")
            }
        }
        if options.include {
            selection.status = true
            selection.headers = true
            selection.body = method != .head
        }
        if curl.dumpHeader == "-" {
            // curl's -D -: the head on stdout before the body, as -i.
            selection.status = true
            selection.headers = true
            curl.dumpHeader = nil
        }

        // Display.
        let progressFlag = options.curl.noProgressMeter ? "none" : options.curl.progressBar ? "bar" : options.progress
        guard let style = ProgressStyle(flag: progressFlag, silent: options.silent)
        else {
            throw Failure(.usage, "--progress: expected auto, bar, percent, spinner or none, got \(options.progress)")
        }

        let features = try FeatureOptions(options: options, perTransferRate: perTransferRate,
                                           jobCount: urlCount, output: output)

        return RunPlan(jobs: jobs, configuration: configuration, body: body, acceptStatus: accept, print: selection,
                       parallel: options.parallel, progress: style, metricsPath: options.metrics,
                       verbose: options.verbose && !options.silent, silent: options.silent, features: features,
                       clobber: options.clobber, cookieJarPath: cookies, curl: curl)
    }

    /// curl's rule: the folder of `-o PATH`, or `--output-dir DIR` itself, must
    /// exist unless `--create-dirs` is given. Checked before any request is
    /// sent (curl finds out at its first write); exit 12 as for any file that
    /// cannot be written. Only a missing folder is refused here: anything
    /// else (a file in the way, no permission) fails where the file is made.
    private static func requireFolder(of output: OutputTarget) throws(Failure) {
        let folder: String
        let flag: String
        switch output {
        case .file(let path):
            let parent = Path.parent(path)
            folder = parent.isEmpty ? "." : parent
            flag = "-o"
        case .remoteName(let directory):
            folder = directory
            flag = "--output-dir"
        case .stdout, .discard, .device:
            return
        }
        var info = stat()
        guard stat(folder, &info) != 0, errno == ENOENT else { return }
        throw Failure(.localFile, "\(flag): the folder \(folder) does not exist (use --create-dirs to create it)")
    }

    /// `STRING` or `@FILE` (`@-` is stdin); a file body is streamed from disk.
    private static func bodyValue(_ value: String, flag: String) throws(Failure) -> RequestBody {
        guard value.hasPrefix("@") else { return .data(Data(value.utf8)) }
        let path = String(value.dropFirst())
        if path == "-" { return .data(Data(DescriptorBodySource(path: "-").readToEnd())) }
        guard FileManager.default.isReadableFile(atPath: path) else {
            throw Failure(.invalidRequest, "cannot read \(flag) file \(path)")
        }
        return .file(path)
    }

    /// `--data-binary`: `STRING`, `@FILE` or `@-`, sent without any change.
    private static func binaryBodyValue(_ value: String) throws(Failure) -> RequestBody {
        guard value.hasPrefix("@") else { return .data(Data(value.utf8)) }
        let path = String(value.dropFirst())
        if path == "-" { return .stream("-") }
        guard FileManager.default.isReadableFile(atPath: path) else {
            throw Failure(.invalidRequest, "cannot read --data-binary file \(path)")
        }
        return isRegularFile(path) ? .file(path) : .stream(path)
    }

    /// Whether `path` (after symlinks) is a regular file, which can be sent
    /// with a known length and read again; pipes, FIFOs and devices cannot.
    static func isRegularFile(_ path: String) -> Bool {
        var info = stat()
        guard stat(path, &info) == 0 else { return true }   // let the open report it
        return (info.st_mode & S_IFMT) == S_IFREG
    }

    func accepts(_ status: Int) -> Bool { acceptStatus.contains { $0.contains(status) } }
}

/// One `-F` argument: `name=value`, or `name=@file[;type=mime]`.
enum FormPart {
    case field(name: String, value: String)
    case file(name: String, path: String, mimeType: String?)

    init?(_ spec: String) {
        guard let equals = spec.firstIndex(of: "="), equals != spec.startIndex else { return nil }
        let name = String(spec[..<equals])
        let value = String(spec[spec.index(after: equals)...])
        guard value.hasPrefix("@") else {
            self = .field(name: name, value: value)
            return
        }
        var path = String(value.dropFirst())
        var mimeType: String?
        if let range = path.ranges(of: ";type=").last {
            mimeType = String(path[range.upperBound...])
            path = String(path[..<range.lowerBound])
        }
        guard !path.isEmpty, mimeType?.isEmpty != true else { return nil }
        self = .file(name: name, path: path, mimeType: mimeType)
    }
}
