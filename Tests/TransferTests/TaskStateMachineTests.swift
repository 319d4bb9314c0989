import Testing

@testable import Transfer

/// Stands in for the download task a data task hands its transfer to.
private final class Successor: Sendable {
    let name: String
    init(_ name: String) { self.name = name }
}

/// A waiter with an identity, to see which one the machine hands back.
private struct Waiter: TaskWaiter {
    let id: Int
    func taskDidComplete(_ task: TransferTask, error: TransferError?) {}
}

private typealias Machine = TaskStateMachine<Successor>

private let cancelled = TransferError(.cancelled, "cancelled")

/// A machine whose transfer is in the engine as `id`.
private func running(id: UInt64 = 7) -> Machine {
    var machine = Machine()
    _ = machine.resume()
    _ = machine.submitted(id: id)
    return machine
}

@Suite("Task state machine")
struct TaskStateMachineTests {
    // MARK: Start

    @Test("a new task is suspended, has no engine id, and starts on the first resume only")
    func startsOnFirstResume() {
        var machine = Machine()
        #expect(machine.visibleState == .suspended)
        #expect(machine.engineID == nil)

        guard case .start = machine.resume() else { Issue.record("first resume must start"); return }
        #expect(machine.visibleState == .running)
        guard case .none = machine.resume() else { Issue.record("a second resume must do nothing"); return }

        #expect(machine.submitted(id: 7) == [])
        #expect(machine.engineID == 7)
        #expect(machine.visibleState == .running)
    }

    @Test("suspend and resume in the engine pause and resume that transfer")
    func suspendAndResumeInEngine() {
        var machine = running(id: 9)

        guard case .pauseEngine(9) = machine.suspend() else { Issue.record("suspend must pause id 9"); return }
        #expect(machine.visibleState == .suspended)
        guard case .none = machine.suspend() else { Issue.record("a second suspend must do nothing"); return }
        guard case .resumeEngine(9) = machine.resume() else { Issue.record("resume must resume id 9"); return }
        #expect(machine.visibleState == .running)
    }

    @Test("suspend before start does nothing; the resume after it really starts the transfer")
    func suspendBeforeStart() {
        var machine = Machine()

        guard case .none = machine.suspend() else { Issue.record("suspend before start must do nothing"); return }
        #expect(machine.visibleState == .suspended)

        guard case .start = machine.resume() else { Issue.record("resume must still start"); return }
        #expect(machine.submitted(id: 3) == [])
        #expect(machine.engineID == 3)
    }

    @Test("a suspend after start but before the engine id is known is applied when the id arrives")
    func suspendBeforeEngineIDIsKept() {
        var machine = Machine()
        _ = machine.resume()

        guard case .notify(.suspended) = machine.suspend() else { Issue.record("suspend must be announced"); return }
        #expect(machine.visibleState == .suspended)
        #expect(machine.submitted(id: 5) == .pause)

        #expect(machine.visibleState == .suspended)
        guard case .resumeEngine(5) = machine.resume() else { Issue.record("resume must resume id 5"); return }
    }

    @Test("suspend then resume before the id arrives leaves the transfer running")
    func suspendResumeBeforeEngineID() {
        var machine = Machine()
        _ = machine.resume()

        _ = machine.suspend()
        guard case .notify(.running) = machine.resume() else { Issue.record("resume must be announced"); return }

        #expect(machine.submitted(id: 5) == [])
        #expect(machine.visibleState == .running)
    }

    @Test("a suspend before the hand-over starts the transfer paused; a resume before the id unpauses it")
    func suspendBeforeHandOver() {
        var machine = Machine()
        _ = machine.resume()
        #expect(machine.handOver() == false)
        _ = machine.suspend()

        // The spec goes to the engine paused: no pause command follows it.
        #expect(machine.handOver() == true)
        #expect(machine.submitted(id: 5) == [])
        #expect(machine.visibleState == .suspended)
        guard case .resumeEngine(5) = machine.resume() else { Issue.record("resume must resume id 5"); return }

        // Paused at the hand-over, resumed before the id: the resume is sent with it.
        var second = Machine()
        _ = second.resume()
        _ = second.suspend()
        #expect(second.handOver() == true)
        guard case .notify(.running) = second.resume() else { Issue.record("resume must be announced"); return }
        #expect(second.submitted(id: 6) == .resume)
        #expect(second.visibleState == .running)
    }

