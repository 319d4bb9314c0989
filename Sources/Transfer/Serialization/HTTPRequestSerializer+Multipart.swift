import Dispatch
import FoundationEssentials

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

extension HTTPRequestSerializer {
    /// Builds a `multipart/form-data` request whose body is streamed from the
    /// parts (AFNetworking's `multipartFormRequestWithMethod:URLString:parameters:constructingBodyWithBlock:error:`).
    ///
    /// `parameters` become form fields first (flattened as in ``QueryString``:
    /// `a[b]`, `a[]`; null gives an empty field), then `constructingBody` adds
    /// parts. The request gets Content-Type with the boundary, an exact
    /// Content-Length and a ``Request/Body/stream(_:length:)`` body; `headers`
    /// are set last, over everything else.
    ///
    /// - Parameters:
    ///   - method: Any method but GET and HEAD.
    ///   - urlString: An absolute http(s) URL.
    ///   - parameters: Form fields, before the parts; an object or nil.
    ///   - headers: Set last, over everything else.
    ///   - constructingBody: Runs once, synchronously, before this returns.
    /// - Returns: The request, with its streamed body; not sent.
    /// - Throws: ``TransferError/Code/invalidRequest`` for GET or HEAD (they
    ///   have no body), a bad URL, parameters that are not an object, or an
    ///   invalid header; whatever `constructingBody` throws (other errors are
    ///   wrapped in ``TransferError/Code/invalidRequest``).
    public func multipartFormRequest(
        method: HTTPMethod = .post, urlString: String, parameters: JSONValue? = nil, headers: HTTPHeaders = [:],
        constructingBody: (inout MultipartFormData) throws -> Void = { _ in }
    ) throws(TransferError) -> Request {
        guard method != .get && method != .head else {
            throw Self.multipartMethodError(method, url: URL(string: urlString))
        }
        return try multipartFormRequest(
            method: method, url: Request(urlString, method: method).url, parameters: parameters, headers: headers,
            constructingBody: constructingBody)
    }

    /// ``multipartFormRequest(method:urlString:parameters:headers:constructingBody:)``
    /// for a URL already resolved.
    public func multipartFormRequest(
        method: HTTPMethod = .post, url: URL, parameters: JSONValue? = nil, headers: HTTPHeaders = [:],
        constructingBody: (inout MultipartFormData) throws -> Void = { _ in }
    ) throws(TransferError) -> Request {
        guard method != .get && method != .head else { throw Self.multipartMethodError(method, url: url) }
        let request = try self.request(method: method, url: url, parameters: nil)
        var form = MultipartFormData()
        if let parameters {
            let encoding = stringEncoding
            for pair in try QueryString.pairs(from: parameters) {
                guard let data = (pair.value ?? "").data(using: encoding) else {
                    throw TransferError(
                        .invalidRequest, "form field \(pair.field) cannot be encoded as \(encoding)", url: request.url)
                }
                form.append(formData: data, name: pair.field)
            }
        }
        do {
            try constructingBody(&form)
        } catch let error as TransferError {
            throw error
        } catch {
            throw TransferError(
                .invalidRequest, "building the multipart body failed: \(error)", url: request.url, underlying: error)
        }
        return try Self.overriding(try form.request(byFinalizing: request), with: headers)
    }

    private static func multipartMethodError(_ method: HTTPMethod, url: URL?) -> TransferError {
        TransferError(.invalidRequest, "a multipart form request needs a method with a body, not \(method)", url: url)
    }

    /// Writes the streamed body of `request` to `fileURL` and returns the
    /// request without a body, its headers (Content-Type, Content-Length)
    /// intact: for an upload from that file (AFNetworking's
    /// `requestWithMultipartFormRequest:writingStreamContentsToFile:completionHandler:`).
    ///
    /// The body is copied in 1 MiB blocks, at full speed (a throttle applies
    /// only when sending). `fileURL` is created or truncated; on failure it is removed.
    ///
    /// - Note: Blocking file I/O; call it off latency-sensitive threads, or use
    ///   the `async` variant.
    /// - Throws: ``TransferError/Code/invalidRequest`` when `request` has no
    ///   streamed body or its stream fails, ``TransferError/Code/fileError``
    ///   when the file cannot be written.
    public func requestWithMultipartForm(_ request: Request, writingStreamContentsToFile fileURL: URL)
        throws(TransferError) -> Request
    {
        guard case .stream(let provider, _)? = request.body else {
            throw TransferError(.invalidRequest, "the request has no streamed body to write", url: request.url)
        }
        guard fileURL.isFileURL else {
            throw TransferError(.invalidRequest, "expected a file URL, got \(fileURL.absoluteString)", url: fileURL)
        }
        guard let stream = provider.makeSource() else {
            throw TransferError(.invalidRequest, "the body stream provider returned no stream", url: request.url)
        }
        (stream as? MultipartBodySource)?.throttle = nil
        do {
            try Self.copy(stream, toFileAt: fileURL.path)
        } catch {
            _ = unlink(fileURL.path)
            throw error
        }
        var result = request
        result.body = nil
        return result
    }

    /// ``requestWithMultipartForm(_:writingStreamContentsToFile:)`` on a
    /// background dispatch queue, so no Swift concurrency thread blocks on disk.
    public func requestWithMultipartForm(_ request: Request, writingStreamContentsToFile fileURL: URL)
        async throws(TransferError) -> Request
    {
        let result: Result<Request, TransferError> = await withCheckedContinuation { continuation in
            DispatchQueue.global(qos: .utility).async {
                do throws(TransferError) {
                    continuation.resume(
                        returning: .success(
                            try self.requestWithMultipartForm(request, writingStreamContentsToFile: fileURL)))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }

    private static func copy(_ stream: any BodySource, toFileAt path: String) throws(TransferError) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw fileError(errno, "cannot create \(path)") }
        defer { _ = close(descriptor) }
        defer { stream.close() }
        let blockSize = 1 << 20
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: blockSize)
        defer { buffer.deallocate() }
        while true {
            let count: Int
            do {
                count = try stream.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: blockSize))
            } catch let error as TransferError {
                throw error
            } catch {
                throw TransferError(.invalidRequest, "the body stream failed: \(error)")
            }
            if count == 0 { break }
            var written = 0
            while written < count {
                let result = write(descriptor, buffer + written, count - written)
                if result < 0 {
                    if errno == EINTR { continue }
                    throw fileError(errno, "cannot write \(path)")
                }
                written += result
            }
        }
        guard fsync(descriptor) == 0 else { throw fileError(errno, "cannot flush \(path)") }
    }

    private static func fileError(_ code: Int32, _ message: String) -> TransferError {
        var error = TransferError(.fileError, "\(message): \(String(cString: strerror(code)))")
        error.systemErrno = code
        return error
    }
}
