import CTransfer
import Foundation
import Testing

@testable import Transfer

@Suite("Reachability WWAN")
struct ReachabilityWWANTests {
    private func info(_ name: String, linkType: UInt16) -> ct_route_info {
        var info = ct_route_info()
        info.link_type = linkType
        withUnsafeMutableBytes(of: &info.ifname) { $0.copyBytes(from: Array(name.utf8)) }
        return info
    }

    @Test("DEVTYPE=wwan in uevent makes a wwan link, whatever its link type")
    func wwanBySysfs() throws {
        let sysfs = FileManager.default.temporaryDirectory
            .appendingPathComponent("tt-sysfs-wwan-\(UInt32.random(in: 0 ... .max))").path
        defer { try? FileManager.default.removeItem(atPath: sysfs) }
        // A qmi_wwan modem in 802.3 mode, an MHI modem in raw-IP mode, a plain NIC.
        for (name, devtype) in [("wwan0", "DEVTYPE=wwan\n"), ("wwp0s20f0u6", "DEVTYPE=wwan\n"), ("eth0", "")] {
            try FileManager.default.createDirectory(atPath: sysfs + "/" + name, withIntermediateDirectories: true)
            try "INTERFACE=\(name)\nIFINDEX=4\n\(devtype)".write(
                toFile: sysfs + "/\(name)/uevent", atomically: true, encoding: .utf8)
        }

        #expect(NetworkReachability.interfaceKind(info("wwan0", linkType: 1), sysfs: sysfs) == .wwan)
        #expect(NetworkReachability.interfaceKind(info("wwp0s20f0u6", linkType: 519), sysfs: sysfs) == .wwan)
        #expect(NetworkReachability.interfaceKind(info("eth0", linkType: 1), sysfs: sysfs) == .ethernet)
        // No sysfs entry at all: the link type decides, as before.
        #expect(NetworkReachability.interfaceKind(info("wwan9", linkType: 65534), sysfs: sysfs) == .other)
    }

    @Test("a wwan status reads as AFNetworking words it")
    func wording() {
        #expect(ReachabilityStatus.reachable(.wwan).localizedDescription == "Reachable via WWAN")
        #expect(ReachabilityStatus.reachable(.wwan).isReachable)
        #expect(ReachabilityStatus.reachable(.wwan).description == "reachable(wwan)")
    }
}