    @Test("a failed submit finishes locally once; a stale id afterwards is ignored")
    func submitFailure() {
        var machine = Machine()
        _ = machine.resume()

        guard case .finishLocally(let error) = machine.submitFailed(TransferError(.invalidRequest, "bad")) else {
            Issue.record("a failed submit must finish locally")
            return
        }
        #expect(error.code == .invalidRequest)
        guard case .none = machine.submitFailed(TransferError(.invalidRequest, "again")) else {
            Issue.record("only once")
            return
        }
        #expect(machine.submitted(id: 1) == [])
        #expect(machine.engineID == nil)
    }

    @Test("a response from the cache finishes the task without the engine, once; a cancel first wins")
    func servedLocally() {
        var machine = Machine()
        _ = machine.resume()

        #expect(machine.servedLocally() == .serve)
        #expect(machine.servedLocally() == .none)
        #expect(machine.submitted(id: 3) == [])
        #expect(machine.engineID == nil)

        var cancelledFirst = Machine()
        _ = cancelledFirst.resume()
        _ = cancelledFirst.cancel(keepPartial: false)
        #expect(cancelledFirst.servedLocally() == .cancelled)
        #expect(cancelledFirst.visibleState == .canceling)

        var inEngine = running()
        #expect(inEngine.servedLocally() == .none)
        #expect(inEngine.engineID == 7)
    }

    @Test("a task of an invalidated session fails before start and never starts after")
    func failBeforeStart() {
        var machine = Machine()

        guard case .finishLocally = machine.failBeforeStart(TransferError(.sessionInvalidated, "gone")) else {
            Issue.record("must finish locally")
            return
        }

        guard case .none = machine.resume() else { Issue.record("must not start"); return }
    }

    // MARK: Cancel

    @Test("cancel before start completes locally without the engine, and nothing starts afterwards")
    func cancelBeforeStart() {
        var machine = Machine()

        guard case .cancelLocally = machine.cancel(keepPartial: false) else {
            Issue.record("must cancel locally")
            return
        }
        #expect(machine.visibleState == .canceling)
        guard case .none = machine.resume() else { Issue.record("a cancelled task must not start"); return }
        guard case .deliver = machine.complete(cancelled) else { Issue.record("must deliver"); return }

        #expect(machine.visibleState == .completed)
        #expect(machine.completionError??.code == .cancelled)
    }

    @Test("a cancel before the engine id is known reaches the engine when the id arrives")
    func cancelBeforeEngineID() {
        var machine = Machine()
        _ = machine.resume()

        guard case .notify(.canceling) = machine.cancel(keepPartial: true) else { Issue.record("announce"); return }
        #expect(machine.submitted(id: 4) == [.cancel, .keepPartial])

        #expect(machine.engineFinished() == .complete)
        guard case .deliver = machine.complete(cancelled) else { Issue.record("must deliver"); return }
    }

    @Test("a consumer drain or an allowed response before the engine id is known is kept and handed back once with the id")
    func drainBeforeEngineID() {
        var machine = Machine()
        _ = machine.resume()
        // The engine runs the transfer; the body's consumer drains before the id is recorded.
        let early = machine.consumerReady()
        let allowed = machine.allowResponse()
        let submitted = machine.submitted(id: 9)
        #expect(early == nil && allowed == nil)
        #expect(submitted == [.consumerReady, .allowResponse])
        // With the id known, a drain names it at once and nothing is kept.
        let later = machine.consumerReady()
        let laterAllowed = machine.allowResponse()
        #expect(later == 9 && laterAllowed == 9)
        #expect(machine.submitted(id: 9).isEmpty, "handed back once")
    }

    @Test("a becomeDownload answer before the engine id is known is kept and handed back with the id")
    func becomeDownloadBeforeEngineID() {
        var machine = Machine()
        _ = machine.resume()
        let early = machine.becomeDownloadRequested()
        let submitted = machine.submitted(id: 5)
        let later = machine.becomeDownloadRequested()
        #expect(early == nil)
        #expect(submitted == .becomeDownload)
        #expect(later == 5)
    }

