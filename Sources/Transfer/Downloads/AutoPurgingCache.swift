import FoundationEssentials

/// An in-memory cache of values with a byte budget and least-recently-used
/// eviction: AFNetworking's `AFAutoPurgingImageCache` for any value.
///
/// Each value has a cost in bytes (``cost``). When an insertion takes
/// ``memoryUsage`` above ``memoryCapacity``, the least recently used values
/// (added or looked up longest ago) are removed until the usage is at most
/// ``preferredMemoryUsageAfterPurge``. Values are found by an identifier, or
/// by a request plus an optional additional identifier (for derived values,
/// such as a resized image, stored beside the original).
///
/// ```swift
/// let cache = AutoPurgingCache<Data>(memoryCapacity: 64 << 20, preferredMemoryUsageAfterPurge: 48 << 20)
/// cache.add(body, for: request)
/// let hit = cache.value(for: request)
/// ```
///
/// Every method is safe to call from any thread.
public final class AutoPurgingCache<Value: Sendable>: Sendable {
    /// The most bytes held before a purge (AFNetworking's default: 100 MB).
    public let memoryCapacity: Int
    /// What a purge brings the usage down to (AFNetworking's default: 60 MB);
    /// never more than ``memoryCapacity``.
    public let preferredMemoryUsageAfterPurge: Int
    /// The request header fields that are part of a request's key, besides the
    /// URL: two requests for one URL that differ in one of them are cached apart.
    public let varyingHeaderFields: [String]
    /// The cost in bytes of a value.
    public let cost: @Sendable (Value) -> Int

    private let state = Protected(State())

    private struct Entry {
        var value: Value
        var cost: Int
        /// The tick of the last insertion or lookup: higher is more recent.
        var lastAccess: UInt64
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var usage = 0
        var tick: UInt64 = 0

        mutating func nextTick() -> UInt64 {
            tick &+= 1
            return tick
        }
    }

    /// Creates an empty cache.
    ///
    /// - Parameters:
    ///   - memoryCapacity: The byte budget; a negative value is taken as 0.
    ///   - preferredMemoryUsageAfterPurge: The usage a purge aims at; clamped
    ///     to `0...memoryCapacity`.
    ///   - varyingHeaderFields: Request header fields that take part in
    ///     request keys (default: `Accept`, `Accept-Language`, `Authorization`).
    ///   - cost: The size of a value in bytes; negative costs count as 0.
    public init(
        memoryCapacity: Int = 100_000_000, preferredMemoryUsageAfterPurge: Int = 60_000_000,
        varyingHeaderFields: [String] = ResourceKey.defaultVaryingHeaderFields,
        cost: @escaping @Sendable (Value) -> Int
    ) {
        self.memoryCapacity = max(0, memoryCapacity)
        self.preferredMemoryUsageAfterPurge = min(max(0, preferredMemoryUsageAfterPurge), self.memoryCapacity)
        self.varyingHeaderFields = varyingHeaderFields
        self.cost = cost
    }

    /// The bytes held now.
    public var memoryUsage: Int { state.withLock { $0.usage } }

    /// The number of values held now.
    public var count: Int { state.withLock { $0.entries.count } }

    // MARK: By identifier

    /// Stores `value` under `identifier`, replacing what was there, then
    /// purges if the capacity is exceeded. The new value is the most recently
    /// used, so it is the last a purge removes.
    ///
    /// - Returns: False, and nothing stored, when the value alone costs more
    ///   than ``memoryCapacity`` (keeping it would empty the cache for
    ///   nothing); any older value under `identifier` is removed then too.
    @discardableResult
    public func add(_ value: Value, withIdentifier identifier: String) -> Bool {
        let size = max(0, cost(value))
        return state.withLock { state -> Bool in
            if let old = state.entries.removeValue(forKey: identifier) { state.usage -= old.cost }
            guard size <= memoryCapacity else { return false }
            state.entries[identifier] = Entry(value: value, cost: size, lastAccess: state.nextTick())
            state.usage += size
            if state.usage > memoryCapacity { purge(&state) }
            return true
        }
    }

    /// The value under `identifier`, which becomes the most recently used; nil when absent.
    public func value(withIdentifier identifier: String) -> Value? {
        state.withLock { state -> Value? in
            guard state.entries[identifier] != nil else { return nil }
            let tick = state.nextTick()
            state.entries[identifier]?.lastAccess = tick
            return state.entries[identifier]?.value
        }
    }

