// reachability-probe: prints each NetworkReachability status change as a line.
//
// A test helper: the reachability integration tests run it inside a network
// namespace (`ip netns exec NS reachability-probe default`) because a
// namespace is per thread and a monitor's queries run on dispatch threads.
//
//   reachability-probe default | domain NAME | address ADDR
//
// Lines on stdout: "status <status>" for each change (the first is the
// initial evaluation), "error <message>" on failure. Exits when stdin closes.

import Dispatch
import Glibc
import Transfer

/// Writes `bytes` to `descriptor` whole (no stdio buffering: the reader waits for lines).
func writeAll(_ descriptor: Int32, _ text: String) {
    let bytes = Array(text.utf8)
    var written = 0
    while written < bytes.count {
        let count = bytes[written...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        if count < 0 && errno == EINTR { continue }
        guard count > 0 else { return }
        written += count
    }
}

/// A line on stderr.
func emitError(_ line: String) { writeAll(2, line + "\n") }

let arguments = Array(CommandLine.arguments.dropFirst())
let target: NetworkReachability.Target
switch (arguments.first, arguments.count) {
case ("default", 1):
    target = .defaultRoute
case ("domain", 2):
    target = .domain(arguments[1])
case ("address", 2):
    target = .address(arguments[1])
default:
    emitError("usage: reachability-probe default | domain NAME | address ADDR")
    exit(64)
}

/// Writes one line straight to fd 1.
func emit(_ line: String) { writeAll(1, line + "\n") }

let reachability = NetworkReachability(target: target)
reachability.setStatusChangeHandler { status in
    emit("status \(status)")
}
do {
    try reachability.startMonitoring()
} catch {
    emit("error \(error)")
    exit(1)
}

// Stay alive until the parent closes our stdin (a blocking read on a queue of its own).
DispatchQueue(label: "reachability-probe.stdin").async {
    var buffer = [UInt8](repeating: 0, count: 256)
    while true {
        let count = buffer.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
        if count < 0 && errno == EINTR { continue }
        if count <= 0 { break }
    }
    reachability.stopMonitoring()
    exit(0)
}
dispatchMain()
