// A response cache entry file (ResponseCache's disk store), parsed by
// CacheEntryCodec.decode. Anyone who can write to the cache folder controls
// these bytes, and a crash or power cut can leave any prefix of one.
//
// Properties: decode never crashes or allocates beyond the input's size;
// an accepted entry has an http(s) URL with a host, a status in 100...599,
// an HTTP version of at most 16 bytes, a finite response time, headers that
// pass the request validator (no CR, LF or NUL), and re-encodes to the very
// same bytes (so the checksum and every length were checked); no proper
// prefix of an accepted input is accepted.
import FuzzSupport
import Foundation
@testable import Transfer

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = bytes(data, size)
    guard let (key, entry) = CacheEntryCodec.decode(input) else { return 0 }
    let scheme = entry.response.url.scheme?.lowercased()
    require(scheme == "http" || scheme == "https", "non-http URL accepted: \(entry.response.url)")
    require(entry.response.url.host?.isEmpty == false, "URL without a host accepted")
    require((100...599).contains(entry.response.statusCode), "status \(entry.response.statusCode) accepted")
    require(entry.response.httpVersion.utf8.count <= 16, "long HTTP version accepted")
    require(entry.responseTime.timeIntervalSince1970.isFinite, "non-finite response time accepted")
    require((try? entry.response.headers.validate()) != nil, "a header with CR/LF/NUL accepted")
    let again = CacheEntryCodec.encode(key: key, entry)
    require(again == input, "entry does not re-encode to its bytes")
    require(CacheEntryCodec.decode(input.dropLast()) == nil, "a truncated entry accepted")
    return 0
}

@_cdecl("fuzz_cache_entry_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    runFuzzer(argc, argv, fuzz)
}
