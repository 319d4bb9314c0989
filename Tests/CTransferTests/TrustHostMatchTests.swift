import CTransfer
import Foundation
import Testing

/// ct_hostmatch.c through `ct_host_pattern_match` (as curl's hostcheck.c has its unit test).
@Suite("Host patterns of per-host pin rules")
struct TrustHostMatchTests {
    enum Kind: Int32 {
        case none = 0, subdomain = 1, wildcard = 2, exact = 3
    }

    struct Case: CustomStringConvertible, Sendable {
        var pattern: String
        var host: String
        var includeSubdomains: Bool
        var kind: Kind
        var description: String { "\(pattern) ~ \(host)\(includeSubdomains ? " (+sub)" : "")" }
    }

    static let cases: [Case] = [
        // exact
        Case(pattern: "example.com", host: "example.com", includeSubdomains: false, kind: .exact),
        Case(pattern: "Example.COM", host: "example.com.", includeSubdomains: false, kind: .exact),
        Case(pattern: "example.com.", host: "EXAMPLE.com", includeSubdomains: false, kind: .exact),
        Case(pattern: "example.com", host: "example.com", includeSubdomains: true, kind: .exact),
        Case(pattern: "example.com", host: "a.example.com", includeSubdomains: false, kind: .none),
        Case(pattern: "example.com", host: "example.co", includeSubdomains: false, kind: .none),
        Case(pattern: "example.com", host: "xexample.com", includeSubdomains: true, kind: .none),
        Case(pattern: "127.0.0.1", host: "127.0.0.1", includeSubdomains: false, kind: .exact),
        Case(pattern: "::1", host: "::1", includeSubdomains: false, kind: .exact),
        // include subdomains on a parent
        Case(pattern: "example.com", host: "a.example.com", includeSubdomains: true, kind: .subdomain),
        Case(pattern: "example.com", host: "a.b.example.com", includeSubdomains: true, kind: .subdomain),
        Case(pattern: "example.com", host: ".example.com", includeSubdomains: true, kind: .none),
        // wildcards: exactly one label, unless include subdomains
        Case(pattern: "*.example.com", host: "a.example.com", includeSubdomains: false, kind: .wildcard),
        Case(pattern: "*.example.com", host: "A.Example.Com", includeSubdomains: false, kind: .wildcard),
        Case(pattern: "*.example.com", host: "a.b.example.com", includeSubdomains: false, kind: .none),
        Case(pattern: "*.example.com", host: "a.b.example.com", includeSubdomains: true, kind: .subdomain),
        Case(pattern: "*.example.com", host: "a.example.com", includeSubdomains: true, kind: .wildcard),
        Case(pattern: "*.example.com", host: "example.com", includeSubdomains: true, kind: .none),
        Case(pattern: "*.example.com", host: "aexample.com", includeSubdomains: true, kind: .none),
        Case(pattern: "*.example.com", host: ".example.com", includeSubdomains: false, kind: .none),
        // malformed patterns never match
        Case(pattern: "", host: "example.com", includeSubdomains: true, kind: .none),
        Case(pattern: "*", host: "example.com", includeSubdomains: true, kind: .none),
        Case(pattern: "*.", host: "example.com", includeSubdomains: true, kind: .none),
        Case(pattern: "a*.example.com", host: "ab.example.com", includeSubdomains: false, kind: .none),
        Case(pattern: "*.*.example.com", host: "a.b.example.com", includeSubdomains: false, kind: .none),
        Case(pattern: "example..com", host: "example..com", includeSubdomains: false, kind: .none),
        Case(pattern: ".example.com", host: "a.example.com", includeSubdomains: true, kind: .none),
        Case(pattern: "exa mple.com", host: "exa mple.com", includeSubdomains: false, kind: .none),
        Case(pattern: String(repeating: "a", count: 254), host: String(repeating: "a", count: 254),
             includeSubdomains: false, kind: .none),
    ]

    @Test("pattern ~ host", arguments: cases)
    func match(_ c: Case) {
        let rank = ct_host_pattern_match(c.pattern, c.host, c.includeSubdomains ? 1 : 0)
        #expect(Kind(rawValue: rank >> 10) == c.kind, "rank \(rank)")
    }

