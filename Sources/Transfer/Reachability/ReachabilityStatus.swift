import FoundationEssentials

/// Whether a target can be reached, and over which kind of interface
/// (AFNetworkReachabilityStatus, with Linux interface kinds).
public enum ReachabilityStatus: Sendable, Hashable, CustomStringConvertible {
    /// Not evaluated yet, or the kernel could not be asked.
    case unknown
    /// No usable route: no route at all, or its interface is down or has no carrier.
    case notReachable
    /// A route leaves through an interface that is up and has a carrier.
    case reachable(ReachabilityInterface)

    /// Whether the status is `.reachable` over any interface.
    public var isReachable: Bool {
        if case .reachable = self { return true }
        return false
    }

    /// The English phrase AFNetworking uses (`AFStringFromNetworkReachabilityStatus`).
    public var localizedDescription: String {
        switch self {
        case .unknown: return "Unknown"
        case .notReachable: return "Not Reachable"
        case .reachable(.wifi): return "Reachable via WiFi"
        case .reachable(.ethernet): return "Reachable via Ethernet"
        case .reachable(.wwan): return "Reachable via WWAN"
        case .reachable(.other): return "Reachable via Other Interface"
        }
    }

    public var description: String {
        switch self {
        case .unknown: return "unknown"
        case .notReachable: return "notReachable"
        case .reachable(let interface): return "reachable(\(interface.rawValue))"
        }
    }
}

/// The kind of interface a route leaves through.
///
/// - `wifi`: the interface has `/sys/class/net/IF/wireless`, or its `uevent`
///   says `DEVTYPE=wlan`.
/// - `wwan`: a mobile broadband modem (AFNetworking's `ReachableViaWWAN`):
///   the interface's `uevent` says `DEVTYPE=wwan`, as the kernel's WWAN
///   subsystem and its USB modem drivers (`qmi_wwan`, `cdc_mbim`, ...) set it.
/// - `ethernet`: any other interface whose link type is `ARPHRD_ETHER`
///   (physical NICs, veth, bridges, bonds).
/// - `other`: everything else, loopback included (tunnels, PPP, WireGuard, `lo`).
public enum ReachabilityInterface: String, Sendable, Hashable {
    /// A wired interface.
    case ethernet
    /// A wireless LAN interface.
    case wifi
    /// A mobile data interface (AFNetworking's WWAN).
    case wwan
    /// Any other interface (tunnels, bridges).
    case other
}
