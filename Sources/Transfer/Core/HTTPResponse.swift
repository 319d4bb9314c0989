import FoundationEssentials
import Synchronization

/// The head of an HTTP response: the Linux spelling of `NSHTTPURLResponse`.
public struct HTTPResponse: Sendable, Hashable, CustomStringConvertible {
    /// The URL the response came from (after redirects).
    public var url: URL
    /// The status code (200, 404, ...).
    public var statusCode: Int
    /// The header fields. A response from the fast path keeps the raw head
    /// block and parses it here, on first access (then once per response).
    public var headers: HTTPHeaders {
        get { storage.headers }
        set { storage = HeaderStorage(newValue) }
    }
    /// "1.0", "1.1", "2" or "3".
    public var httpVersion: String

    private var storage: HeaderStorage

    /// A response, for tests and for serializers of your own.
    public init(url: URL, statusCode: Int, headers: HTTPHeaders, httpVersion: String = "1.1") {
        self.url = url
        self.statusCode = statusCode
        self.storage = HeaderStorage(headers)
        self.httpVersion = httpVersion
    }

    /// A response whose headers are parsed from `rawHeaderBlock` ("Name:
    /// value\r\n" lines) only when first read.
    init(url: URL, statusCode: Int, rawHeaderBlock: String, httpVersion: String) {
        self.url = url
        self.statusCode = statusCode
        self.storage = HeaderStorage(rawHeaderBlock: rawHeaderBlock)
        self.httpVersion = httpVersion
    }

    public static func == (lhs: HTTPResponse, rhs: HTTPResponse) -> Bool {
        lhs.url == rhs.url && lhs.statusCode == rhs.statusCode && lhs.httpVersion == rhs.httpVersion
            && lhs.headers == rhs.headers
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(url)
        hasher.combine(statusCode)
        hasher.combine(httpVersion)
        hasher.combine(headers)
    }

    /// The media type of Content-Type, lower-cased, without parameters.
    public var mimeType: String? {
        guard let contentType = headers["Content-Type"] else { return nil }
        let type = contentType.split(separator: ";", maxSplits: 1).first.map {
            $0.trimmingBlanks().lowercased()
        }
        return type?.isEmpty == false ? type : nil
    }

    /// The charset parameter of Content-Type, if any.
    public var textEncodingName: String? {
        guard let contentType = headers["Content-Type"] else { return nil }
        for parameter in contentType.split(separator: ";").dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1)
            if pair.count == 2, pair[0].trimmingBlanks().lowercased() == "charset" {
                return pair[1].trimming { $0 == " " || $0 == "\"" }.lowercased()
            }
        }
        return nil
    }

    /// Content-Length, or -1 when unknown.
    public var expectedContentLength: Int64 {
        headers["Content-Length"].flatMap { Int64($0.trimmingBlanks()) } ?? -1
    }

    /// `headers[name]`, as `HTTPURLResponse` spells it.
    public func value(forHTTPHeaderField name: String) -> String? { headers[name] }

    public var description: String { "HTTP/\(httpVersion) \(statusCode) \(url.absoluteString)" }
}

/// A response's header fields: given parsed, or the head block as the engine
/// delivered it, parsed at most once, by whichever thread reads the headers
/// first (lock-free: a lost race parses twice and keeps the first result).
///
/// One class reference in the response, not an enum of a parsed and a raw
/// payload: such an enum keeps its case in spare bits of the pointer, which
/// LeakSanitizer cannot follow, so every response alive at exit was reported
/// as a leak.
private final class HeaderStorage: Sendable {
    private let raw: String
    private let given: HTTPHeaders?
    private let parsed = Atomic<Unmanaged<ParsedHeaders>?>(nil)

    private final class ParsedHeaders: Sendable {
        let headers: HTTPHeaders
        init(_ headers: HTTPHeaders) { self.headers = headers }
    }

    init(_ headers: HTTPHeaders) {
        raw = ""
        given = headers
    }

    init(rawHeaderBlock: String) {
        raw = rawHeaderBlock
        given = nil
    }

    var headers: HTTPHeaders {
        if let given { return given }
        if let done = parsed.load(ordering: .acquiring) { return done.takeUnretainedValue().headers }
        let mine = Unmanaged.passRetained(ParsedHeaders(HTTPHeaders(rawHeaderBlock: raw)))
        let (exchanged, original) = parsed.compareExchange(expected: nil, desired: mine,
                                                           ordering: .acquiringAndReleasing)
        if exchanged { return mine.takeUnretainedValue().headers }
        mine.release()
        return original!.takeUnretainedValue().headers
    }

    deinit {
        // Balances the passRetained of the value that won.
        parsed.load(ordering: .acquiring)?.release()
    }
}
