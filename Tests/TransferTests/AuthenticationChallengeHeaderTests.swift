import Testing

@testable import Transfer

@Suite("WWW-Authenticate parsing for the challenge hook")
struct AuthenticationChallengeHeaderTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var values: [String]
        var scheme: AuthenticationScheme?
        var realm: String?
        var testDescription: String { values.joined(separator: " | ") }
    }

    static let cases: [Case] = [
        Case(values: [#"Basic realm="TestServer""#], scheme: .basic, realm: "TestServer"),
        Case(values: [#"Digest realm="r 1", nonce="a,b", qop="auth,auth-int", algorithm=SHA-256"#],
             scheme: .digest, realm: "r 1"),
        // Digest is preferred over Basic, wherever it comes.
        Case(values: [#"Basic realm="b""#, #"Digest realm="d", nonce="n""#], scheme: .digest, realm: "d"),
        Case(values: [#"Basic realm="b", Digest realm="d", nonce="n""#], scheme: .digest, realm: "d"),
        // A Digest algorithm libcurl does not know is passed over for Basic.
        Case(values: [#"Digest realm="d", nonce="n", algorithm=SHA3, Basic realm="b""#], scheme: .basic, realm: "b"),
        Case(values: [#"Bearer realm="api", error="invalid_token""#], scheme: .bearer, realm: "api"),
        Case(values: [#"Newauth realm="apps", type=1, title="Login to \"apps\"""#], scheme: .other("newauth"),
             realm: "apps"),
        Case(values: [#"Basic realm="a \"quoted\" realm""#], scheme: .basic, realm: #"a "quoted" realm"#),
        Case(values: ["Negotiate"], scheme: .other("negotiate"), realm: nil),
        Case(values: ["Basic realm = \"spaced\""], scheme: .basic, realm: "spaced"),
        Case(values: ["Basic realm=\"ctl\u{1}\u{7f}x\""], scheme: .basic, realm: "ctlx"),
        Case(values: [#"realm="orphan""#, ""], scheme: nil, realm: nil),
        Case(values: [#"Basic realm="unterminated"#], scheme: .basic, realm: "unterminated"),
    ]

    @Test("scheme and realm of the preferred challenge", arguments: cases)
    func parse(_ item: Case) {
        let preferred = AuthenticationChallengeHeader.preferred(in: AuthenticationChallengeHeader.parse(item.values))

        #expect(preferred?.scheme == item.scheme)
        #expect(preferred?.realm == item.realm)
    }

    @Test("a flood of challenges is cut at the limit")
    func bounded() {
        let flood = Array(repeating: "Basic realm=x, Digest nonce=y", count: 10_000)

        let parsed = AuthenticationChallengeHeader.parse(flood)

        #expect(parsed.count == AuthenticationChallengeHeader.maximumCount)
    }
}
