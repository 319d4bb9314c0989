import Dispatch
import FoundationEssentials
import Transfer

/// A label showing a task's progress as a whole percentage ("42%"), as
/// seed 000's UILabel+AFNetworking: it changes only while the total is known,
/// and stops observing by itself when the task completes.
public final class PercentLabel: TerminalElement {
    struct Display: Sendable {
        var text = ""
        var prefix: String
    }

    private let state: BindingState<Display>

    /// Creates an unbound label; its text is empty until a known total arrives.
    ///
    /// - Parameter prefix: Text printed before the percentage (e.g. a file name).
    public init(prefix: String = "") {
        state = BindingState(Display(prefix: prefix))
    }

    /// The percentage, e.g. "42%" (empty before the first known total).
    public var text: String { state.read { $0.text } }

    /// Whether the label is bound to a task.
    public var isBound: Bool { state.isBound }

    public var isAnimating: Bool { false }

    /// Follows `direction` of `task`, dropping the previous binding; a task
    /// already completed is shown once and not observed.
    ///
    /// - Parameter queue: Where task events are received (a private serial queue by default).
    public func bind(to task: any ObservableTransfer, direction: ProgressDirection, queue: DispatchQueue? = nil) {
        let queue = queue ?? defaultBindingQueue
        let completed = task.state == .completed
        let initial = task.progress(direction)
        let generation = state.rebind(bound: !completed) { display in
            Self.apply(initial, to: &display)
        }
        guard !completed else { return }
        let progressToken = task.observeProgress(direction, on: queue) { [weak self] progress in
            self?.state.update(generation: generation) { Self.apply(progress, to: &$0) }
        }
        let finish: @Sendable () -> Void = { [weak self, weak task] in
            let final = task?.progress(direction)
            self?.state.detach(generation: generation) { display in
                if let final { Self.apply(final, to: &display) }
            }
        }
        let stateToken = task.observeState(on: queue) { taskState in
            if taskState == .completed { finish() }
        }
        state.attach([progressToken, stateToken], generation: generation)
        // Completed between the first check and the observation (see ProgressBar).
        if task.state == .completed { finish() }
    }

    /// Stops following the task; the text stays.
    public func unbind() { state.detach(generation: nil) }

    public func setUpdateHandler(_ handler: (@Sendable () -> Void)?) { state.setUpdateHandler(handler) }

    public func render(width: Int) -> String {
        let display = state.read { $0 }
        let head = display.prefix.isEmpty ? "" : display.prefix + " "
        return TerminalFormat.fit(head + display.text, width: width)
    }

    private static func apply(_ progress: TransferProgress, to display: inout Display) {
        // As the seed: only a known total (> 0) changes the text.
        guard progress.totalUnitCount > 0, let fraction = progress.fractionCompleted else { return }
        display.text = TerminalFormat.percent(fraction)
    }
}
