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
import Foundation
import Transfer

#if canImport(Glibc)
    import Glibc
#endif

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
    FileHandle.standardError.write(Data("usage: reachability-probe default | domain NAME | address ADDR\n".utf8))
    exit(64)
}

/// Writes one line straight to fd 1 (no stdio buffering: the reader waits for it).
func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

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

// Stay alive until the parent closes our stdin.
Thread.detachNewThread {
    while FileHandle.standardInput.availableData.count > 0 {}
    reachability.stopMonitoring()
    exit(0)
}
dispatchMain()
