import Dispatch
import FoundationEssentials
import Glibc

/// A task's attempts: how many were sent, the metrics of the finished ones,
/// and what a failed one left. (The interceptor work between two attempts
/// is the task's own state: ``TransferTask/Core/pendingAttempt``.)
///
/// @unchecked Sendable: every field is behind `state`, a Protected lock.
final class AttemptLedger: @unchecked Sendable {
    private struct State {
        var count = 0
        var metrics: [TaskMetrics] = []
        /// What the last failed attempt left, removed when the task retries
        /// or is cancelled before the next attempt.
        var leftovers: Leftovers?
    }

    /// What a failed attempt produced: a body it received (its status was
    /// retryable; a download wrote it to `file`), or only partial chunks.
    struct Leftovers {
        var file: String?
        /// Whether a response body was received whole (discard the hop's result).
        var receivedBody: Bool
    }

    private let state = Protected(State())

    var count: Int { state.withLock { $0.count } }
    var metrics: [TaskMetrics] { state.withLock { $0.metrics } }

    /// Counts an attempt about to be submitted; returns its number (1-based).
    func begin() -> Int {
        state.withLock { state in
            state.count += 1
            return state.count
        }
    }

    /// Records a finished attempt's metrics; returns how many attempts were made.
    func finished(_ metrics: TaskMetrics, leftovers: Leftovers) -> Int {
        state.withLock { state in
            state.metrics.append(metrics)
            state.leftovers = leftovers
            return state.count
        }
    }

    /// What the failed attempt left, once.
    func takeLeftovers() -> Leftovers? {
        state.withLock { state in
            defer { state.leftovers = nil }
            return state.leftovers
        }
    }
}

extension TransferTask {
    /// Attempts sent so far: 1 for a task that was never retried, 0 before
    /// its first attempt (an interceptor's adapter may still be running).
    public var attemptCount: Int { attempts.count }

    /// The metrics of each failed attempt handed to the retrier, oldest
    /// first. The last attempt's are ``metrics`` (whose
    /// ``TaskMetrics/attempts`` counts all of them).
    public var attemptMetrics: [TaskMetrics] { attempts.metrics }

    /// The session's interceptor, then the request's (nil: neither is set,
    /// and the task takes no detour through Swift concurrency).
    var interceptor: (any RequestInterceptor)? {
        Interceptor.composing(session.configuration.interceptor, originalRequest.interceptor)
    }

    /// Whether the body can be sent again (not a stream).
    private var canReplayBody: Bool {
        !((self as? UploadTask)?.hasStreamedBody ?? false)
    }

    /// First attempt: with an interceptor, the adapter runs before the request
    /// is submitted. Returns false when there is none (submit directly).
    func startFirstAttempt() -> Bool {
        guard let interceptor else {
            _ = attempts.begin()
            return false
        }
        guard core.withLock({ $0.life.awaitAttempt() }) else { return false }
        setPendingAttempt(Task { [self] in await adaptAndSubmit(interceptor) })
        return true
    }

