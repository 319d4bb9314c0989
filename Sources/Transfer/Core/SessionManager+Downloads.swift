import FoundationEssentials

extension SessionManager {
    /// A download to `destination` with ``DownloadOptions``: resumable across
    /// process restarts, checked against an expected SHA-256, rate-limited.
    ///
    /// With `options.resumable`, a task for the same URL and destination
    /// finds `<destination>.part` and its journal and continues with `Range`
    /// and `If-Range` (the CLI's `--resume` calls this).
    ///
    /// - Returns: A suspended task: call ``TransferTask/resume()``.
    /// - Note: Progress runs on ``delegateQueue``, the completion handler on
    ///   ``completionQueue``.
    public func downloadTask(with request: Request, to destination: URL, options: DownloadOptions,
                             progress: (@Sendable (TransferProgress) -> Void)? = nil,
                             completionHandler: DownloadTask.CompletionHandler? = nil) -> DownloadTask
    {
        let delegate = TaskDelegate(uploadProgress: nil, downloadProgress: progress)
        let task = DownloadTask(session: self, identifier: nextIdentifier(), request: request, delegate: delegate,
                                fixedDestination: destination, destination: nil, resume: nil, options: options,
                                completionHandler: completionHandler)
        return register(task)
    }

    /// Same as ``downloadTask(with:to:options:progress:completionHandler:)``
    /// with only `resumable` set.
    public func downloadTask(with request: Request, to destination: URL, resumable: Bool,
                             progress: (@Sendable (TransferProgress) -> Void)? = nil,
                             completionHandler: DownloadTask.CompletionHandler? = nil) -> DownloadTask
    {
        downloadTask(with: request, to: destination, options: DownloadOptions(resumable: resumable),
                     progress: progress, completionHandler: completionHandler)
    }
}
