import CTransfer
import FoundationEssentials
import Glibc

/// The netlink side of ``NetworkReachability`` (`ct_netlink.h`): the route
/// monitor socket, route queries, and what a route's interface is.
extension NetworkReachability {
    /// Opens the NETLINK_ROUTE socket that reports routing changes.
    ///
    /// - Throws: ``TransferError`` (`.transport`, with `systemErrno`) when it cannot be opened.
    static func openRouteMonitor() throws(TransferError) -> Int32 {
        var fd: Int32 = -1
        var err: Int32 = 0
        guard ct_netlink_monitor_open(&fd, &err) == CT_OK else {
            var error = TransferError(
                .transport, "cannot open a NETLINK_ROUTE socket: \(String(cString: strerror(err)))")
            error.systemErrno = err
            throw error
        }
        return fd
    }

    /// Reads everything queued on the monitor socket; true when a routing change was among it.
    static func drainRouteMonitor(_ fd: Int32) -> Bool {
        ct_netlink_monitor_drain(fd) != 0
    }

    static func defaultRouteStatus() -> ReachabilityStatus {
        var failed = false
        for family in [AF_INET, AF_INET6] {
            var info = ct_route_info()
            var err: Int32 = 0
            switch ct_netlink_default_route(Int32(family), &info, &err) {
            case CT_OK:
                return .reachable(interfaceKind(info))
            case CT_E_NOT_FOUND:
                continue
            default:
                failed = true
            }
        }
        return failed ? .unknown : .notReachable
    }

    static func status(for addresses: [IPAddress]) -> ReachabilityStatus {
        var failed = false
        for address in addresses {
            var info = ct_route_info()
            var err: Int32 = 0
            let code = address.withBytes { ct_netlink_route_get(address.family, $0, &info, &err) }
            switch code {
            case CT_OK where isUsable(info):
                return .reachable(interfaceKind(info))
            case CT_OK, CT_E_NOT_FOUND:
                continue
            default:
                failed = true
            }
        }
        return failed ? .unknown : .notReachable
    }

    // IFF_UP and IFF_RUNNING from <net/if.h>; spelled out because Glibc
    // imports them with different integer types across versions.
    private static let linkUp: UInt32 = 0x1
    private static let linkRunning: UInt32 = 0x40
    private static let arphrdEther: UInt16 = 1
    private static let rtnUnicast: UInt8 = 1
    private static let rtnLocal: UInt8 = 2

    private static func isUsable(_ info: ct_route_info) -> Bool {
        guard info.route_type == rtnUnicast || info.route_type == rtnLocal else { return false }
        return info.link_flags & linkUp != 0 && info.link_flags & linkRunning != 0
    }

    /// Wi-Fi and WWAN by sysfs, Ethernet by link type, everything else (loopback too) `.other`.
    ///
    /// - Parameter sysfs: The directory of interfaces (`/sys/class/net`; a test may pass another).
    static func interfaceKind(_ info: ct_route_info, sysfs: String = "/sys/class/net") -> ReachabilityInterface {
        let name = withUnsafeBytes(of: info.ifname) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        // An interface name never contains "/" or is "." / ".."; refuse to build odd paths anyway.
        if !name.isEmpty, !name.contains("/"), name != ".", name != ".." {
            let base = sysfs + "/" + name
            if FileManager.default.fileExists(atPath: base + "/wireless") { return .wifi }
            if let uevent = try? String(contentsOfFile: base + "/uevent", encoding: .utf8) {
                let lines = uevent.split(separator: "\n")
                if lines.contains("DEVTYPE=wlan") { return .wifi }
                // The WWAN core and the USB modem drivers name their netdevs'
                // device type "wwan", whatever the link type (ARPHRD_ETHER,
                // ARPHRD_RAWIP or ARPHRD_NONE).
                if lines.contains("DEVTYPE=wwan") { return .wwan }
            }
        }
        return info.link_type == arphrdEther ? .ethernet : .other
    }
}
