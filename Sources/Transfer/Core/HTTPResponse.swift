import Foundation

/// The head of an HTTP response: the Linux spelling of `NSHTTPURLResponse`.
public struct HTTPResponse: Sendable, Hashable, CustomStringConvertible {
    /// The URL the response came from (after redirects).
    public var url: URL
    public var statusCode: Int
    public var headers: HTTPHeaders
    /// "1.0", "1.1", "2" or "3".
    public var httpVersion: String

    public init(url: URL, statusCode: Int, headers: HTTPHeaders, httpVersion: String = "1.1") {
        self.url = url
        self.statusCode = statusCode
        self.headers = headers
        self.httpVersion = httpVersion
    }

    /// The media type of Content-Type, lower-cased, without parameters.
    public var mimeType: String? {
        guard let contentType = headers["Content-Type"] else { return nil }
        let type = contentType.split(separator: ";", maxSplits: 1).first.map {
            $0.trimmingCharacters(in: .whitespaces).lowercased()
        }
        return type?.isEmpty == false ? type : nil
    }

    /// The charset parameter of Content-Type, if any.
    public var textEncodingName: String? {
        guard let contentType = headers["Content-Type"] else { return nil }
        for parameter in contentType.split(separator: ";").dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1)
            if pair.count == 2, pair[0].trimmingCharacters(in: .whitespaces).lowercased() == "charset" {
                return pair[1].trimmingCharacters(in: CharacterSet(charactersIn: " \"")).lowercased()
            }
        }
        return nil
    }

    /// Content-Length, or -1 when unknown.
    public var expectedContentLength: Int64 {
        headers["Content-Length"].flatMap { Int64($0.trimmingCharacters(in: .whitespaces)) } ?? -1
    }

    public func value(forHTTPHeaderField name: String) -> String? { headers[name] }

    public var description: String { "HTTP/\(httpVersion) \(statusCode) \(url.absoluteString)" }
}
