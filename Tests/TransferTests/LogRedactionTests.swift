import Testing

@testable import Transfer

/// The log redactor's rules on text (the integration tests run them over sockets).
@Suite("Log redaction rules")
struct LogRedactionTests {
    let rules = LogRedaction.standard

    @Test("query names: camelCase, separators, OAuth's code and state; ordinary names stay", arguments: [
        "accessToken", "access_token", "ACCESS-TOKEN", "refreshToken", "authToken", "id_token", "code", "state",
        "client_secret", "clientSecret", "apiKey", "X-Amz-Signature", "sessionId", "code_verifier", "jwt", "nonce",
    ])
    func secretQueryNames(_ name: String) {
        #expect(rules.redactsQueryParameter(named: name))
    }

    @Test("ordinary query names are not redacted", arguments: ["page", "q", "sort", "zip_code", "country", "id"])
    func ordinaryQueryNames(_ name: String) {
        #expect(!rules.redactsQueryParameter(named: name))
    }

    @Test("header names: the built-in four and anything token-, key-, secret-, auth- or session-like; challenges stay")
    func headerNames() {
        for name in ["Authorization", "cookie", "X-Api-Key", "X-Auth-Token", "X-Session-Id", "X-Client-Secret"] {
            #expect(rules.redactsHeader(named: name), "\(name)")
        }
        for name in ["Content-Type", "WWW-Authenticate", "Proxy-Authenticate", "Location", "Accept"] {
            #expect(!rules.redactsHeader(named: name), "\(name)")
        }
    }

    @Test("text: user info, query and fragment secrets, nested URLs; the rest stays")
    func text() {
        #expect(rules.redacting(text: "redirect to \"com.example.app:/cb?accessToken=a1&code=c1\"")
            == "redirect to \"com.example.app:/cb?accessToken=[redacted]&code=[redacted]\"")
        #expect(rules.redacting(text: "no cached response for http://alice:pw@h/x?access_token=t&page=2, and")
            == "no cached response for http://[redacted]@h/x?access_token=[redacted]&page=2, and")
        #expect(rules.redacting(text: "app:/cb#access_token=t&token_type=bearer")
            == "app:/cb#access_token=[redacted]&token_type=[redacted]")
        #expect(rules.redacting(text: "x://a@b(https://u:pw@h/") == "x://[redacted]@b(https://[redacted]@h/")
        #expect(rules.redacting(text: "/authorize?redirect_uri=app%3A%2Fcb%3Fcode%3Dc1&page=1")
            == "/authorize?redirect_uri=[redacted]&page=1")
        #expect(rules.redacting(text: "* Connection #0 to host h left intact") == "* Connection #0 to host h left intact")
    }

    @Test("trace lines: a header the engine redacted already is left as it is (HTTP/2 brackets too)")
    func traceLines() {
        #expect(rules.redacting(traceLine: "[HTTP/2] [1] [cookie: [redacted]] [x: y]")
            == "[HTTP/2] [1] [cookie: [redacted]] [x: y]")
        #expect(rules.redacting(traceLine: "[HTTP/2] [1] [x-api-key: k1] [x: y]") == "[HTTP/2] [1] [x-api-key: [redacted]] [x: y]")
        #expect(rules.redacting(traceLine: "X-Auth-Token: t1") == "X-Auth-Token: [redacted]")
        #expect(rules.redacting(traceLine: "Location: http://u:p@h/cb?state=s1")
            == "Location: http://[redacted]@h/cb?state=[redacted]")
    }

    @Test("names added by the user: headers exact in any case, query names without case or separators")
    func addedNames() {
        var rules = LogRedaction.standard
        rules.headerNames.insert("X-Tenant")
        rules.queryParameterNames.insert("customerRef")
        #expect(rules.redactsHeader(named: "x-tenant"))
        #expect(!rules.redactsHeader(named: "X-Tenant-Name"))
        #expect(rules.redactsQueryParameter(named: "customer_ref"))
        #expect(rules.redactsQueryParameter(named: "CUSTOMER-REF"))
        #expect(rules != LogRedaction.standard)
    }
}
