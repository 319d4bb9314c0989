import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// posix_spawn with a clean signal state, shared by `Command` and `NginxFixture`.
///
/// Foundation's `Process` passes on the calling thread's signal mask, and the threads of a
/// test process block SIGCHLD and others: a child shell's `wait` then never returns. It also
/// leaks per launch on Linux (LeakSanitizer reports every `Process.run()`). Here the child
/// gets an empty mask and default dispositions, and the caller reaps it with `waitpid`.
enum Spawn {
    /// What a child's standard stream is connected to.
    enum Stream {
        /// The given descriptor (duplicated into place; the caller still owns it).
        case descriptor(Int32)
        /// A file opened for appending (created 0644 if missing).
        case appending(String)
        /// /dev/null.
        case null
    }

    /// Starts `executable` with `arguments` (argv[1...]); returns the child's PID.
    ///
    /// - Throws: `TestSupportError` with the errno of posix_spawn.
    static func start(
        _ executable: String, _ arguments: [String], environment extra: [String: String] = [:],
        stdin: Stream = .null, stdout: Stream = .null, stderr: Stream = .null
    ) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (target, stream) in [(Int32(0), stdin), (1, stdout), (2, stderr)] {
            switch stream {
            case .descriptor(let fd):
                posix_spawn_file_actions_adddup2(&actions, fd, target)
            case .appending(let path):
                posix_spawn_file_actions_addopen(&actions, target, path, O_WRONLY | O_CREAT | O_APPEND, 0o644)
            case .null:
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0)
            }
        }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGCHLD, SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM] {
            sigaddset(&defaults, signal)
        }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let environment = ProcessInfo.processInfo.environment.merging(extra) { $1 }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard result == 0 else { throw TestSupportError.posix("posix_spawn \(executable)", result) }
        return pid
    }

    /// A pipe whose both ends are close-on-exec (the child gets its end through dup2).
    static func pipe() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        guard Glibc.pipe(&fds) == 0 else { throw TestSupportError.posix("pipe") }
        _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
        return (fds[0], fds[1])
    }

    /// Reaps `pid` if it has exited; returns its wait status, or nil while it runs.
    static func reap(_ pid: pid_t) -> Int32? {
        var status: Int32 = 0
        let result = waitpid(pid, &status, WNOHANG)
        if result == pid { return status }
        if result < 0 && errno == ECHILD { return 0 }
        return nil
    }

    /// Exit status from a wait status: the code, or 128 + signal.
    static func exitCode(_ status: Int32) -> Int32 {
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }
}
