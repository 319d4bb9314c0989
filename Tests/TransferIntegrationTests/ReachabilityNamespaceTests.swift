import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Runs `NetworkReachability` inside throwaway network namespaces (through the
/// `reachability-probe` helper under `ip netns exec`) and changes links and
/// routes under it with iproute2.
@Suite("Reachability in network namespaces", .serialized)
struct ReachabilityNamespaceTests {
    @Test("the default route goes not reachable, reachable via ethernet, not reachable")
    func defaultRouteFollowsLinkAndRoute() throws {
        try NetworkNamespace.requireSupport()
        let ns = try NetworkNamespace()
        defer { ns.remove() }
        let probe = try ProbeProcess(namespace: ns, arguments: ["default"])
        defer { probe.stop() }

        #expect(try probe.nextStatus() == "notReachable")

        try ns.ip("link", "add", "veth0", "type", "veth", "peer", "name", "veth1")
        try ns.ip("addr", "add", "10.200.0.2/24", "dev", "veth0")
        try ns.ip("link", "set", "veth1", "up")
        try ns.ip("link", "set", "veth0", "up")
        try ns.ip("route", "add", "default", "via", "10.200.0.1", "dev", "veth0")
        #expect(try probe.waitForStatus("reachable(ethernet)"))

        // The peer going down takes the carrier away; the route stays but is unusable.
        try ns.ip("link", "set", "veth1", "down")
        #expect(try probe.waitForStatus("notReachable"))

        try ns.ip("link", "set", "veth1", "up")
        #expect(try probe.waitForStatus("reachable(ethernet)"))

        try ns.ip("route", "del", "default")
        #expect(try probe.waitForStatus("notReachable"))
    }

    @Test("an IPv6-only default route counts as reachable")
    func ipv6DefaultRoute() throws {
        try NetworkNamespace.requireSupport()
        let ns = try NetworkNamespace()
        defer { ns.remove() }
        let probe = try ProbeProcess(namespace: ns, arguments: ["default"])
        defer { probe.stop() }

        #expect(try probe.nextStatus() == "notReachable")

        try ns.ip("link", "add", "veth0", "type", "veth", "peer", "name", "veth1")
        try ns.ip("link", "set", "veth1", "up")
        try ns.ip("link", "set", "veth0", "up")
        // nodad: usable at once, no duplicate address detection to wait for.
        try ns.ip("-6", "addr", "add", "fd00:7::2/64", "dev", "veth0", "nodad")
        try ns.ip("-6", "route", "add", "default", "via", "fd00:7::1", "dev", "veth0")
        #expect(try probe.waitForStatus("reachable(ethernet)"))

        try ns.ip("link", "set", "veth0", "down")
        #expect(try probe.waitForStatus("notReachable"))
    }

    @Test("an address on a connected subnet is reachable without any default route")
    func addressUsesItsOwnRoute() throws {
        try NetworkNamespace.requireSupport()
        let ns = try NetworkNamespace()
        defer { ns.remove() }
        let probe = try ProbeProcess(namespace: ns, arguments: ["address", "10.201.0.9"])
        defer { probe.stop() }

        #expect(try probe.nextStatus() == "notReachable")

        try ns.ip("link", "add", "veth0", "type", "veth", "peer", "name", "veth1")
        try ns.ip("addr", "add", "10.201.0.2/24", "dev", "veth0")
        try ns.ip("link", "set", "veth1", "up")
        try ns.ip("link", "set", "veth0", "up")
        #expect(try probe.waitForStatus("reachable(ethernet)"))

        try ns.ip("addr", "del", "10.201.0.2/24", "dev", "veth0")
        #expect(try probe.waitForStatus("notReachable"))
    }

    @Test("loopback counts as another interface, and only while lo is up")
    func loopbackIsOther() throws {
        try NetworkNamespace.requireSupport()
        let ns = try NetworkNamespace()
        defer { ns.remove() }
        let probe = try ProbeProcess(namespace: ns, arguments: ["domain", "localhost"])
        defer { probe.stop() }

        #expect(try probe.nextStatus() == "notReachable")

        try ns.ip("link", "set", "lo", "up")
        #expect(try probe.waitForStatus("reachable(other)"))

        try ns.ip("link", "set", "lo", "down")
        #expect(try probe.waitForStatus("notReachable"))
    }
}

/// A network namespace created for one test; `remove()` deletes it and
/// everything in it (veth pairs included).
struct NetworkNamespace {
    let name: String

    static let ipPath: String? = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }

    /// Cancels (skips) the current test with the reason when namespaces
    /// cannot be made here: `ip netns` needs iproute2 and root, or
    /// CAP_SYS_ADMIN + CAP_NET_ADMIN.
    static func requireSupport() throws {
        if let reason = unsupportedReason { try Test.cancel(Comment(rawValue: reason)) }
    }

    static let unsupportedReason: String? = {
        guard ipPath != nil else { return "skipped: iproute2's `ip` is not installed" }
        guard geteuid() == 0 else { return "skipped: creating network namespaces needs root" }
        // A container may be root without CAP_SYS_ADMIN: try once.
        let name = "tt-check-\(getpid())"
        guard (try? run(["netns", "add", name])) != nil else {
            return "skipped: `ip netns add` failed (no CAP_SYS_ADMIN / CAP_NET_ADMIN?)"
        }
        _ = try? run(["netns", "del", name])
        return nil
    }()

    init() throws {
        name = "tt-reach-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        try Self.run(["netns", "add", name])
    }

    func ip(_ arguments: String...) throws {
        try Self.run(["-n", name] + arguments)
    }

    func remove() {
        _ = try? Self.run(["netns", "del", name])
    }

    @discardableResult
    static func run(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ipPath ?? "/usr/sbin/ip")
        process.arguments = arguments
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        guard process.terminationStatus == 0 else {
            throw CommandFailed(command: "ip " + arguments.joined(separator: " "), message: message)
        }
        return message
    }
}

struct CommandFailed: Error, CustomStringConvertible {
    let command: String
    let message: String
    var description: String { "\(command): \(message)" }
}

/// `ip netns exec NS reachability-probe ...`, with its status lines collected
/// by a reader thread and waited for with deadlines.
final class ProbeProcess: Sendable {
    private let process: Process
    private let input: Pipe
    private let lines = Locked<[String]>([])
    private let arrived = DispatchSemaphore(value: 0)
    private let consumed = Locked(0)

    init(namespace: NetworkNamespace, arguments: [String]) throws {
        let probe = Self.probePath()
        guard FileManager.default.isExecutableFile(atPath: probe) else {
            throw CommandFailed(command: probe, message: "reachability-probe was not built")
        }
        process = Process()
        process.executableURL = URL(fileURLWithPath: NetworkNamespace.ipPath ?? "/usr/sbin/ip")
        process.arguments = ["netns", "exec", namespace.name, probe] + arguments
        input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        let reader = output.fileHandleForReading
        Thread.detachNewThread { [self] in
            var pending = Data()
            while true {
                let chunk = reader.availableData
                if chunk.isEmpty { break }
                pending.append(chunk)
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    pending.removeSubrange(pending.startIndex...newline)
                    lines.withLock { $0.append(line) }
                    arrived.signal()
                }
            }
        }
    }

    /// The next status line, waiting at most `timeout` seconds for it.
    func nextStatus(timeout: Double = 10) throws -> String {
        guard arrived.wait(timeout: .now() + timeout) == .success else {
            throw CommandFailed(command: "reachability-probe", message: "no status within \(timeout) s")
        }
        let line = consumed.withLock { index -> String in
            defer { index += 1 }
            return lines.withLock { $0[index] }
        }
        guard line.hasPrefix("status ") else {
            throw CommandFailed(command: "reachability-probe", message: line)
        }
        return String(line.dropFirst("status ".count))
    }

    /// Waits until the probe reports `status`, skipping intermediate ones
    /// (a burst of netlink messages may be seen as two evaluations).
    func waitForStatus(_ status: String, timeout: Double = 10) throws -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return false }
            if try nextStatus(timeout: left) == status { return true }
        }
    }

    func stop() {
        try? input.fileHandleForWriting.close()
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }

    /// The probe sits next to the test bundle in the build directory.
    static func probePath() -> String {
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? ""
        var directory = URL(fileURLWithPath: exe).deletingLastPathComponent()
        // .build/debug/TransferPackageTests.xctest is itself the executable on Linux.
        if directory.lastPathComponent.hasSuffix(".xctest") { directory.deleteLastPathComponent() }
        return directory.appendingPathComponent("reachability-probe").path
    }
}
