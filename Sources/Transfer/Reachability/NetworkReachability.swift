import Dispatch
import FoundationEssentials
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Watches whether a target is reachable, as AFNetworkReachabilityManager does,
/// with Linux's routing table as the source of truth.
///
/// The status comes from the kernel's route to the target: the target is
/// reachable when a route leaves through an interface that is up and has a
/// carrier, and the interface's kind (``ReachabilityInterface``) says how.
/// Monitoring listens on a NETLINK_ROUTE socket subscribed to link, route and
/// address changes and re-evaluates on each burst of messages: no polling.
/// Nothing is sent to the target; "reachable" means "the machine would try".
///
/// ```swift
/// let reachability = NetworkReachability(domain: "example.com")
/// reachability.setStatusChangeHandler { status in print(status.localizedDescription) }
/// try reachability.startMonitoring()
/// ```
public final class NetworkReachability: Sendable {
    /// What a monitor watches.
    public enum Target: Sendable, Hashable, CustomStringConvertible {
        /// The default route (IPv4 first, then IPv6), like AFNetworking's
        /// zero-address manager.
        case defaultRoute
        /// A host name, resolved (getaddrinfo) at every evaluation; the route
        /// to each address is looked up until one is usable.
        case domain(String)
        /// A numeric IPv4 or IPv6 address.
        case address(String)

        public var description: String {
            switch self {
            case .defaultRoute: return "default route"
            case .domain(let name): return name
            case .address(let address): return address
            }
        }
    }

    /// The userInfo key of `Notification.Name.transferReachabilityDidChange`
    /// (TransferFoundation): the new ``ReachabilityStatus``.
    public static let statusUserInfoKey = TransferEventKey.reachabilityStatus

    /// A monitor of the default route.
    public static let shared = NetworkReachability()

    /// What this monitor watches.
    public let target: Target

    private let queue: DispatchQueue
    /// Posts the change notification somewhere else than the process-wide
    /// adapter (TransferFoundation's monitors on a given NotificationCenter).
    private let announce: (@Sendable (NetworkReachability, ReachabilityStatus) -> Void)?
    private let state = Protected(State())

    private struct State {
        var status: ReachabilityStatus = .unknown
        var handler: (@Sendable (ReachabilityStatus) -> Void)?
        var source: ReadSource?
        /// Bumped by every start and stop, so a late event of an old
        /// monitoring session cannot report a status.
        var generation = 0
        /// The last addresses a domain resolved to, used while resolution fails.
        var lastAddresses: [IPAddress] = []
    }

    /// Creates a monitor; nothing happens until ``startMonitoring()``.
    ///
    /// - Parameters:
    ///   - target: What to watch; the default route by default.
    ///   - queue: A serial queue for evaluations, the change handler and the
    ///     notification; a private one by default.
    ///
    /// With TransferFoundation imported, changes are posted as
    /// `Notification.Name.transferReachabilityDidChange` on
    /// `NotificationCenter.default` (TransferFoundation's
    /// `init(target:queue:notificationCenter:)` picks another center).
    public init(target: Target = .defaultRoute, queue: DispatchQueue? = nil) {
        self.target = target
        self.queue = queue ?? DispatchQueue(label: "transfer.reachability")
        self.announce = nil
    }

    /// A monitor whose changes are announced by `announce` (on the monitor's
    /// queue, after the handler) instead of the process-wide adapter.
    package init(
        target: Target, queue: DispatchQueue?,
        announce: @escaping @Sendable (NetworkReachability, ReachabilityStatus) -> Void
    ) {
        self.target = target
        self.queue = queue ?? DispatchQueue(label: "transfer.reachability")
        self.announce = announce
    }

    /// A monitor of the route to a host name.
    public convenience init(domain: String) { self.init(target: .domain(domain)) }

    /// A monitor of the route to a numeric IPv4 or IPv6 address.
    public convenience init(address: String) { self.init(target: .address(address)) }

    /// The last status seen while monitoring (``ReachabilityStatus/unknown`` before the first evaluation).
    public var status: ReachabilityStatus { state.withLock { $0.status } }
    /// Whether the network is reachable now.
    public var isReachable: Bool { status.isReachable }
    /// Whether the network is reachable over Wi-Fi now.
    public var isReachableViaWiFi: Bool { status == .reachable(.wifi) }
    /// Whether the network is reachable over Ethernet now.
    public var isReachableViaEthernet: Bool { status == .reachable(.ethernet) }
    /// Through a mobile broadband modem (AFNetworking's `reachableViaWWAN`).
    public var isReachableViaWWAN: Bool { status == .reachable(.wwan) }
    /// The status as AFNetworking words it ("Reachable via WiFi", ...).
    public var localizedStatus: String { status.localizedDescription }

    /// Sets the closure called with each new status while monitoring (nil removes it).
    ///
    /// - Note: The closure runs on the monitor's queue, before the notification is posted.
    public func setStatusChangeHandler(_ handler: (@Sendable (ReachabilityStatus) -> Void)?) {
        state.withLock { $0.handler = handler }
    }

