import Foundation

/// A uniquely named directory under `$TMPDIR` (or `/tmp`) that deletes itself.
///
/// The directory and everything in it are removed by `remove()` or, at the latest, when the
/// last reference goes away. Safe to share between threads.
///
/// Keep the directory in a variable for as long as its files are used:
/// `let destination = try TemporaryDirectory().file("body.bin")` releases the directory (and
/// deletes it) before `destination` is ever written.
public final class TemporaryDirectory: Sendable {
    /// The directory's file URL.
    public let url: URL
    private let removed = Locked(false)

    /// Creates a fresh directory with `mkdtemp(3)`.
    ///
    /// - Parameter prefix: Start of the directory name, to recognise leftovers.
    /// - Throws: `TestSupportError` when the directory cannot be created.
    public init(prefix: String = "transfer-tests") throws {
        let environment = ProcessInfo.processInfo.environment["TMPDIR"] ?? ""
        let base = environment.isEmpty ? "/tmp" : environment
        var template = Array("\(base)/\(prefix).XXXXXX".utf8CString)
        let created = template.withUnsafeMutableBufferPointer { buffer in
            mkdtemp(buffer.baseAddress!)
        }
        guard let created else {
            throw TestSupportError.posix("mkdtemp in \(base)")
        }
        url = URL(fileURLWithPath: String(cString: created), isDirectory: true)
    }

    /// The directory's path.
    public var path: String { url.path }

    /// A URL for `name` inside the directory. Nothing is created.
    public func file(_ name: String) -> URL {
        url.appendingPathComponent(name, isDirectory: false)
    }

    /// Removes the directory and its contents now. Later calls do nothing.
    public func remove() {
        let first = removed.withLock { removed in
            defer { removed = true }
            return !removed
        }
        if first {
            try? FileManager.default.removeItem(at: url)
        }
    }

    deinit {
        remove()
    }
}
