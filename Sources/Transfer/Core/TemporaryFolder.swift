import FoundationEssentials
import Glibc

/// The session's private folder for part files: `$TMPDIR/transfer-<uid>/`
/// (`/tmp` without `TMPDIR`), mode 0700, owned by the user.
///
/// The folder is per user, not per process, so that resume data and part
/// files made by one process are found again by the next one. Because other
/// users can write to `/tmp`, a folder that is a symlink, is not ours or lets
/// the group or others in is refused: a part file in it could be read,
/// swapped or pointed elsewhere by someone else.
enum TemporaryFolder {
    /// The folder for the current user: `TMPDIR` when it is an absolute
    /// path, else `/tmp`.
    static func path(environment: [String: String] = ProcessInfo.processInfo.environment,
                     uid: uid_t = geteuid()) -> String
    {
        var root = environment["TMPDIR"] ?? ""
        if !root.hasPrefix("/") { root = "/tmp" }
        while root.count > 1 && root.hasSuffix("/") { root.removeLast() }
        return (root == "/" ? "" : root) + "/transfer-\(uid)"
    }

    /// Creates `path` with mode 0700 when it is missing, then checks what is
    /// there without following a symlink: a directory, owned by us, with no
    /// group or other permission bits.
    ///
    /// - Throws: ``TransferError/Code/fileError`` naming what is wrong.
    static func prepare(_ path: String) throws(TransferError) {
        // mkdir then open(O_NOFOLLOW) + fstat: the check is made on the
        // folder we will use, not on a name someone may swap in between.
        if mkdir(path, 0o700) != 0 && errno != EEXIST {
            throw failure(errno, "cannot create the temporary folder \(path)")
        }
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        if fd < 0 {
            let err = errno
            let why = err == ELOOP || err == ENOTDIR ? "is a symlink or not a folder" : "cannot be opened"
            throw failure(err, "the temporary folder \(path) \(why)")
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw failure(errno, "cannot inspect the temporary folder \(path)") }
        guard st.st_uid == geteuid() else {
            throw failure(EPERM, "the temporary folder \(path) belongs to uid \(st.st_uid), not to us")
        }
        guard st.st_mode & 0o077 == 0 else {
            throw failure(EPERM, "the temporary folder \(path) is open to other users (mode "
                + String(st.st_mode & 0o777, radix: 8) + ")")
        }
    }

    /// Whether `path` names a file directly inside `folder`, after resolving
    /// the folder itself: absolute, no `.`/`..`/empty component, and a plain
    /// name in the folder. Symlinks at the name are refused by the caller.
    static func contains(_ path: String, folder: String) -> Bool {
        guard path.hasPrefix("/"), !path.utf8.contains(0) else { return false }
        let components = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        guard !components.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." }) else { return false }
        let directory = "/" + components.dropLast().joined(separator: "/")
        guard let name = components.last, !name.isEmpty else { return false }
        // Both sides resolved: the folder may sit behind a symlinked TMPDIR,
        // and a symlink inside the folder may not lead out of it.
        guard let resolvedFolder = realpath(folder), let resolvedDirectory = realpath(directory) else { return false }
        return resolvedFolder == resolvedDirectory
    }

    private static func realpath(_ path: String) -> String? {
        guard let resolved = Glibc.realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    private static func failure(_ err: Int32, _ message: String) -> TransferError {
        var error = TransferError(.fileError, message + ": " + String(cString: strerror(err)))
        error.systemErrno = err
        return error
    }
}
