import Foundation
import Synchronization
import TestSupport
import Testing
import Transfer
import TransferFoundation

@Suite("Reachability monitor in this namespace")
struct ReachabilityMonitorTests {
    @Test("starting reports the first status through the handler and the notification")
    func firstStatusIsReported() throws {
        let center = NotificationCenter()
        let reachability = NetworkReachability(target: .address("127.0.0.1"), notificationCenter: center)
        let handled = DispatchSemaphore(value: 0)
        let posted = DispatchSemaphore(value: 0)
        let seen = Locked<[ReachabilityStatus]>([])
        let observer = center.addObserver(forName: .transferReachabilityDidChange, object: nil, queue: nil) { note in
            if let status = note.userInfo?[NetworkReachability.statusUserInfoKey] as? ReachabilityStatus {
                seen.withLock { $0.append(status) }
            }
            posted.signal()
        }
        defer { center.removeObserver(observer) }
        reachability.setStatusChangeHandler { _ in handled.signal() }

        try reachability.startMonitoring()
        defer { reachability.stopMonitoring() }

        #expect(handled.wait(timeout: .now() + 10) == .success)
        #expect(posted.wait(timeout: .now() + 10) == .success)
        let expected = reachability.currentStatus()
        #expect(seen.withLock { $0 } == [expected])
        #expect(reachability.status == expected)
        #expect(reachability.localizedStatus == expected.localizedDescription)
    }

    @Test("stopping and starting again works, and a second start is a no-op")
    func restart() throws {
        let reachability = NetworkReachability(target: .defaultRoute, notificationCenter: NotificationCenter())
        let changes = DispatchSemaphore(value: 0)
        reachability.setStatusChangeHandler { _ in changes.signal() }

        try reachability.startMonitoring()
        try reachability.startMonitoring()
        #expect(changes.wait(timeout: .now() + 10) == .success)
        reachability.stopMonitoring()
        reachability.stopMonitoring()

        #expect(reachability.status != .unknown)
        try reachability.startMonitoring()
        reachability.stopMonitoring()
    }
}
