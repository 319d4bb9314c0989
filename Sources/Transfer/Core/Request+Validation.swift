import Foundation

extension Request {
    /// The one check a request passes before it is sent, whether a user built
    /// it or it came back from resume data: an http(s) URL with a host and no
    /// control character, a method that is an RFC 9110 token, and headers
    /// (``HTTPHeaders/validate(name:value:)``) with no CR, LF or NUL.
    ///
    /// - Parameter additionalHeaders: The session's extra headers, checked
    ///   merged with the request's.
    /// - Throws: ``TransferError/Code/invalidRequest`` naming what is wrong.
    func validate(additionalHeaders: HTTPHeaders = [:]) throws(TransferError) {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            url.host?.isEmpty == false,
            !url.absoluteString.utf8.contains(where: { $0 < 0x21 || $0 == 0x7F })
        else {
            throw TransferError(.invalidRequest, "unsupported URL \(url.absoluteString.debugDescription)", url: url)
        }
        guard !method.rawValue.isEmpty, method.rawValue.utf8.allSatisfy(HTTPHeaders.isTokenByte) else {
            throw TransferError(.invalidRequest, "invalid HTTP method \(method.rawValue.debugDescription)", url: url)
        }
        do throws(TransferError) {
            try additionalHeaders.merging(headers).validate()
        } catch {
            var error = error
            error.url = url
            throw error
        }
    }
}