    /// On the delegate queue, after a hop that ended without a follow-up:
    /// asks the retrier when the attempt failed. Returns false when the
    /// outcome is the result (complete with it as before).
    func considerRetry(after outcome: Outcome) -> Bool {
        guard let interceptor, canReplayBody else { return false }
        let response = self.response
        var judged: TransferError
        if let error = outcome.error(url: originalRequest.url) {
            guard error.code != .cancelled else { return false }
            judged = error
            judged.response = response
        } else if let response, response.statusCode >= 400 {
            judged = TransferError(.unacceptableStatusCode, "HTTP \(response.statusCode)", url: response.url)
            judged.httpStatus = response.statusCode
            judged.response = response
        } else {
            return false
        }
        guard core.withLock({ $0.life.awaitAttempt() }) else { return false }
        let failure = judged
        // A download's transport failure left nothing (the engine removed
        // its part file, or kept it with the journal to resume from).
        let leftovers = AttemptLedger.Leftovers(file: outcome.succeeded ? outcome.filePath : nil,
                                                receivedBody: outcome.succeeded || !(self is DownloadTask))
        let count = attempts.finished(outcome.metrics, leftovers: leftovers)
        let request = currentRequest ?? originalRequest
        let session = self.session
        let work = Task { [self] in
            let decision = await interceptor.retry(request, for: session, dueTo: failure, response: response,
                                                   attempt: count)
            switch decision {
            case .doNotRetry:
                onDelegateQueue { task in
                    if task.core.withLock({ $0.life.endAttempts() }) { task.complete(with: outcome) }
                }
            case .doNotRetryWithError(let underlying):
                var failed = TransferError(.requestRetryFailed, "the retrier failed the request: \(underlying)",
                                           url: originalRequest.url, underlying: underlying)
                failed.response = response
                let error = failed
                onDelegateQueue { task in
                    guard task.core.withLock({ $0.life.endAttempts() }) else { return }
                    // A failed task leaves nothing at a download's destination.
                    task.discardFailedAttempt()
                    task.complete(error: error, outcome: outcome)
                }
            case .retry, .retryAfter:
                for observer in requestObservers { observer.requestWillRetry(attempt: count, after: failure) }
                session.observation.task(self, willRetry: count, after: failure)
                // What the failed attempt produced goes before the wait: a
                // cancel during it must not leave it behind either.
                onDelegateQueue { $0.discardFailedAttempt() }
                if case .retryAfter(let delay) = decision, delay > .zero {
                    do {
                        try await Task.sleep(for: delay)
                    } catch {
                        return   // cancelled: the cancel completed the task
                    }
                }
                await adaptAndSubmit(interceptor)
            }
        }
        setPendingAttempt(work)
        return true
    }

    /// Adapts the original request for the next attempt, then submits it on
    /// the delegate queue (unless the task was cancelled meanwhile).
    private func adaptAndSubmit(_ interceptor: any RequestInterceptor) async {
        guard !Task.isCancelled else { return }
        let adapted: Request
        do {
            adapted = try await interceptor.adapt(originalRequest, for: session)
        } catch {
            let failure = TransferError(.requestAdaptationFailed, "the adapter failed the request: \(error)",
                                        url: originalRequest.url, underlying: error)
            session.observation.task(self, didAdapt: originalRequest, result: .failure(failure))
            onDelegateQueue { task in
                if task.core.withLock({ $0.life.endAttempts() }) { task.complete(error: failure, outcome: nil) }
            }
            return
        }
        session.observation.task(self, didAdapt: originalRequest, result: .success(adapted))
        onDelegateQueue { task in
            guard task.core.withLock({ $0.life.attemptReady() }) else { return }
            _ = task.attempts.begin()
            task.core.withLock { core in
                // A new attempt starts from the original request: its own
                // redirects and 401 answers are counted afresh.
                core.currentRequest = adapted
                core.response = nil
                core.redirects = 0
                core.challenges = 0
            }
            task.submit(adapted)
        }
    }

    /// Removes what a failed attempt produced: streamed chunks, a body
    /// written to the destination (its status was retryable).
    func discardFailedAttempt() {
        guard let leftovers = attempts.takeLeftovers() else { return }
        if leftovers.receivedBody { discardHopResult() }
        if let file = leftovers.file { unlink(file) }
    }

    /// After a cancel between attempts: stops the interceptor work and
    /// removes what the failed attempt produced.
    func cancelBetweenAttempts() {
        let work = core.withLock { core in
            defer { core.pendingAttempt = nil }
            return core.pendingAttempt
        }
        work?.cancel()
        discardFailedAttempt()
    }

    /// Keeps the interceptor work of the attempt being prepared, under the
    /// same lock as the task's state: a cancel takes and stops it
    /// (``cancelBetweenAttempts()``). Work that arrives once the task left
    /// the wait (a cancel came first) is stopped at once.
    private func setPendingAttempt(_ work: Task<Void, Never>) {
        let kept = core.withLock { core -> Bool in
            guard core.life.isAwaitingAttempt else { return false }
            core.pendingAttempt = work
            return true
        }
        if !kept { work.cancel() }
    }

    private func onDelegateQueue(_ body: @escaping @Sendable (TransferTask) -> Void) {
        session.delegateQueue.async { [self] in body(self) }
    }
}
