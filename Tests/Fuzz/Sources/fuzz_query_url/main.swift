// Query strings and request URLs built from user input: a JSON parameter
// object (decoded from the input) plus a URL string and a method.
// Properties: every escaped pair holds only unreserved characters, '?',
// '/', '%' and '=' and unescapes to its field and value; a built request
// has an http(s) URL with a host, a valid method/header set, and the query
// appended before any fragment.
import FuzzSupport
import Foundation
import Transfer

let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~?/%".utf8)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let f = fields(bytes(data, size), 4)
    var parameters: JSONValue? = nil
    if let value = try? JSONResponseSerializer.parse(Data(f[0].utf8), options: [.fragmentsAllowed]) {
        parameters = value
    } else if !f[0].isEmpty {
        parameters = .object([f[0]: .string(f[3])])
    }
    if let parameters, let pairs = try? QueryString.pairs(from: parameters) {
        for pair in pairs {
            let encoded = pair.urlEncoded
            require(encoded.utf8.allSatisfy { allowed.contains($0) || $0 == UInt8(ascii: "=") },
                    "unescaped byte in \(encoded.debugDescription)")
            let escapedField = QueryString.percentEscaped(pair.field)
            require(escapedField.removingPercentEncoding == pair.field,
                    "escaping does not round-trip for \(pair.field.debugDescription)")
            if let value = pair.value {
                require(QueryString.percentEscaped(value).removingPercentEncoding == value,
                        "escaping does not round-trip for \(value.debugDescription)")
            }
        }
        require((try? QueryString.string(from: parameters)) == pairs.map(\.urlEncoded).joined(separator: "&"),
                "string(from:) differs from its pairs")
    }
    let serializer = HTTPRequestSerializer()
    let method = HTTPMethod(f[2].isEmpty ? "GET" : f[2])
    do {
        let request = try serializer.request(method: method, urlString: f[1], parameters: parameters)
        let scheme = request.url.scheme?.lowercased()
        require(scheme == "http" || scheme == "https", "non-http URL built: \(request.url)")
        require(request.url.host?.isEmpty == false, "URL without host built: \(request.url)")
        require((try? request.headers.validate()) != nil, "invalid header in a built request")
        if let fragment = URL(string: f[1])?.fragment, !fragment.isEmpty {
            require(request.url.absoluteString.hasSuffix("#" + fragment), "query appended after the fragment")
        }
    } catch {
        require(error.code == .invalidRequest, "unexpected error \(error)")
    }
    return 0
}

@_cdecl("fuzz_query_url_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    runFuzzer(argc, argv, fuzz)
}
