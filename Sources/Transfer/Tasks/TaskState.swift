/// The state of a task, as `NSURLSessionTaskState`.
public enum TaskState: String, Sendable, Hashable, CustomStringConvertible {
    /// The task is transferring, or waiting for a connection.
    case running
    /// The task was suspended (or not resumed yet).
    case suspended
    /// The task was cancelled and is finishing.
    case canceling
    /// The task completed, with or without an error.
    case completed

    public var description: String { rawValue }
}

/// Which body a progress report is about.
public enum ProgressDirection: String, Sendable, Hashable {
    /// Bytes sent.
    case upload
    /// Bytes received.
    case download
}
