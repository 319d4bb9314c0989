import Foundation

/// The server side of HTTP Digest authentication (RFC 7616, and RFC 2069
/// without `qop`) for TestServer's `/digest-auth` route: challenges, and the
/// check of an `Authorization: Digest` answer. Stateless: a nonce says by its
/// prefix whether it is stale.
public enum DigestServer {
    public static let realm = "TestServer digest"

    /// The challenge's options, from the route's query.
    public struct Options: Sendable {
        /// `MD5` (default) or `SHA-256`.
        public var algorithm: String
        /// `qop="auth"`; false: none (RFC 2069).
        public var qop: Bool
        /// The first nonce handed out is stale: a right answer to it gets a
        /// 401 with `stale=true` and a fresh nonce.
        public var staleFirst: Bool
    }

    /// `WWW-Authenticate` for a new challenge.
    static func challenge(_ options: Options, stale: Bool) -> String {
        let nonce = (options.staleFirst && !stale ? "old-" : "new-") + UUID().uuidString.lowercased()
        var value = #"Digest realm="\#(realm)", nonce="\#(nonce)", opaque="0p4que""#
        if options.qop { value += #", qop="auth""# }
        value += ", algorithm=\(options.algorithm)"
        if stale { value += ", stale=true" }
        return value
    }

    enum Verdict: Equatable {
        case accepted
        case stale
        case refused
    }

    /// Checks `authorization` for `method` and `target` against `user`/`password`.
    static func check(_ authorization: String?, method: String, target: String, user: String, password: String,
                      options: Options) -> Verdict
    {
        guard let authorization, authorization.lowercased().hasPrefix("digest ") else { return .refused }
        let parameters = parse(String(authorization.dropFirst(7)))
        let algorithm: String = (parameters["algorithm"] ?? "MD5").uppercased()
        guard parameters["username"] == user, parameters["realm"] == realm, parameters["uri"] == target,
            parameters["opaque"] == "0p4que", let nonce = parameters["nonce"], let response = parameters["response"],
            algorithm == options.algorithm.uppercased()
        else { return .refused }
        let sha = options.algorithm.uppercased() == "SHA-256"
        func hash(_ text: String) -> String { sha ? sha256(text) : md5(text) }
        let ha1 = hash("\(user):\(realm):\(password)")
        let ha2 = hash("\(method):\(target)")
        let expected: String
        if options.qop {
            guard parameters["qop"] == "auth", let nc = parameters["nc"], nc.count == 8,
                UInt32(nc, radix: 16).map({ $0 > 0 }) == true, let cnonce = parameters["cnonce"], !cnonce.isEmpty
            else { return .refused }
            expected = hash("\(ha1):\(nonce):\(nc):\(cnonce):auth:\(ha2)")
        } else {
            guard parameters["qop"] == nil else { return .refused }
            expected = hash("\(ha1):\(nonce):\(ha2)")
        }
        guard response.lowercased() == expected else { return .refused }
        return nonce.hasPrefix("old-") ? .stale : .accepted
    }

    /// `name=value` and `name="value"` pairs (no commas inside our values).
    static func parse(_ text: String) -> [String: String] {
        var result: [String: String] = [:]
        for item in text.split(separator: ",") {
            guard let equals = item.firstIndex(of: "=") else { continue }
            let name = item[..<equals].trimmingCharacters(in: .whitespaces).lowercased()
            var value = item[item.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 {
                value = String(value.dropFirst().dropLast())
            }
            result[name] = value
        }
        return result
    }

    static func sha256(_ text: String) -> String {
        FileDigest.sha256(Array(text.utf8))
    }

    /// MD5 (RFC 1321), lowercase hex. Only for this test server: Digest's
    /// MD5 variant needs it and the engine has no MD5 of its own.
    static func md5(_ text: String) -> String {
        let shifts: [UInt32] = [7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
                                5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20,
                                4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
                                6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21]
        var table: [UInt32] = []
        for i in 0..<64 {
            let value: Double = abs(sin(Double(i + 1))) * 4_294_967_296
            table.append(UInt32(truncatingIfNeeded: Int64(value)))
        }
        var message = Array(text.utf8)
        let bitLength = UInt64(message.count) * 8
        message.append(0x80)
        while message.count % 64 != 56 { message.append(0) }
        for i in 0..<8 { message.append(UInt8(truncatingIfNeeded: bitLength >> (8 * UInt64(i)))) }
        var a0: UInt32 = 0x6745_2301, b0: UInt32 = 0xefcd_ab89, c0: UInt32 = 0x98ba_dcfe, d0: UInt32 = 0x1032_5476
        for chunk in stride(from: 0, to: message.count, by: 64) {
            let words = (0..<16).map { i -> UInt32 in
                let j = chunk + i * 4
                let low: UInt32 = UInt32(message[j]) | UInt32(message[j + 1]) << 8
                let high: UInt32 = UInt32(message[j + 2]) << 16 | UInt32(message[j + 3]) << 24
                return low | high
            }
            var a = a0, b = b0, c = c0, d = d0
            for i in 0..<64 {
                var f: UInt32
                let g: Int
                switch i {
                case 0..<16: f = (b & c) | (~b & d); g = i
                case 16..<32: f = (d & b) | (~d & c); g = (5 * i + 1) % 16
                case 32..<48: f = b ^ c ^ d; g = (3 * i + 5) % 16
                default: f = c ^ (b | ~d); g = (7 * i) % 16
                }
                f = f &+ a &+ table[i] &+ words[g]
                a = d
                d = c
                c = b
                b = b &+ (f << shifts[i] | f >> (32 - shifts[i]))
            }
            a0 = a0 &+ a
            b0 = b0 &+ b
            c0 = c0 &+ c
            d0 = d0 &+ d
        }
        var bytes: [UInt8] = []
        for word in [a0, b0, c0, d0] {
            for i in 0..<4 { bytes.append(UInt8(truncatingIfNeeded: word >> (8 * UInt32(i)))) }
        }
        return FileDigest.hex(bytes)
    }
}
