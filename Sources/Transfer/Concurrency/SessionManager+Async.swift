import FoundationEssentials
import Synchronization

extension SessionManager {
    /// Sends `request` and returns the body collected by the engine.
    ///
    /// Swift task cancellation cancels the transfer.
    ///
    /// When the `dataTaskDidReceiveResponse` hook (or the delegate) answers
    /// `.becomeDownload`, the body goes to a file through a ``DownloadTask``
    /// that takes the transfer over (it is in ``tasks``; the data task is not).
    /// This call then returns only when that download ends, by throwing:
    /// - ``TransferError/Code/becameDownload`` on success, with
    ///   ``TransferError/downloadTask`` and ``TransferError/fileURL`` set. The
    ///   file is the caller's to move or remove (unless the
    ///   `downloadTaskDidFinishDownloading` hook placed it somewhere);
    /// - the download's own error if it failed, with `downloadTask` set.
    ///
    /// Cancelling the Swift task cancels the download.
    ///
    /// Fast path: when nobody observes beyond the caller (no hook, no
    /// delegate, no observer of the task notifications: see
    /// TransferFoundation's `TransferNotifications`) and the request has no body, no task is
    /// made: the engine's finish resumes the caller at the end of its loop
    /// pass, headers are parsed on first access, and nothing else runs. The
    /// result, errors and cancellation are the same; the request is not in
    /// ``tasks``, and ``invalidateAndCancel()`` still cancels it.
    /// - Throws: ``TransferError``; HTTP error statuses are not errors here.
    public func data(for request: Request) async throws(TransferError) -> (Data, HTTPResponse) {
        if takesFastPath(request) { return try await fastData(for: request) }
        let task = dataTask(with: request)
        return try await run(task) { task, resume in
            DataTask.Waiter { response, data, error in
                resume(Result { () throws(TransferError) -> (Data, HTTPResponse) in
                    if let error { throw error }
                    guard let response else { throw TransferError(.badResponse, "no response", url: request.url) }
                    return (data ?? Data(), response)
                })
            }
        }
    }

    /// Sends `request` and counts the response body without storing it.
    ///
    /// - Returns: The number of body bytes received and the response.
    public func discard(for request: Request) async throws(TransferError) -> (bytes: Int64, response: HTTPResponse) {
        let task = discardingDataTask(with: request)
        return try await run(task) { task, resume in
            DataTask.Waiter { response, _, error in
                resume(Result { () throws(TransferError) -> (bytes: Int64, response: HTTPResponse) in
                    if let error { throw error }
                    guard let response else { throw TransferError(.badResponse, "no response", url: request.url) }
                    return (task.countOfBytesReceived, response)
                })
            }
        }
    }

    /// Uploads the file at `fileURL` (read in large blocks) and returns the response body.
    public func upload(for request: Request, fromFile fileURL: URL) async throws(TransferError) -> (Data, HTTPResponse) {
        try await data(for: request.uploading(.file(fileURL)))
    }

    /// Uploads `bodyData` and returns the response body.
    public func upload(for request: Request, from bodyData: Data) async throws(TransferError) -> (Data, HTTPResponse) {
        try await data(for: request.uploading(.data(bodyData)))
    }

    /// Downloads the body straight to `destination`; no body byte enters Swift.
    ///
    /// Missing folders of `destination` are created (as curl's `--create-dirs`). The
    /// body is written to `<destination>.part` (mode 0600), which becomes
    /// `destination` with mode 0666 less the umask, as curl's files.
    ///
    /// - Returns: The file URL (`destination`) and the response.
    public func download(for request: Request, to destination: URL) async throws(TransferError) -> (URL, HTTPResponse) {
        let task = downloadTask(with: request, to: destination)
        return try await run(task) { task, resume in
            DownloadTask.Waiter { response, url, error in
                resume(Result { () throws(TransferError) -> (URL, HTTPResponse) in
                    if let error { throw error }
                    guard let response, let url else { throw TransferError(.badResponse, "no response", url: request.url) }
                    return (url, response)
                })
            }
        }
    }

    /// Resumes `task`, waits for its completion, and cancels it if the
    /// Swift task is cancelled. The continuation is resumed exactly once.
    func run<T: TransferTask, V: Sendable>(
        _ task: T,
        waiter makeWaiter: (T, @escaping @Sendable (Result<V, TransferError>) -> Void) -> any TaskWaiter
    ) async throws(TransferError) -> V {
        let result: Result<V, TransferError> = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<V, TransferError>, Never>) in
                let once = OnceFlag()
                let waiter = makeWaiter(task) { result in
                    if once.claim() { continuation.resume(returning: result) }
                }
                task.attach(waiter)
                // Cancelled before we got here: cancel() on a task that has not
                // started completes it locally, so the waiter still fires.
                task.resume()
                if Task.isCancelled { task.cancel() }
            }
        } onCancel: {
            task.cancel()
        }
        return try result.get()
    }
}

/// Receives a task's completion instead of (or as well as) its handler.
protocol TaskWaiter: Sendable {
    func taskDidComplete(_ task: TransferTask, error: TransferError?)
}

extension DataTask {
    struct Waiter: TaskWaiter {
        let body: @Sendable (HTTPResponse?, Data?, TransferError?) -> Void
        init(_ body: @escaping @Sendable (HTTPResponse?, Data?, TransferError?) -> Void) { self.body = body }
        func taskDidComplete(_ task: TransferTask, error: TransferError?) {
            body(task.response, (task as? DataTask)?.resultData, error)
        }
    }
}

extension DownloadTask {
    struct Waiter: TaskWaiter {
        let body: @Sendable (HTTPResponse?, URL?, TransferError?) -> Void
        init(_ body: @escaping @Sendable (HTTPResponse?, URL?, TransferError?) -> Void) { self.body = body }
        func taskDidComplete(_ task: TransferTask, error: TransferError?) {
            body(task.response, (task as? DownloadTask)?.fileURL, error)
        }
    }
}
