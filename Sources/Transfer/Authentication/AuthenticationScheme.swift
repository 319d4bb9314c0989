import FoundationEssentials

/// The scheme of an HTTP authentication challenge (the first token of a
/// `WWW-Authenticate` challenge, RFC 9110 §11.6.1).
public enum AuthenticationScheme: Sendable, Hashable, CustomStringConvertible {
    /// RFC 7617. A user/password answer is sent by libcurl.
    case basic
    /// RFC 7616 (MD5, SHA-256, with or without `qop=auth`). A user/password
    /// answer is computed and sent by libcurl.
    case digest
    /// RFC 6750. Transfer cannot answer it with a user/password: send an
    /// `Authorization: Bearer` header (``HTTPHeaders/Field/authorization(bearerToken:)``).
    case bearer
    /// Any other scheme, lower-cased (`negotiate`, `hoba`, ...).
    case other(String)

    /// A scheme from its name, as it appears in `WWW-Authenticate`.
    public init(name: String) {
        switch name.lowercased() {
        case "basic": self = .basic
        case "digest": self = .digest
        case "bearer": self = .bearer
        case let other: self = .other(other)
        }
    }

    public var description: String {
        switch self {
        case .basic: "basic"
        case .digest: "digest"
        case .bearer: "bearer"
        case .other(let name): name
        }
    }

    /// Whether a user/password credential can answer it (through libcurl).
    var takesPassword: Bool { self == .basic || self == .digest }
}

/// One challenge of a `WWW-Authenticate` header: its scheme and realm.
struct AuthenticationChallengeHeader: Sendable, Hashable {
    var scheme: AuthenticationScheme
    var realm: String?
    /// `algorithm` of a Digest challenge, upper-cased; nil when absent (MD5).
    var algorithm: String?

    /// The most bytes of header values looked at: a server cannot make the
    /// parser's work or its result grow without bound.
    static let maximumLength = 16 * 1024
    /// The most challenges kept from one response.
    static let maximumCount = 16

    /// Parses the challenges of `WWW-Authenticate` header values (one entry
    /// per header line; one line may hold several comma-separated
    /// challenges). Never fails: what cannot be read is skipped.
    static func parse(_ values: [String]) -> [AuthenticationChallengeHeader] {
        var result: [AuthenticationChallengeHeader] = []
        var budget = maximumLength
        for value in values where budget > 0 && result.count < maximumCount {
            let scalars = Array(value.unicodeScalars.prefix(budget))
            budget -= scalars.count
            for item in splitItems(scalars) {
                if result.count >= maximumCount { break }
                // "Scheme", "Scheme token68" or "Scheme name=value" start a
                // challenge; a bare "name=value" is a parameter of the last one.
                var index = 0
                while index < item.count, isTokenCharacter(item[index]) { index += 1 }
                let token = String(String.UnicodeScalarView(item[0..<index]))
                var rest = index
                while rest < item.count, item[rest] == " " || item[rest] == "\t" { rest += 1 }
                let startsChallenge = !token.isEmpty
                    && (index == item.count || (rest > index && (rest == item.count || item[rest] != "=")))
                if startsChallenge {
                    result.append(AuthenticationChallengeHeader(scheme: AuthenticationScheme(name: token)))
                    if let (name, parameter) = parameter(Array(item[rest...])) {
                        result[result.count - 1].apply(name: name, value: parameter)
                    }
                } else if !result.isEmpty, let (name, parameter) = parameter(item) {
                    result[result.count - 1].apply(name: name, value: parameter)
                }
            }
        }
        return result
    }

    /// The challenge to answer: Digest (with an algorithm libcurl knows) over
    /// Basic over the first one, as libcurl picks the safest it can do.
    static func preferred(in challenges: [AuthenticationChallengeHeader]) -> AuthenticationChallengeHeader? {
        let digestAlgorithms: Set<String> = ["MD5", "MD5-SESS", "SHA-256", "SHA-256-SESS", "SHA-512-256",
                                             "SHA-512-256-SESS"]
        if let digest = challenges.first(where: {
            $0.scheme == .digest && ($0.algorithm.map(digestAlgorithms.contains) ?? true)
        }) {
            return digest
        }
        return challenges.first { $0.scheme == .basic } ?? challenges.first
    }

    private init(scheme: AuthenticationScheme) {
        self.scheme = scheme
    }

    private mutating func apply(name: String, value: String) {
        switch name.lowercased() {
        case "realm" where realm == nil: realm = value
        case "algorithm" where algorithm == nil: algorithm = value.uppercased()
        default: break
        }
    }

    /// Items separated by commas outside quoted strings, trimmed.
    private static func splitItems(_ scalars: [Unicode.Scalar]) -> [[Unicode.Scalar]] {
        var items: [[Unicode.Scalar]] = []
        var current: [Unicode.Scalar] = []
        var quoted = false
        var escaped = false
        for scalar in scalars {
            if quoted {
                current.append(scalar)
                if escaped {
                    escaped = false
                } else if scalar == "\\" {
                    escaped = true
                } else if scalar == "\"" {
                    quoted = false
                }
            } else if scalar == "," {
                items.append(current)
                current = []
            } else {
                if scalar == "\"" { quoted = true }
                current.append(scalar)
            }
        }
        items.append(current)
        return items.map(trim).filter { !$0.isEmpty }
    }

    /// `name = value` or `name = "quoted"`, unescaped; nil otherwise (token68).
    private static func parameter(_ item: [Unicode.Scalar]) -> (String, String)? {
        guard let equals = item.firstIndex(of: "=") else { return nil }
        let name = trim(Array(item[..<equals]))
        guard !name.isEmpty, name.allSatisfy(isTokenCharacter) else { return nil }
        let raw = trim(Array(item[(equals + 1)...]))
        var value = String.UnicodeScalarView()
        if raw.first == "\"" {
            var escaped = false
            for scalar in raw.dropFirst() {
                if escaped {
                    value.append(scalar)
                    escaped = false
                } else if scalar == "\\" {
                    escaped = true
                } else if scalar == "\"" {
                    break
                } else {
                    value.append(scalar)
                }
            }
        } else {
            value.append(contentsOf: raw)
        }
        // Control characters never reach the hook (a realm may be shown to a user).
        let clean = String(value).unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7f }
        return (String(String.UnicodeScalarView(name)), String(String.UnicodeScalarView(clean)))
    }

    private static func trim(_ scalars: [Unicode.Scalar]) -> [Unicode.Scalar] {
        var slice = scalars[...]
        while let first = slice.first, first == " " || first == "\t" { slice = slice.dropFirst() }
        while let last = slice.last, last == " " || last == "\t" { slice = slice.dropLast() }
        return Array(slice)
    }

    /// RFC 9110 tchar.
    private static func isTokenCharacter(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar {
        case "a"..."z", "A"..."Z", "0"..."9": true
        case "!", "#", "$", "%", "&", "'", "*", "+", "-", ".", "^", "_", "`", "|", "~": true
        default: false
        }
    }
}
