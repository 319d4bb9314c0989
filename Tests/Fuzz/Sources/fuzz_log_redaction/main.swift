// The log redactor (LogRedaction, Logging/LogRedaction.swift): every
// record a session's logger emits goes through it. The input gives a
// secret, free text around it, a parameter or header name and a choice of
// shape; the target builds a line that carries the secret where the rules
// say it must be redacted (a secret query or fragment parameter, URL user
// info, a credential header at the start of a trace line or in HTTP/2
// brackets, a URL with a secret nested in a percent-encoded parameter) and
// runs the redactor over it.
//
// Input: NUL-separated fields: secret, text before, text after, name,
// shape (first byte).
//
// Properties: the secret never survives redacting(text:),
// redacting(traceLine:) or redacting(_ url:); redacting twice changes
// nothing more; the redactor never crashes on any text (field 1 alone).
import FuzzSupport
import Foundation
@testable import Transfer

/// Query names the rules must redact, whatever their spelling.
let secretQueryNames = [
    "access_token", "accessToken", "refreshToken", "refresh-token", "ID_TOKEN", "authToken", "code", "state",
    "client_secret", "apiKey", "api_key", "password", "sig", "X-Amz-Signature", "sessionid", "jwt", "nonce",
    "code_verifier", "Token", "pass", "auth",
]
/// Header names the rules must redact.
let secretHeaderNames = [
    "Authorization", "proxy-authorization", "Cookie", "Set-Cookie", "X-Api-Key", "X-Auth-Token", "x-session-id",
    "X-Client-Secret", "X-Password", "Api-Key", "X-CSRF-Token",
]
/// Where a URL may start without gluing onto the text before it.
let openers = [" ", "'", "\"", "<", "\t", "(", "=", ": "]
/// Characters a secret value is made of: none of them ends a value.
let valueScalars = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~+!*$,".unicodeScalars)

let redaction = LogRedaction(headerNames: ["X-Tenant"], queryParameterNames: ["ticket"])

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let f = fields(bytes(data, size), 5)
    // Any text at all: no crash, and a second pass is a no-op.
    let once = redaction.redacting(traceLine: f[1])
    require(redaction.redacting(traceLine: once) == once, "redaction is not idempotent on \(f[1].debugDescription)")

    let secret = "S3C" + String(String.UnicodeScalarView(f[0].unicodeScalars.filter { valueScalars.contains($0) }.prefix(40))) + "Z"
    // Text around the line that cannot end it early or hold the secret itself.
    let before = String(f[1].unicodeScalars.filter { $0 != "\n" && $0 != "\r" }.prefix(200).map(Character.init))
    let after = String(f[2].unicodeScalars.filter { $0 != "\n" && $0 != "\r" }.prefix(200).map(Character.init))
    guard !before.contains(secret), !after.contains(secret), !"[redacted]".contains(secret) else { return 0 }
    let shape = f[4].utf8.first ?? 0
    let pick = Int(f[3].utf8.first ?? 0)
    let opener = openers[pick % openers.count]
    let fuzzedName = String(f[3].unicodeScalars.filter { valueScalars.contains($0) }.prefix(30).map(Character.init))
    var queryName = secretQueryNames[pick % secretQueryNames.count]
    if !fuzzedName.isEmpty, redaction.redactsQueryParameter(named: fuzzedName) { queryName = fuzzedName }
    let header = secretHeaderNames[pick % secretHeaderNames.count]
    let other = "page=\(pick)&q=x"

    let line: String
    var url: URL?
    switch shape % 7 {
    case 0:   // a secret query parameter among others
        let text = "http://h.test/p?\(other)&\(queryName)=\(secret)&tail=1"
        url = URL(string: text)
        line = before + opener + text + " " + after
    case 1:   // user info
        let text = "https://user:\(secret)@h.test:8443/p?\(other)"
        url = URL(string: text)
        line = before + opener + text + " " + after
    case 2:   // a fragment (the implicit OAuth flow)
        line = before + opener + "com.example.app:/cb#\(queryName)=\(secret)&\(other)" + " " + after
    case 3:   // a credential header line, as the trace shows it
        line = "\(header): \(secret) \(after)"
    case 4:   // HTTP/2 trace text: headers in brackets
        line = "[HTTP/2] [1] [\(header): \(secret)] \(after)"
    case 5:   // a URL with a secret, percent-encoded into a parameter
        let inner = "app:/cb?\(queryName)=\(secret)&state=x"
        let encoded = inner.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        let text = "http://h.test/authorize?redirect_uri=\(encoded)&\(other)"
        url = URL(string: text)
        line = before + opener + text + " " + after
    default:  // a Location line with both
        line = "Location: http://u:\(secret)@h.test/cb?\(queryName)=\(secret)#x \(after)"
    }

    let traced = redaction.redacting(traceLine: line)
    require(!traced.contains(secret), "secret survives in \(traced.debugDescription) (from \(line.debugDescription))")
    if shape % 7 != 3 && shape % 7 != 4 {
        let text = redaction.redacting(text: line)
        require(!text.contains(secret), "secret survives in \(text.debugDescription)")
    }
    if let url {
        let shown = redaction.redacting(url)
        require(!shown.contains(secret), "secret survives in \(shown.debugDescription) (URL \(url))")
    }
    return 0
}

@_cdecl("fuzz_log_redaction_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    runFuzzer(argc, argv, fuzz)
}