    /// Removes the value under `identifier`.
    ///
    /// - Returns: Whether there was one.
    @discardableResult
    public func removeValue(withIdentifier identifier: String) -> Bool {
        state.withLock { state -> Bool in
            guard let old = state.entries.removeValue(forKey: identifier) else { return false }
            state.usage -= old.cost
            return true
        }
    }

    /// Removes every value (AFNetworking's answer to a memory warning).
    ///
    /// - Returns: Whether there was any.
    @discardableResult
    public func removeAll() -> Bool {
        state.withLock { state -> Bool in
            let had = !state.entries.isEmpty
            state.entries.removeAll()
            state.usage = 0
            return had
        }
    }

    // MARK: By request

    /// The identifier of `request` (see ``ResourceKey``) with `additionalIdentifier`.
    public func identifier(for request: Request, additionalIdentifier: String? = nil) -> String {
        ResourceKey.string(
            for: request, varyingHeaderFields: varyingHeaderFields, additionalIdentifier: additionalIdentifier)
    }

    /// ``add(_:withIdentifier:)`` under the key of `request` and `additionalIdentifier`.
    @discardableResult
    public func add(_ value: Value, for request: Request, additionalIdentifier: String? = nil) -> Bool {
        add(value, withIdentifier: identifier(for: request, additionalIdentifier: additionalIdentifier))
    }

    /// ``value(withIdentifier:)`` for the key of `request` and `additionalIdentifier`.
    public func value(for request: Request, additionalIdentifier: String? = nil) -> Value? {
        value(withIdentifier: identifier(for: request, additionalIdentifier: additionalIdentifier))
    }

    /// ``removeValue(withIdentifier:)`` for the key of `request` and `additionalIdentifier`.
    @discardableResult
    public func removeValue(for request: Request, additionalIdentifier: String? = nil) -> Bool {
        removeValue(withIdentifier: identifier(for: request, additionalIdentifier: additionalIdentifier))
    }

    // MARK: Purging

    /// Under the lock: drops the least recently used entries until the usage
    /// is at most the preferred usage.
    private func purge(_ state: inout State) {
        let oldestFirst = state.entries.sorted { $0.value.lastAccess < $1.value.lastAccess }
        for (identifier, entry) in oldestFirst {
            if state.usage <= preferredMemoryUsageAfterPurge { break }
            state.entries.removeValue(forKey: identifier)
            state.usage -= entry.cost
        }
    }
}

extension AutoPurgingCache where Value == Data {
    /// A cache of bodies, each costing its byte count.
    public convenience init(
        memoryCapacity: Int = 100_000_000, preferredMemoryUsageAfterPurge: Int = 60_000_000,
        varyingHeaderFields: [String] = ResourceKey.defaultVaryingHeaderFields
    ) {
        self.init(
            memoryCapacity: memoryCapacity, preferredMemoryUsageAfterPurge: preferredMemoryUsageAfterPurge,
            varyingHeaderFields: varyingHeaderFields, cost: { $0.count })
    }
}

/// How ``AutoPurgingCache`` and ``ResourceDownloader`` name a request: the
/// method, the absolute URL without its user name and password, and the
/// values of the varying header fields that the request sets (names compared
/// case-insensitively), so that requests for one URL that ask for different
/// representations stay apart.
///
/// A key says nothing about who is asking beyond the varying header fields:
/// ``ResourceDownloader`` therefore never keys a request that carries
/// credentials (it shares nothing unless its caller names a key).
public enum ResourceKey {
    /// `Accept`, `Accept-Language` and `Authorization`: what changes the body
    /// a server sends for one URL, or who may see it.
    public static let defaultVaryingHeaderFields = ["Accept", "Accept-Language", "Authorization"]

    /// The key text of `request`; `additionalIdentifier`, when given, is
    /// appended on a line of its own after an `@`, as AFNetworking appends it.
    /// The URL's userinfo is left out.
    public static func string(
        for request: Request, varyingHeaderFields: [String], additionalIdentifier: String? = nil
    ) -> String {
        // Userinfo never enters a key (a key may be logged or kept); a URL
        // whose userinfo cannot be cut off is named by a value no other URL has.
        let url = RequestIdentity.removingUserinfo(request.url.absoluteString) ?? "unkeyable " + UUID().uuidString
        var key = request.method.rawValue + " " + url
        for field in varyingHeaderFields {
            guard let value = request.headers[field] else { continue }
            // A newline cannot appear in a valid header value, so fields cannot run together.
            key += "\n" + field.lowercased() + ": " + value
        }
        if let additionalIdentifier { key += "\n@" + additionalIdentifier }
        return key
    }
}
