import FoundationEssentials

// The task factories: AFURLSessionManager's data, upload and download task
// calls, and the internal makers the other APIs build on.

extension SessionManager {
    // MARK: - Creating tasks

    /// A data task: the body is collected in the engine and handed over once.
    ///
    /// - Parameters:
    ///   - request: The request to send.
    ///   - uploadProgress: Called on ``delegateQueue``, throttled, as the body goes out.
    ///   - downloadProgress: Called on ``delegateQueue``, throttled, as the body comes in.
    ///   - completionHandler: Called once on ``completionQueue``.
    /// - Returns: A suspended task: call ``TransferTask/resume()``.
    public func dataTask(with request: Request,
                         uploadProgress: (@Sendable (TransferProgress) -> Void)? = nil,
                         downloadProgress: (@Sendable (TransferProgress) -> Void)? = nil,
                         completionHandler: DataTask.CompletionHandler? = nil) -> DataTask
    {
        let delegate = TaskDelegate(uploadProgress: uploadProgress, downloadProgress: downloadProgress)
        if case .some(let body) = request.body {
            let task = UploadTask(session: self, identifier: nextIdentifier(), request: request, body: body,
                                  delegate: delegate, completionHandler: completionHandler)
            return register(task)
        }
        let task = DataTask(session: self, identifier: nextIdentifier(), request: request, delegate: delegate,
                            completionHandler: completionHandler)
        return register(task)
    }

    /// A data task whose completion handler gets the response serialized by
    /// ``responseSerializer``, as AFNetworking's `dataTaskWithRequest:…completionHandler:`.
    ///
    /// - Parameters:
    ///   - request: The request to send; a body makes it an upload task.
    ///   - uploadProgress: Called on ``delegateQueue`` as the body goes out.
    ///   - downloadProgress: Called on ``delegateQueue`` as the body comes in.
    ///   - serializedCompletionHandler: Called once on ``completionQueue`` with
    ///     the serialized value, or nil and the transfer's or serializer's error.
    /// - Returns: A suspended task: call ``TransferTask/resume()``.
    public func dataTask(with request: Request,
                         uploadProgress: (@Sendable (TransferProgress) -> Void)? = nil,
                         downloadProgress: (@Sendable (TransferProgress) -> Void)? = nil,
                         serializedCompletionHandler: @escaping SerializedCompletionHandler) -> DataTask
    {
        let delegate = TaskDelegate(uploadProgress: uploadProgress, downloadProgress: downloadProgress)
        var ending = DataTask.Ending()
        ending.serialized = { task, result in
            switch result {
            case .success(let value): serializedCompletionHandler(task.response, value, nil)
            case .failure(let failure): serializedCompletionHandler(task.response, nil, failure)
            }
        }
        return makeDataTask(request, delegate: delegate, completionHandler: nil, ending: ending)
    }

    /// A data task, or an upload task when `request` has a body (a streamed
    /// body as it is; GET becomes POST only through the `uploadTask` calls).
    func makeDataTask(_ request: Request, delegate: TaskDelegate, completionHandler: DataTask.CompletionHandler?,
                      ending: DataTask.Ending = DataTask.Ending()) -> DataTask
    {
        if case .some(let body) = request.body {
            return register(UploadTask(session: self, identifier: nextIdentifier(), request: request, body: body,
                                       delegate: delegate, completionHandler: completionHandler, ending: ending))
        }
        return register(DataTask(session: self, identifier: nextIdentifier(), request: request, delegate: delegate,
                                 completionHandler: completionHandler, ending: ending))
    }

    /// A data task with only a completion handler (reads as AFNetworking's
    /// `dataTaskWithRequest:completionHandler:`; a trailing closure lands here).
    public func dataTask(with request: Request, completionHandler: @escaping DataTask.CompletionHandler) -> DataTask {
        dataTask(with: request, uploadProgress: nil, downloadProgress: nil, completionHandler: completionHandler)
    }

