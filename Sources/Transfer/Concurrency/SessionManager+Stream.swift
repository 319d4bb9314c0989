import FoundationEssentials

extension SessionManager {
    /// The default ``stream(for:bufferSize:)`` buffer: 1 MiB.
    public static let defaultStreamBufferSize = 1 << 20

    /// Sends `request` and returns, once the response head has arrived, the
    /// head and the body as an `AsyncSequence` of chunks with backpressure
    /// (Alamofire's `DataStreamRequest`, AsyncHTTPClient's response body).
    ///
    /// ```swift
    /// let (response, body) = try await session.stream(for: request)
    /// for try await chunk in body { try file.write(contentsOf: chunk) }
    /// ```
    ///
    /// Backpressure: up to `bufferSize` bytes wait for the consumer; then the
    /// transfer is paused in the engine (its socket is not read; the session's
    /// other transfers go on) until the consumer has read the buffer down to
    /// half. Memory stays bounded by `bufferSize` plus one read of libcurl
    /// (16 KiB) whatever the body's size: the body is not kept anywhere else,
    /// and ``SessionConfiguration/maximumResponseBodySize`` does not apply.
    /// The transfer goes over HTTP/1.1 on a connection of its own, even on a
    /// session that prefers HTTP/2: a paused HTTP/2 stream still receives what
    /// its flow-control window allows, and libcurl 7.88 kept 33 MB for one
    /// held stream (other streams of the connection went on), whereas pausing
    /// HTTP/1.1 stops reading the socket.
    ///
    /// As ``data(for:)``: HTTP error statuses are not errors (the head and its
    /// body are delivered); the session's hooks and delegate see the task
    /// (response disposition, progress, completion), but the
    /// `dataTaskDidReceiveData` hook gets no chunks: they are the stream's.
    /// Redirects are followed by the engine; Swift-side follow-ups (manual
    /// redirects, challenge answers, retries by an interceptor) are not made,
    /// since the head is final once returned.
    ///
    /// Cancelling the Swift task that waits here or in the stream's `next()`,
    /// dropping the stream's iterator before the end (leaving the loop), or
    /// ``TransferTask/cancel()`` on ``ResponseBodyStream/task`` cancels the
    /// transfer.
    ///
    /// - Parameters:
    ///   - request: The request to send (with or without a body).
    ///   - bufferSize: The high-water mark of the chunk buffer in bytes (at
    ///     least 1); the transfer continues at half of it.
    /// - Returns: The response head and the body's chunks.
    /// - Throws: ``TransferError`` when the transfer fails before the head
    ///   arrived (cannot connect, TLS, timed out, cancelled...); later
    ///   failures are thrown by the stream's iterator.
    public func stream(for request: Request, bufferSize: Int = defaultStreamBufferSize)
        async throws(TransferError) -> (HTTPResponse, ResponseBodyStream)
    {
        let buffer = ResponseBodyBuffer(highWaterMark: bufferSize, url: request.url)
        let delegate = TaskDelegate(uploadProgress: nil, downloadProgress: nil)
        let task: DataTask
        if case .some(let body) = request.body {
            task = register(UploadTask(session: self, identifier: nextIdentifier(), request: request, body: body,
                                       delegate: delegate, bodyBuffer: buffer, completionHandler: nil))
        } else {
            task = register(DataTask(session: self, identifier: nextIdentifier(), request: request,
                                     delegate: delegate, bodyBuffer: buffer, completionHandler: nil))
        }
        // From here the owner cancels the transfer if the caller never reads the body.
        let owner = StreamOwner(buffer: buffer, task: task)
        let head: Result<HTTPResponse, TransferError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                buffer.waitForHead(continuation)
                task.resume()
                // Cancelled before the handler was installed: cancel() on a task
                // that has not started completes it locally, which resumes us.
                if Task.isCancelled { task.cancel() }
            }
        } onCancel: {
            task.cancel()
        }
        return (try head.get(), ResponseBodyStream(owner: owner))
    }
}
