import FoundationEssentials
import Glibc

/// The path operations the command needs on plain strings, worked out by
/// FoundationEssentials' `URL(filePath:)`.
enum Path {
    // A wrapper rather than `URL(filePath:)` at each call, for what that
    // initialiser does and the command must not (the paths are printed, in
    // messages and `%{filename_effective}`, as the user wrote them):
    // - It reads a leading `~` as a home folder. To the command, as to curl,
    //   `~` is a name (the shell expands the `~` the user meant): such a path
    //   is given to it behind `./`, which is taken off the result again.
    // - Its `path` of a relative URL is absolute (against the current
    //   directory); `relativePath` keeps the text as written.
    // - `""` is the current directory to it (a join would give `./name`, the
    //   parent of `name` would be `.`); here "" stays "" and a bare name has
    //   no parent.
    // Left as URL has them, for no path a file can be written at: a doubled
    // `/` stays (`a//` and `b` give `a//b`), and the last component or the
    // parent of a path ending in `.` or `..` is resolved against the current
    // directory.

    /// `directory/name`, with one `/` between them; `name` alone when
    /// `directory` is empty.
    static func join(_ directory: String, _ name: String) -> String {
        guard !directory.isEmpty else { return name }
        return text(of: fileURL(directory, hint: .isDirectory).appending(path: name, directoryHint: .notDirectory),
                    from: directory)
    }

    /// The path without its last component: `a/b` → `a`, `/a` → `/`, `a` → "".
    static func parent(_ path: String) -> String {
        let parent = text(of: fileURL(path, hint: .notDirectory).deletingLastPathComponent(), from: path)
        return parent == "." && !path.hasPrefix("./") ? "" : parent
    }

    /// The last component: `a/b/` → `b`, `/` → `/`.
    static func lastComponent(_ path: String) -> String {
        fileURL(path, hint: .notDirectory).lastPathComponent
    }

    /// `path` as a file URL, a leading `~` kept as a name.
    private static func fileURL(_ path: String, hint: URL.DirectoryHint) -> URL {
        URL(filePath: path.hasPrefix("~") ? "./" + path : path, directoryHint: hint)
    }

    /// The path of `url`, relative as `path` was, without the `./` that
    /// ``fileURL(_:hint:)`` put before a leading `~`.
    private static func text(of url: URL, from path: String) -> String {
        let text = url.relativePath
        return path.hasPrefix("~") && text.hasPrefix("./") ? String(text.dropFirst(2)) : text
    }

    /// `$TMPDIR` when it is an absolute path, else `/tmp`.
    static var temporaryDirectory: String {
        if let value = getenv("TMPDIR"), value.pointee == UInt8(ascii: "/") { return String(cString: value) }
        return "/tmp"
    }

    /// The size of a file in bytes, or nil when it cannot be read.
    static func fileSize(_ path: String) -> Int64? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Int64(info.st_size)
    }
}