    /// A data task that counts the response body and stores none of it: the
    /// completion gets `nil` data; ``TransferTask/countOfBytesReceived`` says
    /// how much arrived. For benchmarks and health checks.
    public func discardingDataTask(with request: Request,
                                   downloadProgress: (@Sendable (TransferProgress) -> Void)? = nil,
                                   completionHandler: DataTask.CompletionHandler? = nil) -> DataTask
    {
        let delegate = TaskDelegate(uploadProgress: nil, downloadProgress: downloadProgress)
        let task = DataTask(session: self, identifier: nextIdentifier(), request: request, delegate: delegate,
                            discardsBody: true, completionHandler: completionHandler)
        return register(task)
    }

    /// An upload task whose body is read from `fileURL` in large blocks.
    public func uploadTask(with request: Request, fromFile fileURL: URL,
                           progress: (@Sendable (TransferProgress) -> Void)? = nil,
                           completionHandler: DataTask.CompletionHandler? = nil) -> UploadTask
    {
        makeUpload(request, body: .file(fileURL), progress: progress, completionHandler: completionHandler)
    }

    /// An upload task from a file, with only a completion handler.
    public func uploadTask(with request: Request, fromFile fileURL: URL,
                           completionHandler: @escaping DataTask.CompletionHandler) -> UploadTask
    {
        uploadTask(with: request, fromFile: fileURL, progress: nil, completionHandler: completionHandler)
    }

    /// An upload task from data, with only a completion handler.
    public func uploadTask(with request: Request, from bodyData: Data,
                           completionHandler: @escaping DataTask.CompletionHandler) -> UploadTask
    {
        uploadTask(with: request, from: bodyData, progress: nil, completionHandler: completionHandler)
    }

    /// An upload task whose body is `bodyData`.
    public func uploadTask(with request: Request, from bodyData: Data,
                           progress: (@Sendable (TransferProgress) -> Void)? = nil,
                           completionHandler: DataTask.CompletionHandler? = nil) -> UploadTask
    {
        makeUpload(request, body: .data(bodyData), progress: progress, completionHandler: completionHandler)
    }

    /// An upload task whose body is the request's stream body
    /// (`Request.Body.stream`); the `taskNeedNewBodyStream` hook supplies a
    /// fresh stream when the body must be sent again.
    public func uploadTask(withStreamedRequest request: Request,
                           progress: (@Sendable (TransferProgress) -> Void)? = nil,
                           completionHandler: DataTask.CompletionHandler? = nil) -> UploadTask
    {
        let body = request.body ?? .data(Data())
        return makeUpload(request, body: body, progress: progress, completionHandler: completionHandler)
    }

    private func makeUpload(_ request: Request, body: Request.Body,
                            progress: (@Sendable (TransferProgress) -> Void)?,
                            completionHandler: DataTask.CompletionHandler?) -> UploadTask
    {
        let request = request.uploading(body)
        let delegate = TaskDelegate(uploadProgress: progress, downloadProgress: nil)
        let task = UploadTask(session: self, identifier: nextIdentifier(), request: request, body: body,
                              delegate: delegate, completionHandler: completionHandler)
        return register(task)
    }

    /// A download task: the body goes to disk from the engine.
    ///
    /// - Parameters:
    ///   - request: The request to send.
    ///   - progress: Called on ``delegateQueue`` as the body comes in.
    ///   - destination: Called on ``delegateQueue`` when the download finished,
    ///     with the temporary file and the response; the file is moved there.
    ///   - completionHandler: Called once on ``completionQueue`` with the final
    ///     file URL. Without a destination the file is removed after the call.
    public func downloadTask(with request: Request,
                             progress: (@Sendable (TransferProgress) -> Void)? = nil,
                             destination: DownloadTask.Destination? = nil,
                             completionHandler: DownloadTask.CompletionHandler? = nil) -> DownloadTask
    {
        let delegate = TaskDelegate(uploadProgress: nil, downloadProgress: progress)
        let task = DownloadTask(session: self, identifier: nextIdentifier(), request: request, delegate: delegate,
                                fixedDestination: nil, destination: destination, resume: nil,
                                completionHandler: completionHandler)
        return register(task)
    }

