import Foundation
import Transfer

// AFURLSessionManager's `uploadProgressForTask:` / `downloadProgressForTask:`:
// Foundation `Progress` objects that follow a task. They live here, not in
// Transfer, because Foundation's `Progress` is not in FoundationEssentials. The
// task feeds them through the core's `TaskProgressMirror` seam (the same
// delegate-queue updates that the progress closures get).

extension SessionManager {
    /// The upload `Progress` of `task`: cancelling, pausing or resuming it
    /// acts on the task.
    public func uploadProgress(for task: TransferTask) -> Progress { ProgressPair.of(task).upload }

    /// The download `Progress` of `task` (see ``uploadProgress(for:)``).
    public func downloadProgress(for task: TransferTask) -> Progress { ProgressPair.of(task).download }
}

extension HTTPSessionManager {
    /// The upload `Progress` of `task` (see `SessionManager.uploadProgress(for:)`).
    public func uploadProgress(for task: TransferTask) -> Progress { session.uploadProgress(for: task) }

    /// The download `Progress` of `task` (see `SessionManager.downloadProgress(for:)`).
    public func downloadProgress(for task: TransferTask) -> Progress { session.downloadProgress(for: task) }
}

/// Foundation `Progress` objects of one task, made on first use and wired to
/// it: cancelling, pausing or resuming a Progress cancels, suspends or resumes
/// the task (seed 001 §1.4).
///
/// @unchecked Sendable: `Progress` is thread-safe in Foundation (its unit
/// counts and handlers are guarded by its own lock); the references never change.
final class ProgressPair: TaskProgressMirror, @unchecked Sendable {
    let upload: Progress
    let download: Progress

    /// The pair of `task`, made on first use.
    static func of(_ task: TransferTask) -> ProgressPair {
        task.delegate.progressMirror { ProgressPair(task: task) }
    }

    private init(task: TransferTask) {
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
