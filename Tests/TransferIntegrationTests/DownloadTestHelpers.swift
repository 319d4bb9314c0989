import Dispatch
import Foundation
import Synchronization
import TestSupport
import Transfer

/// What a download completion handler received.
struct DownloadOutcome: Sendable {
    var response: HTTPResponse?
    var url: URL?
    var error: TransferError?
}

/// A one-shot result delivered by a callback and awaited by the test, with a deadline.
final class Completion<Value: Sendable>: Sendable {
    init() {}
    private let state = Locked<(value: Value?, waiter: CheckedContinuation<Value?, Never>?)>((nil, nil))

    func fulfil(_ value: Value) {
        let waiter = state.withLock { state -> CheckedContinuation<Value?, Never>? in
            guard state.value == nil else { return nil }
            state.value = value
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: value)
    }

    /// The value, or nil when `timeout` passed first.
    func wait(timeout: Duration = defaultDeadline) async -> Value? {
        let deadline = DispatchTime.now() + .nanoseconds(Int(timeout.components.seconds * 1_000_000_000))
        return await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Value?? in
                if let value = state.value { return .some(value) }
                state.waiter = continuation
                return .none
            }
            if case .some(let value) = ready {
                continuation.resume(returning: value)
                return
            }
            DispatchQueue.global().asyncAfter(deadline: deadline) { [self] in
                let waiter = state.withLock { state -> CheckedContinuation<Value?, Never>? in
                    defer { state.waiter = nil }
                    return state.waiter
                }
                waiter?.resume(returning: nil)
            }
        }
    }
}

enum DownloadTestError: Error { case timedOut(String) }

/// scripts/test.sh sets TRANSFER_TEST_SANITIZER=1 for its TSan/ASan runs: big payloads shrink
/// and deadlines grow, since everything runs several times slower.
let underSanitizer = ProcessInfo.processInfo.environment["TRANSFER_TEST_SANITIZER"] != nil

/// The default deadline of a download or upload in these tests.
let defaultDeadline: Duration = underSanitizer ? .seconds(600) : .seconds(60)

extension Completion where Value == DownloadOutcome {
    var handler: DownloadTask.CompletionHandler {
        { [self] response, url, error in fulfil(DownloadOutcome(response: response, url: url, error: error)) }
    }

    func result(timeout: Duration = defaultDeadline) async throws -> DownloadOutcome {
        guard let value = await wait(timeout: timeout) else { throw DownloadTestError.timedOut("download") }
        return value
    }
}

extension DownloadTask {
    /// Calls `action` once, on the session's delegate queue, when at least `bytes` were received.
    func whenReceived(_ bytes: Int64, _ action: @escaping @Sendable (DownloadTask) -> Void) {
        let fired = Atomic<Bool>(false)
        observeProgress(.download, on: DispatchQueue.global()) { [self] progress in
            if progress.completedUnitCount >= bytes, !fired.exchange(true, ordering: .relaxed) { action(self) }
        }
    }
}

func fileSize(_ url: URL) -> Int64 {
    ((try? FileManager.default.attributesOfItem(atPath: url.path))?[.size] as? NSNumber)?.int64Value ?? -1
}

func exists(_ url: URL) -> Bool { FileManager.default.fileExists(atPath: url.path) }
func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }
