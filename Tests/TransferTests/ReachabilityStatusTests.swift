import CTransfer
import Foundation
import Testing

@testable import Transfer

@Suite("Reachability status")
struct ReachabilityStatusTests {
    @Test("statuses read as AFNetworking words them")
    func localizedDescriptions() {
        #expect(ReachabilityStatus.unknown.localizedDescription == "Unknown")
        #expect(ReachabilityStatus.notReachable.localizedDescription == "Not Reachable")
        #expect(ReachabilityStatus.reachable(.wifi).localizedDescription == "Reachable via WiFi")
        #expect(ReachabilityStatus.reachable(.ethernet).localizedDescription == "Reachable via Ethernet")
        #expect(ReachabilityStatus.reachable(.other).isReachable)
        #expect(!ReachabilityStatus.notReachable.isReachable)
        #expect(!ReachabilityStatus.unknown.isReachable)
    }

    @Test("an Ethernet link type is ethernet, loopback and others are other")
    func interfaceKinds() {
        var ether = ct_route_info()
        ether.link_type = 1  // ARPHRD_ETHER
        var loopback = ct_route_info()
        loopback.link_type = 772  // ARPHRD_LOOPBACK
        withUnsafeMutableBytes(of: &loopback.ifname) { $0.copyBytes(from: Array("lo".utf8)) }
        var tunnel = ct_route_info()
        tunnel.link_type = 65534  // ARPHRD_NONE (WireGuard, tun)

        #expect(NetworkReachability.interfaceKind(ether) == .ethernet)
        #expect(NetworkReachability.interfaceKind(loopback) == .other)
        #expect(NetworkReachability.interfaceKind(tunnel) == .other)
    }

    @Test("Wi-Fi is recognised by a wireless directory or DEVTYPE=wlan, even on an Ethernet link type")
    func wifiBySysfs() throws {
        let sysfs = FileManager.default.temporaryDirectory
            .appendingPathComponent("tt-sysfs-\(UInt32.random(in: 0 ... .max))").path
        defer { try? FileManager.default.removeItem(atPath: sysfs) }
        try FileManager.default.createDirectory(atPath: sysfs + "/wlan0/wireless", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: sysfs + "/wlp2s0", withIntermediateDirectories: true)
        try "INTERFACE=wlp2s0\nIFINDEX=3\nDEVTYPE=wlan\n".write(
            toFile: sysfs + "/wlp2s0/uevent", atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: sysfs + "/eth0", withIntermediateDirectories: true)
        try "INTERFACE=eth0\nIFINDEX=2\n".write(toFile: sysfs + "/eth0/uevent", atomically: true, encoding: .utf8)

        func info(_ name: String) -> ct_route_info {
            var info = ct_route_info()
            info.link_type = 1  // wireless NICs report ARPHRD_ETHER too
            withUnsafeMutableBytes(of: &info.ifname) { $0.copyBytes(from: Array(name.utf8)) }
            return info
        }

        #expect(NetworkReachability.interfaceKind(info("wlan0"), sysfs: sysfs) == .wifi)
        #expect(NetworkReachability.interfaceKind(info("wlp2s0"), sysfs: sysfs) == .wifi)
        #expect(NetworkReachability.interfaceKind(info("eth0"), sysfs: sysfs) == .ethernet)
    }

    @Test("a malformed address target is not reachable rather than a crash")
    func malformedAddress() {
        #expect(NetworkReachability(address: "300.1.2.3").currentStatus() == .notReachable)
        #expect(NetworkReachability(address: "not an address").currentStatus() == .notReachable)
    }
}
