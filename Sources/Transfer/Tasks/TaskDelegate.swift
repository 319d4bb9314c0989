import Dispatch
import FoundationEssentials
import Synchronization

/// The per-task companion of AFURLSessionManagerTaskDelegate: the progress
/// closures, the progress mirror (TransferFoundation's `Progress` objects) and
/// the completion given at creation. Immutable but for the lazily made mirror.
package final class TaskDelegate: Sendable {
    let uploadProgressHandler: (@Sendable (TransferProgress) -> Void)?
    let downloadProgressHandler: (@Sendable (TransferProgress) -> Void)?
    private let progressMirror = Protected<(any TaskProgressMirror)?>(nil)
    private let listening: Atomic<Bool>

    init(uploadProgress: (@Sendable (TransferProgress) -> Void)?,
         downloadProgress: (@Sendable (TransferProgress) -> Void)?)
    {
        uploadProgressHandler = uploadProgress
        downloadProgressHandler = downloadProgress
        listening = Atomic(uploadProgress != nil || downloadProgress != nil)
    }

    /// True when someone wants progress (closures or a mirror).
    var hasProgressListeners: Bool { listening.load(ordering: .relaxed) }

    /// The task's progress mirror, made by `make` on first use (one per task:
    /// every later call returns the first one; a package has one mirror type).
    package func progressMirror<Mirror: TaskProgressMirror>(make: () -> Mirror) -> Mirror {
        let mirror = progressMirror.withLock { mirror -> any TaskProgressMirror in
            if let mirror { return mirror }
            let made = make()
            mirror = made
            return made
        }
        listening.store(true, ordering: .relaxed)
        // Only TransferFoundation makes mirrors, all of one type.
        return mirror as! Mirror
    }

    /// The counts last handed to each closure: a direction whose counts did
    /// not move is not reported again (100 % arrives exactly once).
    private let lastDelivered = Protected<(upload: [Int64], download: [Int64])>(([], []))

    /// On the delegate queue.
    func progressDidChange(task: TransferTask, upload: TransferProgress, download: TransferProgress) {
        if let mirror = progressMirror.withLock({ $0 }) {
            mirror.update(upload: upload, download: download)
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

/// A copy of a task's progress kept by another module of the package:
/// TransferFoundation's pair of Foundation `Progress` objects. The core knows
/// only this protocol, so that it needs no Foundation `Progress`.
package protocol TaskProgressMirror: AnyObject, Sendable {
    /// On the delegate queue, with the task's latest counts.
    func update(upload: TransferProgress, download: TransferProgress)
}
