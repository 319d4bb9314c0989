import FoundationEssentials

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
        try validate(sending: additionalHeaders.merging(headers))
    }

    /// ``validate(additionalHeaders:)`` with the headers already merged as
    /// they will be sent (the spec builder merges once and checks that).
    func validate(sending headers: HTTPHeaders) throws(TransferError) {
        var absolute = url.absoluteString
        // Over the contiguous bytes of the absolute string: the UTF8View's
        // iterator costs about ten times as much per byte, and `URL.host`
        // and `URL.scheme` about 1.5 k instructions, for every request.
        guard absolute.withUTF8(Self.isSendableURL) else {
            throw TransferError(.invalidRequest, "unsupported URL \(absolute.debugDescription)", url: url)
        }
        var methodBytes = method.rawValue
        guard methodBytes.withUTF8({ !$0.isEmpty && $0.allSatisfy(HTTPHeaders.isTokenByte) }) else {
            throw TransferError(.invalidRequest, "invalid HTTP method \(method.rawValue.debugDescription)", url: url)
        }
        do throws(TransferError) {
            try headers.validate()
        } catch {
            var error = error
            error.url = url
            throw error
        }
    }
}

extension Request {
    /// Whether the bytes of an absolute URL string, as `URL.absoluteString`
    /// gives them, name an http or https resource with a non-empty host and
    /// hold no space or control byte. The same verdict as `URL.scheme` and
    /// `URL.host` on the parsed URL (`RequestURLCheckTests` compares them),
    /// without parsing it again.
    static func isSendableURL(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        // Index loops over the buffer: the collection algorithms on slices
        // cost several times as much here, on every request.
        let count = bytes.count
        var index = 0
        // Eight bytes at a time: whether any is below 0x21 (a space or a
        // control byte), or is 0x7F. Exact as a yes or no (the borrows of
        // the subtraction can only mark bytes above one that matched), and
        // bytes of 0x80 and above never match.
        if let base = bytes.baseAddress {
            let raw = UnsafeRawPointer(base)
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highs: UInt64 = 0x8080_8080_8080_8080
            while index + 8 <= count {
                let word = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: index, as: UInt64.self))
                let below = (word &- ones &* 0x21) & ~word & highs
                let delete = word ^ (ones &* 0x7F)
                let isDelete = (delete &- ones) & ~delete & highs
                if below | isDelete != 0 { return false }
                index += 8
            }
        }
        while index < count {
            let byte = bytes[index]
            if byte < 0x21 || byte == 0x7F { return false }
            index += 1
        }
        // The scheme, up to the first colon: "http" or "https", any case.
        guard count > 5, bytes[0] | 0x20 == UInt8(ascii: "h"), bytes[1] | 0x20 == UInt8(ascii: "t"),
            bytes[2] | 0x20 == UInt8(ascii: "t"), bytes[3] | 0x20 == UInt8(ascii: "p")
        else { return false }
        let colon = bytes[4] | 0x20 == UInt8(ascii: "s") ? 5 : 4
        guard bytes[colon] == UInt8(ascii: ":") else { return false }
        // An authority must follow ("//"), up to the path, query or fragment.
        let start = colon + 3
        guard start <= count, bytes[colon + 1] == UInt8(ascii: "/"), bytes[colon + 2] == UInt8(ascii: "/")
        else { return false }
        var end = start
        var host = start
        while end < count {
            let byte = bytes[end]
            if byte == UInt8(ascii: "/") || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") { break }
            // The host follows any user information.
            if byte == UInt8(ascii: "@") { host = end + 1 }
            end += 1
        }
        guard host < end else { return false }
        // An IP literal between brackets; else the host ends at the port.
        var last = host
        if bytes[host] == UInt8(ascii: "[") {
            while last < end && bytes[last] != UInt8(ascii: "]") { last += 1 }
            return last < end && last > host + 1
        }
        while last < end && bytes[last] != UInt8(ascii: ":") { last += 1 }
        return last > host
    }
}

extension ResponseValidation {
    /// A check of a completed response (Alamofire's `DataRequest.Validation`):
    /// `.failure` fails the task with that error.
    public typealias Validator =
        @Sendable (_ request: Request, _ response: HTTPResponse, _ data: Data?) -> Result<Void, TransferError>
}

extension DataTask {
    /// Fails the task unless the status is 200–299 and, when the request has
    /// an `Accept` header, the body's content type is one it accepts
    /// (Alamofire's `validate()`).
    ///
    /// Validations run in the order they were added, on the session's delegate
    /// queue, when the transfer succeeded; the first failure becomes the task's
    /// error (for every completion handler, the notification and `value`).
    /// Added after the task completed, they have no effect.
    /// - Returns: The task, to chain further validations.
    @discardableResult
    public func validate() -> Self {
        validate(statusCode: 200..<300)
        let accept = (currentRequest ?? originalRequest).headers["Accept"]
        guard let accept else { return self }
        let types = accept.split(separator: ",").map {
            String($0.split(separator: ";", maxSplits: 1)[0]).trimmingBlanks()
        }.filter { !$0.isEmpty }
        return types.isEmpty ? self : validate(contentType: types)
    }

    /// Fails the task with ``TransferError/Code/unacceptableStatusCode``
    /// unless the status is in `acceptable`.
    @discardableResult
    public func validate<S: Sequence>(statusCode acceptable: S) -> Self where S.Element == Int {
        let codes = StatusCodeSet(acceptable)
        return validate { _, response, data in
            guard !codes.contains(response.statusCode) else { return .success(()) }
            let phrase = ResponseValidation.reasonPhrase(for: response.statusCode)
            return .failure(ResponseValidation.makeError(
                .unacceptableStatusCode, "Response status code was unacceptable: \(phrase) (\(response.statusCode))",
                response: response, data: data))
        }
    }

    /// Fails the task with ``TransferError/Code/unacceptableContentType``
    /// unless a non-empty body's MIME type matches one of `acceptable`
    /// (`type/subtype`, `type/*` or `*/*`).
    @discardableResult
    public func validate(contentType acceptable: [String]) -> Self {
        let patterns = acceptable.map { $0.lowercased() }
        return validate { _, response, data in
            guard let data, !data.isEmpty else { return .success(()) }
            if patterns.contains("*/*") { return .success(()) }
            if let type = response.mimeType, patterns.contains(where: { Self.mimeType(type, matches: $0) }) {
                return .success(())
            }
            return .failure(ResponseValidation.makeError(
                .unacceptableContentType,
                "Response content type \(response.mimeType ?? "none") was unacceptable: \(acceptable)",
                response: response, data: data))
        }
    }

    /// Adds a custom validation (Alamofire's `validate(_:)`).
    @discardableResult
    public func validate(_ validation: @escaping ResponseValidation.Validator) -> Self {
        addValidation(validation)
        return self
    }

    private static func mimeType(_ type: String, matches pattern: String) -> Bool {
        let have = type.split(separator: "/", maxSplits: 1)
        let want = pattern.split(separator: "/", maxSplits: 1)
        guard have.count == 2, want.count == 2 else { return false }
        return (want[0] == "*" || want[0] == have[0]) && (want[1] == "*" || want[1] == have[1])
    }
}
