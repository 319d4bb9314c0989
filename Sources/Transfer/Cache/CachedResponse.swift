import FoundationEssentials

/// A response kept by a ``ResponseCache``: the head, the body, when it was
/// received, and the request header values its `Vary` names (the Linux
/// spelling of `CachedURLResponse`).
public struct CachedResponse: Sendable, Hashable {
    /// The response head as received (or as refreshed by a 304).
    public var response: HTTPResponse
    /// The body (decoded, as the task delivered it, or as the will-cache hook returned it).
    public var data: Data
    /// When the response was received (its age counts from here).
    public var responseTime: Date
    /// The request's values of the headers the response's `Vary` names, by
    /// lower-cased name; a header the request did not send has no entry.
    public var varyValues: [String: String]
    /// Who the entry is for besides its URL (cookies sent, trust fetched
    /// under): a session serves it only to a request with the same scope.
    /// Kept on disk as `Vary` values named `:audience` and `:trust`.
    var scope = CacheScope()

    /// A cached response; `varyValues` as the request that fetched it had them.
    public init(response: HTTPResponse, data: Data, responseTime: Date = Date(), varyValues: [String: String] = [:]) {
        self.response = response
        self.data = data
        self.responseTime = responseTime
        self.varyValues = varyValues
    }

    /// Whether `headers` (a request's, session headers included) match the stored `Vary` values.
    func matchesVary(_ headers: HTTPHeaders) -> Bool {
        for name in Self.varyNames(response.headers) {
            if normalized(headers[name]) != varyValues[name] { return false }
        }
        return true
    }

    /// The lower-cased field names of every `Vary` field ("*" included).
    static func varyNames(_ headers: HTTPHeaders) -> [String] {
        headers.values(for: "Vary").flatMap { $0.split(separator: ",") }
            .map { $0.trimmingBlanks().lowercased() }.filter { !$0.isEmpty }
    }

    /// The values of `headers` for the names in `response`'s `Vary`.
    static func varyValues(of headers: HTTPHeaders, for response: HTTPResponse) -> [String: String] {
        var values: [String: String] = [:]
        // A name starting with ":" is no header; it would stand for a scope tag on disk.
        for name in varyNames(response.headers) where !name.hasPrefix(":") {
            if let value = normalized(headers[name]) { values[name] = value }
        }
        return values
    }

    /// Bytes the entry takes in memory, roughly: what the cache's capacity counts.
    var cost: Int {
        var total = data.count + response.url.absoluteString.utf8.count + 64
        for field in response.headers { total += field.name.utf8.count + field.value.utf8.count + 16 }
        for (name, value) in varyValues { total += name.utf8.count + value.utf8.count + 16 }
        total += (scope.audience?.utf8.count ?? 0) + (scope.trust?.utf8.count ?? 0)
        return total
    }
}

private func normalized(_ value: String?) -> String? {
    value?.trimmingBlanks()
}
