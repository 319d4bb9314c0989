import Dispatch
import FoundationEssentials
import Glibc
import Transfer

/// File modes of what the command writes. A file placed at the user's name
/// follows the umask, as curl's do; what is staged on the way (part files,
/// bodies waiting to be streamed out) is readable by its owner only.
enum FileModes {
    /// 0666 without the process's umask (0644 under the usual 022). The
    /// umask is read from /proc/self/status: umask(2) would have to set it,
    /// and a file another thread creates meanwhile would get the wrong mode.
    static func placed() -> mode_t {
        var mask: mode_t = 0o022
        if let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Umask:") }),
            let value = mode_t(line.dropFirst("Umask:".count).trimmingWhitespace(), radix: 8)
        {
            mask = value
        }
        return 0o666 & ~mask & 0o777
    }
}

/// A folder of the run's own (mkdtemp: mode 0700) for bodies that are
/// staged on disk before they go to stdout or a device: the engine gives a
/// finished download the umask's mode, which in a shared temporary folder
/// would let other users read it. Made on first use, removed at the end.
final class ScratchFolder: Sendable {
    private let path = Protected<String?>(nil)

    /// The folder, made now if needed.
    ///
    /// - Throws: ``Failure`` with exit 12 when it cannot be made.
    func get() throws(Failure) -> String {
        let result: Result<String, Failure> = path.withLock { slot in
            if let made = slot { return .success(made) }
            let base = Path.join(Path.temporaryDirectory, "transfer-cli-XXXXXX")
            var template = Array(base.utf8CString)
            guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
                return .failure(Failure(.localFile, "cannot make a private folder like \(base): "
                                            + String(cString: strerror(errno))))
            }
            slot = String(cString: made)
            return .success(slot!)
        }
        return try result.get()
    }

    /// Removes the folder (its files are already gone).
    func remove() {
        if let made = path.withLock({ $0 }) { rmdir(made) }
    }
}
