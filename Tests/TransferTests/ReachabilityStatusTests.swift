import CTransfer
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

    @Test("a malformed address target is not reachable rather than a crash")
    func malformedAddress() {
        #expect(NetworkReachability(address: "300.1.2.3").currentStatus() == .notReachable)
        #expect(NetworkReachability(address: "not an address").currentStatus() == .notReachable)
    }
}
