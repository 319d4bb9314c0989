/// The state of a task, as `NSURLSessionTaskState`.
public enum TaskState: String, Sendable, Hashable, CustomStringConvertible {
    case running
    case suspended
    case canceling
    case completed

    public var description: String { rawValue }
}

/// Which body a progress report is about.
public enum ProgressDirection: String, Sendable, Hashable {
    case upload
    case download
}
