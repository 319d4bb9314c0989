import Testing

@testable import Transfer

private typealias Life = SegmentedLifecycle

/// A lifecycle whose probe is out.
private func probing() -> Life {
    var life = Life()
    _ = life.resume()
    return life
}

/// A lifecycle with `count` range transfers running.
private func ranges(_ count: Int) -> Life {
    var life = probing()
    _ = life.probeEnded()
    _ = life.runRanges(pending: count)
    return life
}

@Suite("Segmented download lifecycle")
struct SegmentedLifecycleTests {
    @Test("a new download is suspended, starts on the first resume only, and runs its probe")
    func startsOnFirstResume() {
        var life = Life()
        #expect(life.visibleState == .suspended)
        let suspend1 = life.suspend()
        #expect(suspend1 == false)
        let resume2 = life.resume()
        #expect(resume2 == .start)
        #expect(life.phase == .probing)
        #expect(life.visibleState == .running)
        let resume3 = life.resume()
        #expect(resume3 == .none)
    }

    @Test("probe, ranges, each range's end, then finishing and one completion")
    func rangesToCompletion() {
        var life = probing()
        let probeEnded4 = life.probeEnded()
        #expect(probeEnded4)
        let runRanges5 = life.runRanges(pending: 3)
        #expect(runRanges5)
        #expect(life.phase == .ranges(running: 3))
        let rangeEnded6 = life.rangeEnded()
        #expect(rangeEnded6 == false)
        let rangeEnded7 = life.rangeEnded()
        #expect(rangeEnded7 == false)
        #expect(life.visibleState == .running)
        let rangeEnded8 = life.rangeEnded()
        #expect(rangeEnded8)
        #expect(life.phase == .finishing)
        #expect(life.visibleState == .running)
        let complete9 = life.complete()
        #expect(complete9)
        #expect(life.visibleState == .completed)
        let complete10 = life.complete()
        #expect(complete10 == false)
        let rangeEnded11 = life.rangeEnded()
        #expect(rangeEnded11 == false)
    }

    @Test("a resumed run whose ranges are all on disk finishes without a connection")
    func nothingPending() {
        var life = probing()
        let probeEnded12 = life.probeEnded()
        #expect(probeEnded12)
        let runRanges13 = life.runRanges(pending: 0)
        #expect(runRanges13 == false)
        #expect(life.phase == .finishing)
        let complete14 = life.complete()
        #expect(complete14)
    }

    @Test("no ranges: one plain download takes over, and its end finishes")
    func singleDownload() {
        var life = probing()
        let probeEnded15 = life.probeEnded()
        #expect(probeEnded15)
        let runSingle16 = life.runSingle()
        #expect(runSingle16 == .run)
        #expect(life.phase == .single)
        let rangeEnded17 = life.rangeEnded()
        #expect(rangeEnded17 == false)
        let singleEnded18 = life.singleEnded()
        #expect(singleEnded18)
        let singleEnded19 = life.singleEnded()
        #expect(singleEnded19 == false)
        let complete20 = life.complete()
        #expect(complete20)
    }

    @Test("suspend and resume reach running connections; twice is once")
    func suspendAndResume() {
        var life = ranges(2)
        let suspend21 = life.suspend()
        #expect(suspend21)
        #expect(life.visibleState == .suspended)
        let suspend22 = life.suspend()
        #expect(suspend22 == false)
        let resume23 = life.resume()
        #expect(resume23 == .continueConnections)
        #expect(life.visibleState == .running)
        let resume24 = life.resume()
        #expect(resume24 == .none)
    }

    @Test("a suspend during the probe is applied to the plain download that follows")
    func suspendDuringProbe() {
        var life = probing()
        let suspend25 = life.suspend()
        #expect(suspend25)
        let probeEnded26 = life.probeEnded()
        #expect(probeEnded26)
        let runSingle27 = life.runSingle()
        #expect(runSingle27 == .suspend)
        #expect(life.visibleState == .suspended)
        let resume28 = life.resume()
        #expect(resume28 == .continueConnections)
    }

    @Test("cancel before the first resume finishes at once; a later resume does not start it")
    func cancelBeforeStart() {
        var life = Life()
        let cancel29 = life.cancel()
        #expect(cancel29 == .finishNow)
        #expect(life.phase == .finishing)
        #expect(life.visibleState == .canceling)
        let resume30 = life.resume()
        #expect(resume30 == .none)
        let cancel31 = life.cancel()
        #expect(cancel31 == .none)
        let complete32 = life.complete()
        #expect(complete32)
        #expect(life.visibleState == .completed)
    }

    @Test("cancel during the probe: the probe's end finishes instead of choosing a download")
    func cancelDuringProbe() {
        var life = probing()
        let cancel33 = life.cancel()
        #expect(cancel33 == .stopConnections)
        #expect(life.visibleState == .canceling)
        let probeEnded34 = life.probeEnded()
        #expect(probeEnded34 == false)
        #expect(life.phase == .finishing)
        let runRanges35 = life.runRanges(pending: 4)
        #expect(runRanges35 == false)
        let complete36 = life.complete()
        #expect(complete36)
    }

    @Test("cancel while ranges run: only the last range's end finishes, once")
    func cancelDuringRanges() {
        var life = ranges(2)
        let cancel37 = life.cancel()
        #expect(cancel37 == .stopConnections)
        let cancel38 = life.cancel()
        #expect(cancel38 == .none)
        let suspend39 = life.suspend()
        #expect(suspend39 == false)
        let resume40 = life.resume()
        #expect(resume40 == .none)
        let rangeEnded41 = life.rangeEnded()
        #expect(rangeEnded41 == false)
        let complete42 = life.complete()
        #expect(complete42 == false)
        let rangeEnded43 = life.rangeEnded()
        #expect(rangeEnded43)
        let complete44 = life.complete()
        #expect(complete44)
        #expect(life.visibleState == .completed)
    }

    @Test("cancel after the last range ended changes nothing: the download completes as it was")
    func cancelWhileFinishing() {
        var life = ranges(1)
        let rangeEnded45 = life.rangeEnded()
        #expect(rangeEnded45)
        let cancel46 = life.cancel()
        #expect(cancel46 == .none)
        #expect(life.visibleState == .running)
        let complete47 = life.complete()
        #expect(complete47)
    }

    @Test("a failure before any connection finishes from the probe, not after it")
    func failBeforeConnections() {
        var life = probing()
        let failBeforeConnections48 = life.failBeforeConnections()
        #expect(failBeforeConnections48)
        let failBeforeConnections49 = life.failBeforeConnections()
        #expect(failBeforeConnections49 == false)
        let complete50 = life.complete()
        #expect(complete50)

        var started = ranges(2)
        let failBeforeConnections51 = started.failBeforeConnections()
        #expect(failBeforeConnections51 == false)
    }

    @Test("an invalidated session fails a download that never started, not one that did")
    func invalidate() {
        var idle = Life()
        let invalidate52 = idle.invalidate()
        #expect(invalidate52)
        let resume53 = idle.resume()
        #expect(resume53 == .none)
        let complete54 = idle.complete()
        #expect(complete54)

        var running = probing()
        let invalidate55 = running.invalidate()
        #expect(invalidate55 == false)
        #expect(running.phase == .probing)
    }
}
