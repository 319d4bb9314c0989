import Dispatch
import Foundation
import Synchronization

/// The per-task companion of AFURLSessionManagerTaskDelegate: the progress
/// closures, the Foundation `Progress` objects and the completion given at
/// creation. Immutable but for the lazily made `Progress` objects.
final class TaskDelegate: Sendable {
    let uploadProgressHandler: (@Sendable (TransferProgress) -> Void)?
    let downloadProgressHandler: (@Sendable (TransferProgress) -> Void)?
    private let progressObjects = Protected<ProgressPair?>(nil)
    private let listening: Atomic<Bool>

    init(uploadProgress: (@Sendable (TransferProgress) -> Void)?,
         downloadProgress: (@Sendable (TransferProgress) -> Void)?)
    {
        uploadProgressHandler = uploadProgress
        downloadProgressHandler = downloadProgress
        listening = Atomic(uploadProgress != nil || downloadProgress != nil)
    }

    /// True when someone wants progress (closures or Progress objects).
    var hasProgressListeners: Bool { listening.load(ordering: .relaxed) }

    /// The Foundation Progress pair, made on first use and wired to the task:
    /// cancelling, pausing or resuming a Progress cancels, suspends or
    /// resumes the task (seed 001 §1.4).
    func progressObjects(for task: TransferTask) -> ProgressPair {
        let pair = progressObjects.withLock { pair -> ProgressPair in
            if let pair { return pair }
            let made = ProgressPair(task: task)
            pair = made
            return made
        }
        listening.store(true, ordering: .relaxed)
        return pair
    }

    /// The counts last handed to each closure: a direction whose counts did
    /// not move is not reported again (100 % arrives exactly once).
    private let lastDelivered = Protected<(upload: [Int64], download: [Int64])>(([], []))

    /// On the delegate queue.
    func progressDidChange(task: TransferTask, upload: TransferProgress, download: TransferProgress) {
        if let pair = progressObjects.withLock({ $0 }) {
            pair.update(upload: upload, download: download)
        }
        let (newUpload, newDownload) = lastDelivered.withLock { last -> (Bool, Bool) in
            let up = [upload.completedUnitCount, upload.totalUnitCount]
            let down = [download.completedUnitCount, download.totalUnitCount]
            defer { last = (up, down) }
            return (up != last.upload, down != last.download)
        }
        if newUpload, let handler = uploadProgressHandler, upload.totalUnitCount != 0 || upload.completedUnitCount != 0 {
            handler(upload)
        }
        if newDownload { downloadProgressHandler?(download) }
    }
}

/// Foundation `Progress` objects of one task.
///
/// @unchecked Sendable: `Progress` is thread-safe in Foundation (its unit
/// counts and handlers are guarded by its own lock); the references never change.
final class ProgressPair: @unchecked Sendable {
    let upload: Progress
    let download: Progress

    init(task: TransferTask) {
        upload = Progress(parent: nil, userInfo: nil)
        download = Progress(parent: nil, userInfo: nil)
        for progress in [upload, download] {
            progress.totalUnitCount = -1
            progress.isCancellable = true
            progress.isPausable = true
            progress.cancellationHandler = { [weak task] in task?.cancel() }
            progress.pausingHandler = { [weak task] in task?.suspend() }
            progress.resumingHandler = { [weak task] in task?.resume() }
        }
    }

    func update(upload u: TransferProgress, download d: TransferProgress) {
        upload.totalUnitCount = u.totalUnitCount
        upload.completedUnitCount = u.completedUnitCount
        download.totalUnitCount = d.totalUnitCount
        download.completedUnitCount = d.completedUnitCount
    }
}
