import FoundationEssentials

/// A running download for async code: its progress as an `AsyncSequence`
/// beside its result (Alamofire's `downloadProgress` and
/// `serializingDownloadedFileURL().value`).
///
/// ```swift
/// let download = session.download(try Request("https://example.com/big.iso"), to: destination)
/// Task { for await progress in download.progress { meter.update(progress.fractionCompleted) } }
/// let (file, response) = try await download.value
/// ```
///
/// Made by ``SessionManager/download(_:to:)`` and
/// ``SessionManager/download(resumingWith:to:)``; the transfer has started
/// by then. Cancelling a Swift task that awaits ``value`` cancels the
/// download; ``cancelProducingResumeData()`` cancels it keeping what came.
public final class AsyncDownload: Sendable {
    /// The download task underneath (in ``SessionManager/tasks`` while it runs).
    public let task: DownloadTask

    /// Download progress, throttled as every progress callback is (at most
    /// one delivery pending per task), ending when the task completes.
    ///
    /// One consumer: the sequence keeps the newest value only, so a slow
    /// reader skips to the latest progress rather than queueing stale ones.
    /// The last value before the end is the final progress.
    public let progress: AsyncStream<TransferProgress>

    private let outcome = Protected<Outcome>(Outcome())

    /// What the download ended with.
    private typealias Ending = Result<(URL, HTTPResponse), TransferError>

    private struct Outcome {
        var result: Ending?
        var waiting: [CheckedContinuation<Ending, Never>] = []
    }

    /// Observes `task` (progress and completion) and resumes it.
    init(task: DownloadTask) {
        self.task = task
        let (stream, continuation) = AsyncStream.makeStream(of: TransferProgress.self,
                                                            bufferingPolicy: .bufferingNewest(1))
        progress = stream
        let queue = task.session.delegateQueue
        // Both observers run on the delegate queue: the final progress is
        // published there before the completed state, so it precedes the end.
        let progressToken = task.observeProgress(.download, on: queue) { continuation.yield($0) }
        let stateToken = task.observeState(on: queue) { state in
            if state == .completed { continuation.finish() }
        }
        continuation.onTermination = { _ in
            progressToken.cancel()
            stateToken.cancel()
        }
        task.attach(Waiter(download: self))
        task.resume()
        if task.state == .completed { continuation.finish() }
    }

    /// The downloaded file and the response, once the download ends.
    ///
    /// May be awaited any number of times, from any task. Cancelling an
    /// awaiting Swift task cancels the download for everyone.
    /// - Throws: ``TransferError``: the transfer's error, or
    ///   ``TransferError/Code/cancelled`` (also after
    ///   ``cancelProducingResumeData()``). HTTP error statuses are not errors.
    public var value: (url: URL, response: HTTPResponse) {
        get async throws(TransferError) {
            let result = await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Ending, Never>) in
                    let ready = outcome.withLock { outcome -> Ending? in
                        if outcome.result == nil { outcome.waiting.append(continuation) }
                        return outcome.result
                    }
                    if let ready { continuation.resume(returning: ready) }
                }
            } onCancel: {
                task.cancel()
            }
            let (url, response) = try result.get()
            return (url, response)
        }
    }

    /// ``value`` as a `Result`, which never throws (Alamofire's `result`).
    public var result: Result<(url: URL, response: HTTPResponse), TransferError> {
        get async {
            do throws(TransferError) {
                return .success(try await value)
            } catch {
                return .failure(error)
            }
        }
    }

    /// Cancels the download.
    public func cancel() {
        task.cancel()
    }

    /// Cancels the download keeping what was written, and returns resume data
    /// for ``SessionManager/download(resumingWith:to:)``, or nil when nothing
    /// can be resumed (no validator, nothing received, or already finished).
    /// ``value`` then throws ``TransferError/Code/cancelled``.
    public func cancelProducingResumeData() async -> Data? {
        await withCheckedContinuation { continuation in
            task.cancel(byProducingResumeData: { continuation.resume(returning: $0) })
        }
    }

    private func complete(_ result: Ending) {
        let waiting = outcome.withLock { outcome in
            defer { outcome.waiting.removeAll() }
            if outcome.result == nil { outcome.result = result }
            return outcome.waiting
        }
        for continuation in waiting { continuation.resume(returning: result) }
    }

    /// Receives the task's completion (engine or completion path).
    private struct Waiter: TaskWaiter {
        let download: AsyncDownload

        func taskDidComplete(_ task: TransferTask, error: TransferError?) {
            let result = Ending { () throws(TransferError) -> (URL, HTTPResponse) in
                if let error { throw error }
                guard let response = task.response, let url = (task as? DownloadTask)?.fileURL else {
                    throw TransferError(.badResponse, "the download ended without a file",
                                        url: task.originalRequest.url)
                }
                return (url, response)
            }
            download.complete(result)
        }
    }
}

extension SessionManager {
    /// Starts downloading `request` to `destination` and returns the running
    /// download, with its ``AsyncDownload/progress`` and ``AsyncDownload/value``.
    ///
    /// As ``download(for:to:)``: the body goes to `<destination>.part` and is
    /// renamed to `destination` on success; missing folders are created.
    public func download(_ request: Request, to destination: URL) -> AsyncDownload {
        AsyncDownload(task: downloadTask(with: request, to: destination, progress: nil, completionHandler: nil))
    }

    /// Continues a download from resume data made by
    /// ``AsyncDownload/cancelProducingResumeData()`` (or
    /// ``DownloadTask/cancel(byProducingResumeData:)``), with `Range` and
    /// `If-Range`; a server that ignores the range, or a file that changed,
    /// restarts from zero. The finished file replaces any at `destination`.
    ///
    /// - Throws: ``TransferError/Code/invalidResumeData`` at once for corrupt
    ///   or foreign data, or a partial file that is gone.
    public func download(resumingWith resumeData: Data, to destination: URL) throws(TransferError)
        -> AsyncDownload
    {
        let task = try downloadTask(withResumeData: resumeData, progress: nil,
                                    destination: { _, _ in destination }, completionHandler: nil)
        task.replacesExistingFile = true
        return AsyncDownload(task: task)
    }
}