    /// A download task that writes `<destination>.part` and renames it to
    /// `destination` on success (nothing is left there on failure).
    ///
    /// Missing folders of `destination` are created. The part file is 0600;
    /// the placed file gets mode 0666 less the umask, as curl's files.
    public func downloadTask(with request: Request, to destination: URL,
                             progress: (@Sendable (TransferProgress) -> Void)? = nil,
                             completionHandler: DownloadTask.CompletionHandler? = nil) -> DownloadTask
    {
        let delegate = TaskDelegate(uploadProgress: nil, downloadProgress: progress)
        let task = DownloadTask(session: self, identifier: nextIdentifier(), request: request, delegate: delegate,
                                fixedDestination: destination, destination: nil, resume: nil,
                                completionHandler: completionHandler)
        return register(task)
    }

    /// A download to a fixed destination with only a completion handler.
    public func downloadTask(with request: Request, to destination: URL,
                             completionHandler: @escaping DownloadTask.CompletionHandler) -> DownloadTask
    {
        downloadTask(with: request, to: destination, progress: nil, completionHandler: completionHandler)
    }

    /// A download with a destination closure and a completion handler (no progress closure).
    public func downloadTask(with request: Request, destination: DownloadTask.Destination?,
                             completionHandler: @escaping DownloadTask.CompletionHandler) -> DownloadTask
    {
        downloadTask(with: request, progress: nil, destination: destination, completionHandler: completionHandler)
    }

    /// Continues a download from resume data made by
    /// ``DownloadTask/cancel(byProducingResumeData:)``: `Range` + `If-Range`;
    /// a server that ignores the range or a changed file restarts from zero.
    ///
    /// - Throws: ``TransferError/Code/invalidResumeData`` for corrupt or
    ///   foreign data, or a partial file that is gone.
    public func downloadTask(withResumeData resumeData: Data,
                             progress: (@Sendable (TransferProgress) -> Void)? = nil,
                             destination: DownloadTask.Destination? = nil,
                             completionHandler: DownloadTask.CompletionHandler? = nil) throws(TransferError)
        -> DownloadTask
    {
        let resume = try ResumeData.decode(resumeData, temporaryFolder: temporaryDirectory.path)
        let delegate = TaskDelegate(uploadProgress: nil, downloadProgress: progress)
        let task = DownloadTask(session: self, identifier: nextIdentifier(), request: resume.request,
                                delegate: delegate, fixedDestination: nil, destination: destination, resume: resume,
                                completionHandler: completionHandler)
        return register(task)
    }

    /// The download task that takes `dataTask`'s transfer (`engineID`) over
    /// after `.becomeDownload`: same request, delegate and counters. Not
    /// registered until ``adopt(_:from:)``.
    func makeAdoptedDownloadTask(from dataTask: DataTask, response: HTTPResponse, engineID: UInt64) -> DownloadTask {
        let task = DownloadTask(session: self, identifier: nextIdentifier(), request: dataTask.originalRequest,
                                delegate: dataTask.delegate, fixedDestination: nil, destination: nil, resume: nil,
                                completionHandler: nil, adopting: (dataTask, engineID))
        task.core.withLock { core in
            core.response = response
            core.currentRequest = dataTask.currentRequest
            core.upload = dataTask.progress(.upload)
            core.download = dataTask.progress(.download)
        }
        return task
    }

    /// The task lists show the download instead of the data task it took over.
    func adopt(_ download: DownloadTask, from dataTask: DataTask) {
        state.withLock { state in
            state.tasks[download.taskIdentifier] = download
            state.tasks.removeValue(forKey: dataTask.taskIdentifier)
        }
    }
}

extension Request {
    /// This request with `body` as its upload: a GET becomes a POST (URLSession's
    /// rule for upload tasks); any other method stays.
    func uploading(_ body: Body) -> Request {
        var request = bodyCarrying()
        request.body = body
        return request
    }
}
