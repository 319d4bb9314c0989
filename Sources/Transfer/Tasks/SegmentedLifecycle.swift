/// The life of a ``SegmentedDownload`` as a value: events in, actions out.
///
/// The same discipline as ``TaskStateMachine``: the download calls one of the
/// `mutating` functions under its lock and performs what it returns outside
/// it (engine commands, the plain download task's controls, finishing). The
/// value touches no engine, file or queue, so it is tested event by event
/// (SegmentedLifecycleTests).
///
/// The phases follow the download: a HEAD probe, then either one plain
/// download task or a set of range transfers, then finishing (the part file
/// is checked and placed, or the error settled), then completed. What the
/// user asked for (run, suspend, cancel) is the ``Intent`` beside the phase,
/// as for a task: a cancel does not end a phase by itself, the connections
/// it stops do, each through its own end event. So every way to the end goes
/// through ``Phase/finishing`` once, and ``complete()`` says yes once.
struct SegmentedLifecycle: Sendable, Equatable {
    enum Phase: Sendable, Equatable {
        /// Made, never resumed.
        case idle
        /// The HEAD request is (being) handed to the engine.
        case probing
        /// One plain ``DownloadTask`` runs the download (no ranges, or too small).
        case single
        /// This many range transfers have not ended yet.
        case ranges(running: Int)
        /// No connection is left; the result is being produced.
        case finishing
        /// Completion delivered.
        case completed
    }

    enum Intent: Sendable, Equatable {
        case run
        case suspend
        case cancel
    }

    private(set) var phase: Phase = .idle
    private(set) var intent: Intent = .run

    /// What ``TransferTask/state`` reports.
    var visibleState: TaskState {
        switch phase {
        case .idle: return .suspended
        case .completed: return .completed
        default:
            switch intent {
            case .run: return .running
            case .suspend: return .suspended
            case .cancel: return .canceling
            }
        }
    }

    var isCancelled: Bool { intent == .cancel }
    var isCompleted: Bool { phase == .completed }

    /// Connections are, or are about to be, in the engine: suspend, resume
    /// and cancel have something to reach.
    private var hasConnections: Bool {
        switch phase {
        case .probing, .single, .ranges: return true
        case .idle, .finishing, .completed: return false
        }
    }

    // MARK: User controls

    enum Resume: Sendable, Equatable {
        case none
        /// First resume: send the probe.
        case start
        /// Resume every connection paused by ``suspend()``.
        case continueConnections
    }

    mutating func resume() -> Resume {
        if phase == .idle {
            phase = .probing
            return .start
        }
        guard hasConnections, intent == .suspend else { return .none }
        intent = .run
        return .continueConnections
    }

    /// True: pause every connection. Before the first resume there is none,
    /// and the later resume really starts.
    mutating func suspend() -> Bool {
        guard hasConnections, intent == .run else { return false }
        intent = .suspend
        return true
    }

    enum Cancel: Sendable, Equatable {
        case none
        /// Never started: nothing runs, finish now.
        case finishNow
        /// Cancel every connection; each one's end event leads to finishing.
        case stopConnections
    }

    mutating func cancel() -> Cancel {
        guard intent != .cancel else { return .none }
        switch phase {
        case .idle:
            intent = .cancel
            phase = .finishing
            return .finishNow
        case .probing, .single, .ranges:
            intent = .cancel
            return .stopConnections
        case .finishing, .completed:
            return .none
        }
    }

    /// The session was invalidated before the download started: it fails
    /// without a connection. False if it had started.
    mutating func invalidate() -> Bool {
        guard phase == .idle else { return false }
        phase = .finishing
        return true
    }

    // MARK: Engine events

    /// The probe's transfer ended. True: look at its answer and choose how to
    /// download; false: the download was cancelled meanwhile and finishes.
    mutating func probeEnded() -> Bool {
        guard phase == .probing else { return false }
        guard intent != .cancel else {
            phase = .finishing
            return false
        }
        return true
    }

    /// The probe failed or was refused in a way no download can follow (a
    /// request that cannot be made, a file over the size limit): finish.
    mutating func failBeforeConnections() -> Bool {
        guard phase == .probing || phase == .idle else { return false }
        phase = .finishing
        return true
    }

    /// One plain download task takes over. Returns the intent to apply to
    /// it at once (a cancel or suspend that came during the probe).
    mutating func runSingle() -> Intent {
        guard phase == .probing else { return .cancel }
        phase = .single
        return intent
    }

    /// The plain download task completed. True: finish now.
    mutating func singleEnded() -> Bool {
        guard phase == .single else { return false }
        phase = .finishing
        return true
    }

    /// `pending` range transfers are about to be submitted (ranges a resumed
    /// run already has are not). True: submit them; false: nothing to run
    /// (all ranges done, or cancelled meanwhile), finish now.
    mutating func runRanges(pending: Int) -> Bool {
        guard phase == .probing else { return false }
        guard intent != .cancel, pending > 0 else {
            phase = .finishing
            return false
        }
        phase = .ranges(running: pending)
        return true
    }

    /// A range transfer ended, or its submission was refused. True when it
    /// was the last one: finish now.
    mutating func rangeEnded() -> Bool {
        guard case .ranges(let running) = phase else { return false }
        if running <= 1 {
            phase = .finishing
            return true
        }
        phase = .ranges(running: running - 1)
        return false
    }

    /// The result was produced: true exactly once, from ``Phase/finishing``.
    mutating func complete() -> Bool {
        guard phase == .finishing else { return false }
        phase = .completed
        return true
    }
}
