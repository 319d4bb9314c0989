import CTransfer
import Testing

/// `ct_debug_redact` on one line, as the trace callback calls it.
private func redact(_ line: String, capacity: Int = 2048) -> String {
    var out = [CChar](repeating: 0, count: capacity)
    let bytes = Array(line.utf8)
    let written = bytes.withUnsafeBufferPointer { input in
        input.withMemoryRebound(to: CChar.self) { ct_debug_redact($0.baseAddress!, $0.count, &out, capacity) }
    }
    return String(decoding: out[0..<written].map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

@Suite("Trace redaction")
struct DebugRedactTests {
    @Test("credential header values become [redacted], whatever the case of the name", arguments: [
        ("Authorization: Bearer abc", "Authorization: [redacted]"),
        ("authorization:Basic dXNlcjpwYXNz", "authorization: [redacted]"),
        ("Proxy-Authorization: Basic cHJveHk=", "Proxy-Authorization: [redacted]"),
        ("Cookie: a=1; b=2", "Cookie: [redacted]"),
        ("SET-COOKIE: sid=xyz; Path=/", "SET-COOKIE: [redacted]"),
        ("X-Api-Key: k-123", "X-Api-Key: [redacted]"),
        ("x-auth-token: t-123", "x-auth-token: [redacted]"),
        ("X-Session-Id: s-1", "X-Session-Id: [redacted]"),
        ("X-Client-Secret: c-1", "X-Client-Secret: [redacted]"),
        ("X_Password:p", "X_Password: [redacted]"),
        ("Authorization-Hint: x", "Authorization-Hint: [redacted]"),
    ])
    func headerLines(line: String, expected: String) {
        #expect(redact(line) == expected)
    }

    @Test("other lines pass unchanged; a name inside a value is not a header")
    func otherLines() {
        #expect(redact("Content-Type: text/plain") == "Content-Type: text/plain")
        #expect(redact("X-Note: Authorization: none") == "X-Note: Authorization: none")
        #expect(redact("WWW-Authenticate: Basic realm=\"x\"") == "WWW-Authenticate: Basic realm=\"x\"")
        #expect(redact("Proxy-Authenticate: Digest realm=\"x\"") == "Proxy-Authenticate: Digest realm=\"x\"")
        #expect(redact("HTTP/1.1 200 OK") == "HTTP/1.1 200 OK")
        #expect(redact("") == "")
    }

    @Test("HTTP/2 trace text writes headers in brackets: only the value goes")
    func bracketedHeaders() {
        #expect(redact("[HTTP/2] [1] [authorization: Basic dXNlcjpwYXNz]") == "[HTTP/2] [1] [authorization: [redacted]]")
        #expect(redact("h2h3 [cookie: a=1] [user-agent: x]") == "h2h3 [cookie: [redacted]] [user-agent: x]")
        #expect(redact("[HTTP/2] [1] [x-api-key: k-123]") == "[HTTP/2] [1] [x-api-key: [redacted]]")
    }

    @Test("a short output buffer cuts the line after redaction, NUL-terminated")
    func boundedOutput() {
        #expect(redact("Authorization: Bearer abcdefghijkl", capacity: 20) == "Authorization: [red")
        #expect(redact("Cookie: secret", capacity: 1) == "")
    }
}
