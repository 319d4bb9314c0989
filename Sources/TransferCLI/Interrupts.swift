import Dispatch
import Dispatch
import FoundationEssentials
import Glibc
import Transfer

/// Ctrl-C and SIGTERM: the first signal cancels every running task (each
/// completes as cancelled, and the library removes its `.part` file) and
/// stops new ones from starting; a second signal exits at once with 14.
final class Interrupts: Sendable {
    private struct State {
        var interrupted = false
        var cancels: [Int: @Sendable () -> Void] = [:]
        var signals = 0
    }

    private let state = Protected(State())
    private let queue = DispatchQueue(label: "transfer.cli.signals")
    /// The dispatch sources must stay alive; set once in `install`.
    private let sources = SourceList()

    /// Blocks SIGINT and SIGTERM in the calling thread. Call first thing in
    /// main, before any thread exists: threads inherit the mask, so no
    /// thread takes the default action (death) and libdispatch's signalfd
    /// sees the signals. (SIG_IGN would not do on Linux: an ignored signal
    /// is discarded before signalfd can read it.) SIGPIPE is ignored: a
    /// closed stdout shows up as EPIPE from write(2).
    static func blockEarly() {
        signal(SIGPIPE, SIG_IGN)
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    /// Watches SIGINT and SIGTERM (blocked by ``blockEarly()``).
    ///
    /// - Parameters:
    ///   - onInterrupt: Runs on the first signal, before the cancellations.
    ///   - beforeExit: Runs on the second signal, just before the process
    ///     exits with 14 (buffered output is written here).
    func install(onInterrupt: @escaping @Sendable () -> Void,
                 beforeExit: @escaping @Sendable () -> Void = {})
    {
        var made: [any DispatchSourceSignal] = []
        for number in [SIGINT, SIGTERM] {
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { [self] in
                let (first, cancels) = state.withLock { state -> (Bool, [@Sendable () -> Void]) in
                    state.signals += 1
                    state.interrupted = true
                    return (state.signals == 1, Array(state.cancels.values))
                }
                guard first else {
                    // Second signal: the user insists. Cancel once more and leave.
                    for cancel in cancels { cancel() }
                    beforeExit()
                    exit(ExitStatus.interrupted.rawValue)
                }
                onInterrupt()
                for cancel in cancels { cancel() }
            }
            source.resume()
            made.append(source)
        }
        sources.keep(made)
    }

    /// Stops watching (signals stay blocked; the run is over). Releases the
    /// handlers, which libdispatch keeps alive while a source is active.
    func uninstall() {
        sources.cancelAll()
    }

    var isInterrupted: Bool { state.withLock { $0.interrupted } }

    /// Registers how to cancel a transfer before it starts; false (and
    /// nothing is registered) when the run was already interrupted.
    func register(id: Int, cancel: @escaping @Sendable () -> Void) -> Bool {
        state.withLock { state in
            guard !state.interrupted else { return false }
            state.cancels[id] = cancel
            return true
        }
    }

    func unregister(id: Int) {
        _ = state.withLock { $0.cancels.removeValue(forKey: id) }
    }
}

/// Keeps the signal sources alive for the life of the process.
private final class SourceList: Sendable {
    private let list = Protected<[any DispatchSourceSignal]>([])
    func keep(_ sources: [any DispatchSourceSignal]) { list.withLock { $0 = sources } }

    /// Cancels the sources: libdispatch stops retaining them and their handlers.
    func cancelAll() {
        let sources = list.withLock { list in
            defer { list = [] }
            return list
        }
        for source in sources { source.cancel() }
    }
}