    @Test("a longer parent ranks above a shorter one, any exact host above any wildcard")
    func ordering() {
        let host = "x.api.example.com"
        let shortParent = ct_host_pattern_match("example.com", host, 1)
        let longParent = ct_host_pattern_match("api.example.com", host, 1)
        let wildcard = ct_host_pattern_match("*.api.example.com", host, 0)
        let exact = ct_host_pattern_match("x.api.example.com", host, 0)
        #expect(0 < shortParent && shortParent < longParent && longParent < wildcard && wildcard < exact)
        #expect(ct_host_pattern_match("*.a.b.c.d.e.f.example.com", "x.a.b.c.d.e.f.example.com", 0)
                    < ct_host_pattern_match("x.y", "x.y", 0))
    }

    @Test("NULL arguments do not match")
    func nulls() {
        #expect(ct_host_pattern_match(nil, "example.com", 1) == 0)
        #expect(ct_host_pattern_match("example.com", nil, 1) == 0)
    }
}

/// Which per-host rule applies: the most specific (TrustKit), not the first added.
@Suite("Per-host rule precedence")
struct TrustRulePrecedenceTests {
    struct Rule: Sendable {
        var pattern: String
        var includeSubdomains = false
        var expires: Int64 = 0
    }

    struct Case: CustomStringConvertible, Sendable {
        var rules: [Rule]
        var host: String
        var expected: Int64   // index of the rule that applies, -1 none
        var description: String { "\(rules.map(\.pattern)) for \(host)" }
    }

    static let cases: [Case] = [
        // exact beats wildcard beats include-subdomains, in every insertion order
        Case(rules: [Rule(pattern: "example.com", includeSubdomains: true), Rule(pattern: "*.example.com"),
                     Rule(pattern: "api.example.com")], host: "api.example.com", expected: 2),
        Case(rules: [Rule(pattern: "api.example.com"), Rule(pattern: "*.example.com"),
                     Rule(pattern: "example.com", includeSubdomains: true)], host: "api.example.com", expected: 0),
        Case(rules: [Rule(pattern: "example.com", includeSubdomains: true), Rule(pattern: "*.example.com")],
             host: "api.example.com", expected: 1),
        Case(rules: [Rule(pattern: "*.example.com"), Rule(pattern: "example.com", includeSubdomains: true)],
             host: "api.example.com", expected: 0),
        // the parent rule still covers what nothing more specific covers
        Case(rules: [Rule(pattern: "example.com", includeSubdomains: true), Rule(pattern: "*.example.com")],
             host: "a.b.example.com", expected: 0),
        Case(rules: [Rule(pattern: "example.com", includeSubdomains: true), Rule(pattern: "*.example.com")],
             host: "example.com", expected: 0),
        // a longer parent beats a shorter one
        Case(rules: [Rule(pattern: "example.com", includeSubdomains: true),
                     Rule(pattern: "b.example.com", includeSubdomains: true)], host: "a.b.example.com", expected: 1),
        Case(rules: [Rule(pattern: "b.example.com", includeSubdomains: true),
                     Rule(pattern: "example.com", includeSubdomains: true)], host: "a.b.example.com", expected: 0),
        // a tie keeps the first added
        Case(rules: [Rule(pattern: "Example.com"), Rule(pattern: "example.com.")], host: "example.com", expected: 0),
        // expired rules do not apply; the next best does
        Case(rules: [Rule(pattern: "api.example.com", expires: 1), Rule(pattern: "*.example.com")],
             host: "api.example.com", expected: 1),
        // unrelated hosts: none
        Case(rules: [Rule(pattern: "*.example.com"), Rule(pattern: "example.com", includeSubdomains: true)],
             host: "example.org", expected: -1),
    ]

    @Test("rule for host", arguments: cases)
    func precedence(_ c: Case) throws {
        let policy = try PolicyHandle()
        for rule in c.rules {
            let (rc, message) = policy.addRule(rule.pattern, pins: [otherPin, otherPin], expires: rule.expires,
                                               includeSubdomains: rule.includeSubdomains)
            #expect(rc == CT_OK, "\(message)")
        }
        #expect(ct_trust_policy_rule_for_host(policy.pointer, c.host, 1_780_272_000) == c.expected)
    }

    @Test("an exclusion removes its rule; a less specific rule may then apply")
    func exclusions() throws {
        let policy = try PolicyHandle()
        #expect(policy.addRule("example.com", pins: [otherPin, otherPin], includeSubdomains: true).0 == CT_OK)
        #expect(policy.addRule("*.example.com", pins: [otherPin, otherPin], exclusions: ["legacy.example.com"]).0
                    == CT_OK)

        #expect(ct_trust_policy_rule_for_host(policy.pointer, "api.example.com", 0) == 1)
        #expect(ct_trust_policy_rule_for_host(policy.pointer, "legacy.example.com", 0) == 0)
        #expect(ct_trust_policy_rule_for_host(nil, "example.com", 0) == -1)
    }
}
