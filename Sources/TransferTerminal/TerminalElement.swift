import Dispatch
import FoundationEssentials
import Synchronization
import Transfer

/// A monotonic time source in seconds; injectable so rendering is testable.
public struct DisplayClock: Sendable {
    /// Returns the current time in seconds.
    public let now: @Sendable () -> TimeInterval

    /// A clock reading `now`.
    public init(now: @escaping @Sendable () -> TimeInterval) { self.now = now }

    /// The system's monotonic clock (`DispatchTime`).
    public static let system = DisplayClock { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
}

/// One line of a terminal display: a progress bar, a percentage, a spinner.
public protocol TerminalElement: AnyObject, Sendable {
    /// The element as exactly `width` terminal columns (no control characters;
    /// wide characters count two, see ``TerminalFormat/columns(_:)``).
    func render(width: Int) -> String
    /// True while the element wants frames for its own sake (a spinner
    /// spinning, a bar easing towards its value).
    var isAnimating: Bool { get }
    /// Sets the closure the element calls after each change of what it shows;
    /// a display sets it to redraw. It runs on the binding queue.
    func setUpdateHandler(_ handler: (@Sendable () -> Void)?)
}

/// Where bindings receive task events unless told otherwise.
let defaultBindingQueue = DispatchQueue(label: "transfer.terminal.bindings")

/// The binding bookkeeping shared by every element: the current observation
/// tokens, a generation that tells current events from those of an earlier
/// binding, and the element's display value. Everything is behind one lock,
/// so "is this event still mine?" and "apply it" are one step.
final class BindingState<Display: Sendable>: Sendable {
    private struct Inner: Sendable {
        var generation = 0
        var tokens: [ObservationToken] = []
        var isBound = false
        var display: Display
        var onUpdate: (@Sendable () -> Void)?
    }

    private let inner: Protected<Inner>

    init(_ display: Display) { inner = Protected(Inner(display: display)) }

    var isBound: Bool { inner.withLock { $0.isBound } }

    func read<R>(_ body: (Display) -> R) -> R { inner.withLock { body($0.display) } }

    func setUpdateHandler(_ handler: (@Sendable () -> Void)?) { inner.withLock { $0.onUpdate = handler } }

    /// Drops the current binding (its tokens are cancelled outside the lock),
    /// applies `initial`, and returns the new generation.
    func rebind(bound: Bool, _ initial: (inout Display) -> Void) -> Int {
        let (old, generation, handler) = inner.withLock { inner in
            let old = inner.tokens
            inner.tokens = []
            inner.generation += 1
            inner.isBound = bound
            initial(&inner.display)
            return (old, inner.generation, inner.onUpdate)
        }
        for token in old { token.cancel() }
        handler?()
        return generation
    }

    /// Keeps `tokens` for `generation`, or cancels them at once when that
    /// binding already ended (the task completed before we got here).
    func attach(_ tokens: [ObservationToken], generation: Int) {
        let stale = inner.withLock { inner -> Bool in
            guard inner.generation == generation, inner.isBound else { return true }
            inner.tokens.append(contentsOf: tokens)
            return false
        }
        if stale { for token in tokens { token.cancel() } }
    }

    /// Applies `body` if `generation` is still the current binding.
    func update(generation: Int, _ body: (inout Display) -> Void) {
        let handler = inner.withLock { inner -> (@Sendable () -> Void)?? in
            guard inner.generation == generation, inner.isBound else { return .none }
            body(&inner.display)
            return .some(inner.onUpdate)
        }
        if case .some(let handler) = handler { handler?() }
    }

    /// Applies `body` outside of any binding (a manual `set…` call).
    func set(_ body: (inout Display) -> Void) {
        let handler = inner.withLock { inner in
            body(&inner.display)
            return inner.onUpdate
        }
        handler?()
    }

    /// Ends the binding `generation` (or whatever is bound, when nil): its
    /// tokens are cancelled and later events of it are ignored. The display
    /// keeps its last value; `final` may adjust it in the same step.
    func detach(generation: Int?, _ final: (inout Display) -> Void = { _ in }) {
        let result = inner.withLock { inner -> ([ObservationToken], (@Sendable () -> Void)?)? in
            if let generation, generation != inner.generation || !inner.isBound { return nil }
            let tokens = inner.tokens
            inner.tokens = []
            inner.isBound = false
            inner.generation += 1
            final(&inner.display)
            return (tokens, inner.onUpdate)
        }
        guard let (tokens, handler) = result else { return }
        for token in tokens { token.cancel() }
        handler?()
    }
}
