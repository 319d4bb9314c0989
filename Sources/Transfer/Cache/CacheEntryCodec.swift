import FoundationEssentials

/// The on-disk form of one cache entry, and its validating decoder.
///
/// Layout (integers little-endian): `"TRC1"`; key, URL and HTTP version as
/// u32 length + UTF-8; u16 status; the response time as i64 milliseconds
/// since 1970; u32 header count, each name and value as u32
/// length + UTF-8; u32 Vary value count, each the same; u64 body length +
/// body; u64 FNV-1a of every byte before it. The entry's scope
/// (``CachedResponse/scope``) is kept among the Vary values, under the names
/// `:audience` and `:trust` (no header name starts with a colon).
///
/// The decoder trusts nothing: every length is checked against the bytes
/// left and against a cap before anything is allocated, the checksum must
/// match, the entry must end exactly at the end of the file, and headers
/// must pass ``HTTPHeaders/validate(name:value:)``. A file that fails any
/// check (truncated, bit-flipped, foreign) decodes to nil: a cache miss.
enum CacheEntryCodec {
    static let magic: [UInt8] = Array("TRC1".utf8)
    /// The Vary names that hold the entry's scope.
    static let audienceName = ":audience"
    static let trustName = ":trust"
    /// Caps on what one entry may hold (a file is not allowed to make us allocate more).
    static let maxStringLength = 64 * 1024
    static let maxFieldCount = 1024
    /// Response times within ±3000 years of 1970, in milliseconds.
    static let maxMilliseconds: Double = 1e14

    static func encode(key: String, _ entry: CachedResponse) -> Data {
        var out = [UInt8]()
        out.reserveCapacity(entry.data.count + 512)
        out += magic
        putString(&out, key)
        putString(&out, entry.response.url.absoluteString)
        putString(&out, entry.response.httpVersion)
        put(&out, UInt64(UInt16(clamping: entry.response.statusCode)), bytes: 2)
        let milliseconds = (entry.responseTime.timeIntervalSince1970 * 1000).rounded()
        let clamped = milliseconds.isFinite ? Int64(max(-maxMilliseconds, min(maxMilliseconds, milliseconds))) : 0
        put(&out, UInt64(bitPattern: clamped), bytes: 8)
        let fields = Array(entry.response.headers)
        put(&out, UInt64(fields.count), bytes: 4)
        for field in fields {
            putString(&out, field.name)
            putString(&out, field.value)
        }
        var values = entry.varyValues
        if let audience = entry.scope.audience { values[audienceName] = audience }
        if let trust = entry.scope.trust { values[trustName] = trust }
        let vary = values.sorted { $0.key < $1.key }
        put(&out, UInt64(vary.count), bytes: 4)
        for (name, value) in vary {
            putString(&out, name)
            putString(&out, value)
        }
        put(&out, UInt64(entry.data.count), bytes: 8)
        out += entry.data
        put(&out, fnv1a(out[...]), bytes: 8)
        return Data(out)
    }

    /// The key and entry in `data`, or nil when it is not a whole, valid entry.
    static func decode(_ data: Data) -> (key: String, entry: CachedResponse)? {
        let bytes = [UInt8](data)
        guard bytes.count >= magic.count + 8, bytes.starts(with: magic) else { return nil }
        let payloadEnd = bytes.count - 8
        var checksum: UInt64 = 0
        for k in 0..<8 { checksum |= UInt64(bytes[payloadEnd + k]) << (8 * UInt64(k)) }
        guard checksum == fnv1a(bytes[..<payloadEnd]) else { return nil }
        var reader = Reader(bytes: bytes, position: magic.count, end: payloadEnd)
        guard let key = reader.string(), let urlText = reader.string(), let version = reader.string(),
            version.utf8.count <= 16,
            let status = reader.integer(bytes: 2), (100...599).contains(status),
            let timeBits = reader.integer(bytes: 8), let fieldCount = reader.integer(bytes: 4),
            fieldCount <= UInt64(maxFieldCount)
        else { return nil }
        let milliseconds = Int64(bitPattern: timeBits)
        guard Double(milliseconds.magnitude) <= maxMilliseconds else { return nil }
        // Only the URL text encode() writes: one that parses back to itself.
        guard let url = URL(string: urlText), url.absoluteString == urlText, let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https", url.host?.isEmpty == false
        else { return nil }
        var headers = HTTPHeaders()
        for _ in 0..<fieldCount {
            guard let name = reader.string(), let value = reader.string(), !name.isEmpty,
                (try? HTTPHeaders.validate(name: name, value: value)) != nil
            else { return nil }
            headers.add(name: name, value: value)
        }
        guard let varyCount = reader.integer(bytes: 4), varyCount <= UInt64(maxFieldCount) else { return nil }
        var vary: [String: String] = [:]
        var previous: String?
        for _ in 0..<varyCount {
            // Names in strictly increasing order, as encode() writes them.
            guard let name = reader.string(), let value = reader.string(), previous.map({ $0 < name }) ?? true
            else { return nil }
            vary[name] = value
            previous = name
        }
        guard let bodyLength = reader.integer(bytes: 8), let body = reader.bytes(bodyLength), reader.isAtEnd
        else { return nil }
        let response = HTTPResponse(url: url, statusCode: Int(status), headers: headers, httpVersion: version)
        var scope = CacheScope()
        scope.audience = vary.removeValue(forKey: audienceName)
        scope.trust = vary.removeValue(forKey: trustName)
        var entry = CachedResponse(response: response, data: Data(body),
                                   responseTime: Date(timeIntervalSince1970: Double(milliseconds) / 1000),
                                   varyValues: vary)
        entry.scope = scope
        return (key, entry)
    }

    private static func put(_ out: inout [UInt8], _ value: UInt64, bytes: Int) {
        for k in 0..<bytes { out.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(k)))) }
    }

    private static func putString(_ out: inout [UInt8], _ text: String) {
        let utf8 = Array(text.utf8)
        put(&out, UInt64(utf8.count), bytes: 4)
        out += utf8
    }

    static func fnv1a(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return hash
    }

    /// Reads fields, never past `end`.
    private struct Reader {
        let bytes: [UInt8]
        var position: Int
        let end: Int

        var isAtEnd: Bool { position == end }

        mutating func integer(bytes count: Int) -> UInt64? {
            guard end - position >= count else { return nil }
            var value: UInt64 = 0
            for k in 0..<count { value |= UInt64(bytes[position + k]) << (8 * UInt64(k)) }
            position += count
            return value
        }

        mutating func bytes(_ count: UInt64) -> ArraySlice<UInt8>? {
            guard count <= UInt64(end - position) else { return nil }
            let slice = bytes[position..<position + Int(count)]
            position += Int(count)
            return slice
        }

        mutating func string() -> String? {
            guard let length = integer(bytes: 4), length <= UInt64(CacheEntryCodec.maxStringLength),
                let raw = bytes(length)
            else { return nil }
            return String(validating: raw, as: UTF8.self)
        }
    }
}
