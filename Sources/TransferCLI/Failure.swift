import Dispatch
import FoundationEssentials
import Glibc
import Transfer

/// The exit codes of docs/CLI.md.
enum ExitStatus: Int32, Sendable, Comparable {
    case success = 0
    case internalError = 1
    case usage = 2
    case invalidRequest = 3
    case cannotConnect = 4
    case timedOut = 5
    case tls = 6
    case pinning = 7
    case redirect = 8
    case status = 9
    case content = 10
    case truncated = 11
    case localFile = 12
    case checksum = 13
    case interrupted = 14
    case proxy = 15
    case tooManyOpenFiles = 16

    static func < (lhs: ExitStatus, rhs: ExitStatus) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The class named in failure lines.
    var className: String {
        switch self {
        case .success: return "ok"
        case .internalError: return "internal error"
        case .usage: return "usage error"
        case .invalidRequest: return "invalid request"
        case .cannotConnect: return "cannot connect"
        case .timedOut: return "timed out"
        case .tls: return "TLS failure"
        case .pinning: return "server trust refused"
        case .redirect: return "redirect failure"
        case .status: return "HTTP status not acceptable"
        case .content: return "content not acceptable"
        case .truncated: return "truncated response"
        case .localFile: return "local file error"
        case .checksum: return "checksum mismatch"
        case .interrupted: return "interrupted"
        case .proxy: return "proxy failure"
        case .tooManyOpenFiles: return "too many open files"
        }
    }

    /// The one place where library error codes become exit codes.
    init(_ error: TransferError) {
        switch error.code {
        case .invalidRequest, .invalidResumeData: self = .invalidRequest
        case .cannotConnect: self = .cannotConnect
        case .timedOut: self = .timedOut
        case .tlsFailure: self = .tls
        case .serverTrustRejected: self = .pinning
        case .tooManyRedirects, .redirectRefused: self = .redirect
        case .unacceptableStatusCode: self = .status
        case .unacceptableContentType, .serializationFailed: self = .content
        case .truncatedResponse, .badResponse, .emptyResponse, .responseTooLarge: self = .truncated
        case .fileError: self = .localFile
        case .checksumMismatch: self = .checksum
        case .cancelled: self = .interrupted
        case .proxyFailure: self = .proxy
        case .tooManyOpenFiles: self = .tooManyOpenFiles
        // The engine's one table (ct_error.c) already sorted every CURLcode
        // into a code; what is left is a connection that failed mid-exchange
        // (send/recv errors, HTTP/2 framing): the response is cut short.
        case .transport: self = .truncated
        default: self = .internalError
        }
    }
}

/// One failed transfer: what the stderr line says.
struct Failure: Error, Sendable {
    var status: ExitStatus
    var detail: String
    /// What a failure before any transfer is about when it is not the URLs
    /// (e.g. the `--url-file` that cannot be read); nil: the URLs.
    var subject: String?

    init(_ status: ExitStatus, _ detail: String) {
        self.status = status
        self.detail = detail
    }

    init(_ error: TransferError) {
        status = ExitStatus(error)
        var parts = [error.message]
        if let curl = error.curlCode { parts.append("curl \(curl)") }
        if let errno = error.systemErrno, errno != 0 {
            parts.append("errno \(errno): \(String(cString: strerror(errno)))")
        }
        if let code = error.verifyError { parts.append("X509 verify \(code)") }
        detail = parts.joined(separator: "; ")
    }

    /// `transfer: URL: class: detail`, without control characters.
    func line(url: String) -> String {
        Terminal.printable("transfer: \(url): \(status.className): \(detail)")
    }
}