    @Test("commands kept before the id and a suspend or cancel in the same window come back in one set")
    func keptWithIntent() {
        var machine = Machine()
        _ = machine.resume()
        _ = machine.consumerReady()
        _ = machine.suspend()
        #expect(machine.submitted(id: 6) == [.consumerReady, .pause])

        var cancelled = Machine()
        _ = cancelled.resume()
        _ = cancelled.allowResponse()
        _ = cancelled.suspend()
        _ = cancelled.cancel(keepPartial: true)
        #expect(cancelled.submitted(id: 7) == [.allowResponse, .cancel, .keepPartial])
    }

    @Test("a drain with no transfer in the engine wakes nothing; one kept for a transfer that finished first is dropped")
    func drainWithoutTransfer() {
        var fresh = Machine()
        let none = fresh.consumerReady()
        #expect(none == nil)

        var machine = Machine()
        _ = machine.resume()
        let early = machine.consumerReady()
        _ = machine.submitFailed(cancelled)
        let stale = machine.submitted(id: 3)
        #expect(early == nil)
        #expect(stale.isEmpty, "no transfer in the engine to wake")

        // The hop ended before its id was recorded (a redirect follows): a
        // command kept for it is not sent to the next hop's transfer.
        var hops = Machine()
        _ = hops.resume()
        _ = hops.consumerReady()
        #expect(hops.engineFinished() == .considerFollowUp)
        guard case .submit = hops.beginHop(cancelled: cancelled) else { Issue.record("must submit the next hop"); return }
        #expect(hops.submitted(id: 4).isEmpty, "kept for the hop that ended")
    }

    @Test("cancel in the engine is sent once; suspend and resume after it do nothing")
    func cancelInEngine() {
        var machine = running(id: 2)

        guard case .cancelEngine(2, keepPartial: false) = machine.cancel(keepPartial: false) else {
            Issue.record("must cancel id 2")
            return
        }
        #expect(machine.visibleState == .canceling)
        guard case .none = machine.cancel(keepPartial: false) else { Issue.record("only once"); return }
        guard case .none = machine.suspend() else { Issue.record("no suspend while canceling"); return }
        guard case .none = machine.resume() else { Issue.record("no resume while canceling"); return }
    }

    @Test("cancel racing completion: the completion is delivered exactly once, with the first result")
    func cancelRacingCompletion() {
        var machine = running(id: 2)

        // The engine finished successfully; the cancel arrives before the delegate queue ran.
        _ = machine.cancel(keepPartial: false)
        #expect(machine.engineFinished() == .complete)
        guard case .deliver = machine.complete(nil) else { Issue.record("first completion must deliver"); return }

        guard case .none = machine.complete(cancelled) else { Issue.record("a second completion must not"); return }
        guard case .none = machine.cancel(keepPartial: false) else { Issue.record("cancel after completion"); return }
        #expect(machine.completionError == .some(nil))
    }

    @Test("a local cancel and an engine finish both completing: only the first is delivered")
    func doubleCompletion() {
        var machine = Machine()
        _ = machine.cancel(keepPartial: false)

        guard case .deliver = machine.complete(cancelled) else { Issue.record("must deliver"); return }
        #expect(machine.engineFinished() == .none)
        guard case .none = machine.complete(nil) else { Issue.record("must not deliver twice"); return }
    }

    @Test("a finish that overtakes the submitter leaves the late id unused")
    func finishOvertakesSubmitter() {
        var machine = Machine()
        _ = machine.resume()

        #expect(machine.engineFinished() == .considerFollowUp)
        #expect(machine.submitted(id: 8) == [])

        #expect(machine.engineID == nil)
        machine.endHops()
        guard case .deliver = machine.complete(nil) else { Issue.record("must deliver"); return }
    }

    // MARK: Hops