    /// Starts listening for routing changes and evaluates the status once right
    /// away; the handler and the notification follow each change. Does nothing
    /// when already monitoring.
    ///
    /// - Throws: ``TransferError`` (`.transport`, with `systemErrno`) when the
    ///   netlink socket cannot be opened, e.g. under a seccomp profile that forbids it.
    public func startMonitoring() throws(TransferError) {
        if state.withLock({ $0.source != nil }) { return }
        let fd = try Self.openRouteMonitor()   // Bridging/NetworkReachability+Netlink.swift
        let queue = self.queue
        let generation: Int? = state.withLock { state in
            // Another thread may have started in the meantime: keep its source.
            guard state.source == nil else { return nil }
            state.generation += 1
            let generation = state.generation
            let source = ReadSource(fd: fd, queue: queue)
            source.source.setEventHandler { [weak self] in
                // Read everything queued, then evaluate once for the whole burst.
                if Self.drainRouteMonitor(fd) { self?.refresh(generation: generation) }
            }
            source.source.setCancelHandler { close(fd) }
            source.source.resume()
            state.source = source
            return generation
        }
        guard let generation else {
            close(fd)
            return
        }
        queue.async { [weak self] in self?.refresh(generation: generation) }
    }

    /// Stops listening. The last status stays readable; no handler runs afterwards.
    public func stopMonitoring() {
        state.withLock { state in
            state.generation += 1
            // cancel() only queues the cancel handler (which closes the fd).
            state.source?.source.cancel()
            state.source = nil
        }
    }

    deinit {
        state.withLock { $0.source?.source.cancel() }
    }

    /// Evaluates the status now, on the calling thread, without touching
    /// ``status`` or calling the handler (resolving a domain may block).
    public func currentStatus() -> ReachabilityStatus {
        evaluate()
    }

    private func refresh(generation: Int) {
        let status = evaluate()
        let handler: (@Sendable (ReachabilityStatus) -> Void)?? = state.withLock { state in
            guard state.generation == generation, state.status != status else { return .none }
            state.status = status
            return .some(state.handler)
        }
        guard case .some(let change) = handler else { return }
        change?(status)
        if let announce {
            announce(self, status)
        } else {
            TransferEvents.report(.reachabilityDidChange, object: self, userInfo: [Self.statusUserInfoKey: status])
        }
    }

    private func evaluate() -> ReachabilityStatus {
        switch target {
        case .defaultRoute:
            return Self.defaultRouteStatus()
        case .address(let text):
            guard let address = IPAddress(text) else { return .notReachable }
            return Self.status(for: [address])
        case .domain(let name):
            var addresses = IPAddress.resolve(name)
            if addresses.isEmpty {
                addresses = state.withLock { $0.lastAddresses }
            } else {
                state.withLock { $0.lastAddresses = addresses }
            }
            return Self.status(for: addresses)
        }
    }
}

/// A netlink read source. `@unchecked Sendable` because libdispatch objects
/// are thread-safe (resume and cancel may be called from any thread); the
/// monitor also only touches it under its `state` lock.
private final class ReadSource: @unchecked Sendable {
    let source: any DispatchSourceRead
    init(fd: Int32, queue: DispatchQueue) {
        source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
    }
}

/// A numeric address and its family, as the route query takes it.
struct IPAddress: Sendable, Hashable {
    let family: Int32
    let bytes: [UInt8]

    init?(_ text: String) {
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            family = Int32(AF_INET)
            bytes = withUnsafeBytes(of: v4) { Array($0) }
        } else if inet_pton(AF_INET6, text, &v6) == 1 {
            family = Int32(AF_INET6)
            bytes = withUnsafeBytes(of: v6) { Array($0) }
        } else {
            return nil
        }
    }

    private init(family: Int32, bytes: [UInt8]) {
        self.family = family
        self.bytes = bytes
    }

    func withBytes<R>(_ body: (UnsafeRawPointer) -> R) -> R {
        bytes.withUnsafeBytes { body($0.baseAddress!) }
    }

    /// The addresses `name` resolves to (IPv4 and IPv6, resolver order, no
    /// duplicates), or none when resolution fails.
    static func resolve(_ name: String) -> [IPAddress] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(name, nil, &hints, &list) == 0, let first = list else { return [] }
        defer { freeaddrinfo(first) }
        var result: [IPAddress] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let entry = cursor {
            if let sa = entry.pointee.ai_addr {
                if entry.pointee.ai_family == AF_INET {
                    let sin = UnsafeRawPointer(sa).loadUnaligned(as: sockaddr_in.self)
                    let address = IPAddress(
                        family: Int32(AF_INET), bytes: withUnsafeBytes(of: sin.sin_addr) { Array($0) })
                    if !result.contains(address) { result.append(address) }
                } else if entry.pointee.ai_family == AF_INET6 {
                    let sin6 = UnsafeRawPointer(sa).loadUnaligned(as: sockaddr_in6.self)
                    let address = IPAddress(
                        family: Int32(AF_INET6), bytes: withUnsafeBytes(of: sin6.sin6_addr) { Array($0) })
                    if !result.contains(address) { result.append(address) }
                }
            }
            cursor = entry.pointee.ai_next
        }
        return result
    }
}
