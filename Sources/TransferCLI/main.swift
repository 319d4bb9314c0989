import ArgumentParser
import Dispatch
import FoundationEssentials
import Glibc

// The `transfer` command (docs/CLI.md). ArgumentParser only parses: its exit
// codes differ from the contract (64 for usage errors), so parse errors are
// printed here and mapped to 2; everything after parsing is the Runner's.

Interrupts.blockEarly()

let given = Array(CommandLine.arguments.dropFirst())
if given.isEmpty {
    Terminal.note(TransferTool.helpMessage())
    exit(ExitStatus.usage.rawValue)
}
// curl's command line: no verb, --version, -#, -C -, refused options (CurlArguments).
let arguments: [String]
switch CurlArguments.rewrite(given) {
case .version:
    Terminal.writeStdout(Array(CurlArguments.versionText.utf8))
    exit(0)
case .refused(let reason):
    Terminal.note("transfer: \(reason)")
    exit(ExitStatus.usage.rawValue)
case .arguments(let rewritten):
    arguments = rewritten
}
/// The verb named first, parsed as a command of its own: ArgumentParser
/// then reflects over the verb's options once less than through the root
/// (its check for pass-through arguments walks every subcommand's options).
/// Nil when anything is wrong: the root parses again, for its messages.
func parseVerbDirectly(_ arguments: [String]) -> (any ParsableCommand)? {
    guard let first = arguments.first,
        let verb = TransferTool.configuration.subcommands.first(where: { $0._commandName == first })
    else { return nil }
    return try? verb.parse(Array(arguments.dropFirst()))
}

let command: any ParsableCommand
do {
    command = try parseVerbDirectly(arguments) ?? TransferTool.parseAsRoot(arguments)
} catch {
    let code = TransferTool.exitCode(for: error)
    var message = TransferTool.fullMessage(for: error)
    if code == .success {
        print(message)
        exit(0)
    }
    // Never a bare "Unknown option": name it and say where the options are.
    if let range = message.firstRange(of: "Unknown option '"),
        let end = message[range.upperBound...].firstIndex(of: "'")
    {
        let name = String(message[range.upperBound..<end])
        message = "transfer: " + (CurlArguments.unsupported[name].map { "\(name): \($0)" }
            ?? CurlArguments.unknownOption(name))
    }
    Terminal.note(message)
    exit(ExitStatus.usage.rawValue)
}

guard let verb = command as? any Verb else {
    // `--help`, `help VERB` or no verb at all: ArgumentParser's own commands
    // print help by throwing CleanExit; the root alone is a usage error.
    var other = command
    do {
        try other.run()
    } catch {
        if TransferTool.exitCode(for: error) == .success {
            print(TransferTool.fullMessage(for: error))
            exit(0)
        }
    }
    Terminal.note(TransferTool.helpMessage())
    exit(ExitStatus.usage.rawValue)
}

/// Plans and runs the transfers. A function, not top-level code, so that the
/// runner, its session and every task are released before `exit` (a leak
/// checker then sees nothing alive).
func runVerb(_ verb: any Verb) async -> Int32 {
    if let path = verb.options.curl.stderr {
        // curl's --stderr: everything meant for stderr goes there from now on.
        let fd = path == "-" ? dup(STDOUT_FILENO) : open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0, dup2(fd, STDERR_FILENO) >= 0 else {
            Terminal.note(Failure(.localFile, "cannot open --stderr \(path): \(String(cString: strerror(errno)))")
                .line(url: path))
            return ExitStatus.localFile.rawValue
        }
        close(fd)
    }
    do throws(Failure) {
        let plan = try RunPlan.make(verb: verb)
        let runner = try Runner(plan: plan)
        return await runner.run()
    } catch {
        // Plan failures come before any transfer: one line naming the URL(s) and the class.
        let urls = verb.urls.isEmpty ? "" : verb.urls[0] + (verb.urls.count > 1 ? " (and \(verb.urls.count - 1) more)" : "")
        Terminal.note(error.line(url: error.subject ?? (urls.isEmpty ? "-" : urls)))
        return error.status.rawValue
    }
}

exit(await runVerb(verb))