    @Test("a redirect hop submits again and takes the new engine id")
    func redirectHop() {
        var machine = running(id: 1)

        #expect(machine.engineFinished() == .considerFollowUp)
        #expect(machine.engineID == nil)
        guard case .submit = machine.beginHop(cancelled: cancelled) else { Issue.record("must submit"); return }
        #expect(machine.submitted(id: 2) == [])

        #expect(machine.engineID == 2)
        #expect(machine.visibleState == .running)
    }

    @Test("two 401 answers are two hops; the last one completes")
    func authHops() {
        var machine = running(id: 1)

        for id: UInt64 in [2, 3] {
            #expect(machine.engineFinished() == .considerFollowUp)
            guard case .submit = machine.beginHop(cancelled: cancelled) else { Issue.record("hop \(id)"); return }
            #expect(machine.submitted(id: id) == [])
        }
        #expect(machine.engineFinished() == .considerFollowUp)
        machine.endHops()

        #expect(machine.visibleState == .running)
        guard case .deliver = machine.complete(nil) else { Issue.record("must deliver"); return }
    }

    @Test("a suspend between hops pauses the next hop as soon as it has an id")
    func suspendBetweenHops() {
        var machine = running(id: 1)
        _ = machine.engineFinished()

        guard case .notify(.suspended) = machine.suspend() else { Issue.record("announce"); return }
        guard case .submit = machine.beginHop(cancelled: cancelled) else { Issue.record("must submit"); return }

        #expect(machine.submitted(id: 2) == .pause)
    }

    @Test("a cancel while the redirect hook decides completes as cancelled instead of a new hop")
    func cancelBetweenHops() {
        var machine = running(id: 1)
        _ = machine.engineFinished()

        guard case .notify(.canceling) = machine.cancel(keepPartial: false) else { Issue.record("announce"); return }
        guard case .finishLocally(let error) = machine.beginHop(cancelled: cancelled) else {
            Issue.record("must finish as cancelled")
            return
        }

        #expect(error.code == .cancelled)
        guard case .deliver = machine.complete(error) else { Issue.record("must deliver"); return }
    }

    @Test("a cancelled hop does not follow the redirect: the outcome completes")
    func cancelledHopCompletes() {
        var machine = running(id: 1)
        _ = machine.cancel(keepPartial: true)

        #expect(machine.engineFinished() == .complete)
        guard case .none = machine.beginHop(cancelled: cancelled) else { Issue.record("no hop"); return }
    }

    // MARK: Become download

    @Test("becomeDownload hands the engine id over; control then goes to the successor")
    func becomeDownload() {
        var machine = running(id: 11)
        let download = Successor("download")

        guard case .become(11, suspended: false) = machine.becomeDownload(download) else {
            Issue.record("must hand id 11 over")
            return
        }
        #expect(machine.engineID == nil)
        #expect(machine.successor === download)

        for action in [machine.resume(), machine.suspend(), machine.cancel(keepPartial: false)] {
            guard case .forward(let target) = action, target === download else {
                Issue.record("control must go to the successor")
                return
            }
        }
        #expect(machine.engineFinished() == .none)
        guard case .deliver = machine.complete(TransferError(.becameDownload, "moved")) else {
            Issue.record("the data task completes once, after the download")
            return
        }
        guard case .none = machine.complete(nil) else { Issue.record("only once"); return }
    }

    @Test("becomeDownload after a cancel, or before an engine id, is refused")
    func becomeDownloadRefused() {
        var cancelledMachine = running(id: 11)
        _ = cancelledMachine.cancel(keepPartial: false)
        guard case .refuse = cancelledMachine.becomeDownload(Successor("late")) else { Issue.record("refuse"); return }

        var early = Machine()
        _ = early.resume()
        guard case .refuse = early.becomeDownload(Successor("early")) else { Issue.record("refuse"); return }

        #expect(cancelledMachine.successor == nil)
        #expect(early.successor == nil)
    }

    @Test("a suspended task that becomes a download hands over a paused transfer")
    func becomeDownloadWhileSuspended() {
        var machine = running(id: 12)
        _ = machine.suspend()

        guard case .become(12, suspended: true) = machine.becomeDownload(Successor("download")) else {
            Issue.record("must hand a suspended id 12 over")
            return
        }

        var adopted = Machine(adoptingEngineTransfer: 12)
        adopted.adoptedTransferIsPaused()
        #expect(adopted.visibleState == .suspended)
        guard case .resumeEngine(12) = adopted.resume() else { Issue.record("resume must resume id 12"); return }
    }

    @Test("a task adopting a transfer is running with that engine id")
    func adopting() {
        var machine = Machine(adoptingEngineTransfer: 21)

        #expect(machine.engineID == 21)
        #expect(machine.visibleState == .running)
        guard case .pauseEngine(21) = machine.suspend() else { Issue.record("must pause id 21"); return }
    }

    // MARK: Waiters

    @Test("a waiter attached before completion is handed back once by the completion")
    func waiterBeforeCompletion() {
        var machine = running()

        guard case .none = machine.attach(Waiter(id: 1)) else { Issue.record("must store"); return }
        guard case .deliver(let waiter) = machine.complete(nil) else { Issue.record("must deliver"); return }

        #expect((waiter as? Waiter)?.id == 1)
        guard case .none = machine.complete(nil) else { Issue.record("only once"); return }
    }

    @Test("a waiter attached after completion fires at once with the completion's error")
    func waiterAfterCompletion() {
        var machine = Machine()
        _ = machine.cancel(keepPartial: false)
        _ = machine.complete(cancelled)

        guard case .fire(let error) = machine.attach(Waiter(id: 2)) else { Issue.record("must fire"); return }

        #expect(error?.code == .cancelled)
    }
}

@Suite("Task state machine: attempts")
struct TaskStateMachineAttemptTests {
    @Test("attempt failed -> awaiting attempt -> resubmitted, keeping the user's suspend")
    func failedAttemptIsResubmitted() {
        var machine = running()
        #expect(machine.engineFinished() == .considerFollowUp)

        let step1 = machine.awaitAttempt()
        #expect(step1)
        #expect(machine.engineID == nil)
        #expect(machine.visibleState == .running)
        guard case .notify(.suspended) = machine.suspend() else { Issue.record("suspend must notify"); return }
        let step2 = machine.attemptReady()
        #expect(step2)

        #expect(machine.visibleState == .suspended)
        #expect(machine.submitted(id: 8) == .pause)
        #expect(machine.engineID == 8)
    }

    @Test("the first attempt waits for the adapter, then goes to the engine")
    func firstAttemptWaitsForAdapter() {
        var machine = Machine()
        guard case .start = machine.resume() else { Issue.record("first resume must start"); return }

        let step3 = machine.awaitAttempt()
        #expect(step3)
        let step4 = machine.attemptReady()
        #expect(step4)

        #expect(machine.submitted(id: 3) == [])
        #expect(machine.engineID == 3)
    }

    @Test("a cancel between attempts completes at once; the late interceptor finds nothing to do")
    func cancelBetweenAttempts() {
        var machine = running()
        _ = machine.engineFinished()
        let step5 = machine.awaitAttempt()
        #expect(step5)

        guard case .cancelBetweenAttempts = machine.cancel(keepPartial: false) else {
            Issue.record("a cancel between attempts must complete the task")
            return
        }

        #expect(machine.visibleState == .canceling)
        let step6 = machine.attemptReady()
        #expect(!step6)
        let step7 = machine.endAttempts()
        #expect(!step7)
        guard case .none = machine.cancel(keepPartial: false) else { Issue.record("a second cancel is a no-op"); return }
    }

    @Test("a cancel while the hop was judged is not turned into a retry")
    func cancelWhileJudged() {
        var machine = running()
        _ = machine.engineFinished()
        _ = machine.cancel(keepPartial: false)

        let step8 = machine.awaitAttempt()
        #expect(!step8)
    }

    @Test("no retry: the attempts end and the task finishes with the visible state")
    func endAttempts() {
        var machine = running()
        _ = machine.engineFinished()
        let step9 = machine.awaitAttempt()
        #expect(step9)

        let step10 = machine.endAttempts()
        #expect(step10)

        #expect(machine.visibleState == .running)
        let step11 = machine.attemptReady()
        #expect(!step11)
        guard case .deliver = machine.complete(nil) else { Issue.record("completion must be delivered"); return }
    }
}
