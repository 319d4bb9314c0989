import Foundation

#if canImport(Glibc)
    import Glibc
#endif

// Routes of TestServer. Every query parameter is optional unless marked.
//
//   /bytes/N?seed=S&etag=E&ranges=0&rate=R  N deterministic bytes (DeterministicBytes, seed S,
//                                 default 0); Range `bytes=a-b`, `a-`, `-n`; ETag "E" (default
//                                 "s<S>-n<N>"), If-Range, Last-Modified, Accept-Ranges;
//                                 ranges=0 ignores Range and answers 200 with the full body;
//                                 rate=R sends at R bytes/s. HEAD answers the head only.
//                                 gate=G: a Range answer (206) waits at gate G before its head.
//   /slow?rate=R&size=N&seed=S    /bytes/N at R bytes per second (default 64 KiB/s, 1 MiB).
//   /stall?size=N                 head announcing N bytes (default 1024), then nothing.
//   /stall-headers                reads the request, never answers.
//   /truncate/N?seed=S&send=K     announces N bytes, sends K (default N/2), closes cleanly (FIN);
//                                 ranges=1 adds Accept-Ranges: bytes (and HEAD gets the head).
//   /gzip-zeros/N?chunked=1       N zero bytes as one hand-built gzip member (~158:1) with
//                                 Content-Encoding: gzip and the encoded Content-Length, or
//                                 chunked; a decompression bomb for large N (GzipZeros).
//   /reset/N?seed=S&after=K       announces N bytes, sends K (default N/2), then RST
//                                 (with &gate=G: after the gate G opens).
//   /garbage?kind=status|header   an invalid status line (default), or a valid one followed
//                                 by a header line with control bytes and no colon.
//   /malformed/K                  a response libcurl must refuse, then close: K is status-word
//                                 ("HTTP/1.1 abc OK"), status-low (099), http3 ("HTTP/3.0 200"),
//                                 bad-location (302 to "http://[::1/x"), huge-head (over 300 KiB
//                                 of header lines), huge-line (one 200 KiB header line),
//                                 bad-chunk (chunked framing with a non-hex size).
//   /redirect/N?status=C          N redirects (C, default 302) down to /redirect/0: 200 JSON.
//   /redirect-loop                302 to itself, forever.
//   /redirect-to?url=U&status=C   one redirect to U, any scheme (ftp://, file://, ...).
//   /status/N?challenge=V         status N (200...599) with a short text body; with
//                                 `challenge`, a `WWW-Authenticate: V` header.
//   /echo                         JSON: method, path, target, query, headers (lowercased
//                                 names), http_version, body_length, body_sha256.
//   /upload?reject=1              JSON {"length":L,"sha256":"..."} of the body; honours
//                                 Expect: 100-continue; reject=1 answers 413 unread.
//   /content-disposition?name=V   a small body with `Content-Disposition: V` (V raw).
//   /chunked/N?seed=S&chunk=K     N deterministic bytes, chunked in K-byte chunks (def 1000).
//   /json                         a fixed JSON object (see `jsonBody`).
//   /response-headers?N=V&...     200, each query pair sent as a response header N: V.
//   /delay?ms=N                   waits N ms (default 1000) before the head.
//   /hold/N?gate=G&after=K&seed=S announces N bytes, sends the first K (default N/2), then
//                                 waits until the test calls `openGate(G)` (gate required),
//                                 the client hangs up or the server stops; then the rest
//                                 (`sentPastGate(G)` counts those past the first 64 KiB of it).
//   /basic-auth/USER/PASS?then=U  200 with the right Basic credentials, else 401 with
//                                 WWW-Authenticate: Basic realm="TestServer"; with `then`,
//                                 the right credentials get a 302 to U instead of the 200.
//   /flaky/N?key=K&status=C&retry-after=V&fail=reset
//                                 the first N requests under key K (default the path) fail:
//                                 status C (default 503) with `Retry-After: V` when given, or
//                                 with fail=reset a connection reset before any answer; then
//                                 200 with "attempt A\n" (A counts all requests under K).
//   /bearer/T?gate=G              200 JSON when `Authorization: Bearer T`, else 401 with
//                                 WWW-Authenticate: Bearer; with gate=G the 401 waits for
//                                 `openGate(G)` (counted in `heldAtGate`).
//   /digest-auth/USER/PASS?algorithm=A&qop=auth|none&stale=1
//                                 RFC 7616 Digest (DigestServer): 200 JSON to a right answer,
//                                 else 401 with a challenge (realm "TestServer digest",
//                                 algorithm A = MD5 (default) or SHA-256, qop="auth" unless
//                                 qop=none). stale=1: the first nonce is stale, and a right
//                                 answer to it gets 401 stale=true with a fresh nonce.
//   /cache/NAME?cc=V&etag=E&lm=1&expires=V&vary=H&body=B
//                                 200 with body B (default "cached NAME", then " H=<request's H>"
//                                 when vary=H), Cache-Control: V, ETag: "E", Last-Modified:
//                                 `lastModified` (lm=1), Expires: V, Vary: H, each when given;
//                                 304 with the same fields (no body) when If-None-Match has "E" or,
//                                 with lm=1, If-Modified-Since is `lastModified`.
//   /whoami?cc=V&gate=G&auth=basic&setcookie=C
//                                 200 "for <who>": who is the Authorization header, else the
//                                 Cookie header, else "anonymous"; Cache-Control: V when given,
//                                 Set-Cookie: C when given. gate=G: the response waits for
//                                 `openGate(G)` (counted in `heldAtGate`). auth=basic: a
//                                 request without Authorization gets 401 with a Basic challenge.
//   anything else                 404.
// On every route, ?close=1 makes the server close the connection after the response.

extension TestServer {
    /// The body of `/json`.
    public static let jsonBody = #"{"name":"transfer","numbers":[1,2,3],"nested":{"key":"value"},"ok":true}"#

    /// The `Last-Modified` value of `/bytes` responses (usable in `If-Range`).
    public static let lastModified = "Wed, 21 Oct 2015 07:28:00 GMT"

    /// The default ETag of `/bytes/<count>?seed=<seed>`, quotes included.
    public static func etag(seed: UInt64, count: Int) -> String {
        "\"s\(seed)-n\(count)\""
    }
}

extension Connection {
    /// Serves `head`; returns whether the connection stays open for another request.
    func route(_ head: RequestHead) throws -> Bool {
        let parts = head.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        let first = parts.first ?? ""

        if first == "upload" && head.query("reject") == "1" {
            // Refuse before reading a byte of the body, as a server short of space would.
            try respondAndClose(status: 413, body: "upload rejected\n")
        }
        // Consume the body first (hashing it) so keep-alive stays in sync for every route.
        let hasBody = head.header("transfer-encoding") != nil || (Int(head.header("content-length") ?? "0") ?? 1) > 0
        if hasBody && head.header("expect")?.lowercased() == "100-continue" {
            try sendAll("HTTP/1.1 100 Continue\r\n\r\n")
        }
        let hasher = SHA256Hasher()
        var bodyLength = 0
        try readBody(head) { piece in
            hasher.update(piece)
            bodyLength += piece.count
        }
        let bodyDigest = hasher.finalize()

        switch first {
        case "bytes":
            guard parts.count == 2, let count = Int(parts[1]), count >= 0 else { return try notFound(head) }
            let rate = Int(head.query("rate") ?? "0") ?? 0
            return try serveBytes(head, count: count, rate: rate)
        case "slow":
            let count = Int(head.query("size") ?? "") ?? (1 << 20)
            let rate = Int(head.query("rate") ?? "") ?? (64 * 1024)
            return try serveBytes(head, count: max(0, count), rate: max(1, rate))
        case "stall":
            let size = Int(head.query("size") ?? "") ?? 1024
            try sendHead(
                status: 200, headers: [("Content-Type", "application/octet-stream"), ("Content-Length", "\(size)")])
            waitForHangup()
            throw ConnectionEnd.close
        case "stall-headers":
            waitForHangup()
            throw ConnectionEnd.close
        case "truncate":
            guard parts.count == 2, let count = Int(parts[1]), count >= 0 else { return try notFound(head) }
            // ranges=1: claims Accept-Ranges (HEAD answers the head only), yet
            // answers every GET with the short 200 (a HEAD that lies).
            let ranges: [(String, String)] = head.query("ranges") == "1" ? [("Accept-Ranges", "bytes")] : []
            try sendHead(
                status: 200,
                headers: [("Content-Type", "application/octet-stream"), ("Content-Length", "\(count)")] + ranges)
            if head.method == "HEAD" { return try finish(head) }
            let send = min(count, Int(head.query("send") ?? "") ?? count / 2)
            try sendStream(seed: seed(head), from: 0, count: send, rate: 0)
            throw ConnectionEnd.linger
        case "gzip-zeros":
            guard parts.count == 2, let count = Int(parts[1]), count >= 0 else { return try notFound(head) }
            return try serveGzipZeros(head, count: count, chunked: head.query("chunked") == "1")
        case "reset":
            guard parts.count == 2, let count = Int(parts[1]), count >= 0 else { return try notFound(head) }
            let after = min(count, Int(head.query("after") ?? "") ?? count / 2)
            try sendHead(
                status: 200, headers: [("Content-Type", "application/octet-stream"), ("Content-Length", "\(count)")])
            try sendStream(seed: seed(head), from: 0, count: after, rate: 0)
            // With `gate`: the reset waits until the test has seen the bytes arrive
            // (a reset purges what the client has not read yet).
            if let gate = head.query("gate"), !waitForGate(gate) { throw ConnectionEnd.close }
            // Linger on, timeout 0: close() sends RST instead of FIN.
            var option = linger(l_onoff: 1, l_linger: 0)
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &option, socklen_t(MemoryLayout<linger>.size))
            throw ConnectionEnd.close
        case "malformed":
            guard parts.count == 2, let raw = Self.malformed(parts[1]) else { return try notFound(head) }
            try sendAll(raw)
            throw ConnectionEnd.linger
        case "garbage":
            if head.query("kind") == "header" {
                try sendAll(
                    Array("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n".utf8) + [0x01, 0x7f, 0x00, 0x42, 0x0d, 0x0a]
                        + Array("\r\nbody".utf8))
            } else {
                try sendAll(Array("HELLO\u{1}WORLD 999 \r\n".utf8) + [0xff, 0xfe, 0x00] + Array("\r\n\r\n".utf8))
            }
            throw ConnectionEnd.linger
        case "stale-location":
            // A 1xx head with a Location, then a final 302 with no header line
            // at all (body until close): that 302 is not a redirect to follow.
            try sendAll("HTTP/1.1 103 Early Hints\r\nLocation: /elsewhere\r\n\r\nHTTP/1.1 302 Found\r\n\r\nbody")
            throw ConnectionEnd.close
        case "etag-cr":
            // An ETag with a bare CR (curl splits lines at LF only), then half
            // the body: a resumable download keeps a journal with the validator.
            try sendAll("HTTP/1.1 200 OK\r\nETag: \"v1\rX-Injected: yes\"\r\nContent-Length: 2000\r\n\r\n"
                + String(repeating: "x", count: 1000))
            throw ConnectionEnd.close
        case "redirect":
            guard parts.count == 2, let count = Int(parts[1]), count >= 0 else { return try notFound(head) }
            if count == 0 {
                return try respond(head, status: 200, contentType: "application/json", body: #"{"redirects":"done"}"#)
            }
            let query = head.target.firstIndex(of: "?").map { String(head.target[$0...]) } ?? ""
            return try redirect(head, to: "/redirect/\(count - 1)\(query)")
        case "redirect-loop":
            return try redirect(head, to: "/redirect-loop")
        case "redirect-to":
            guard let target = head.query("url") else {
                return try respond(head, status: 400, body: "url is required\n")
            }
            return try redirect(head, to: sanitize(target))
        case "status":
            guard parts.count == 2, let status = Int(parts[1]), (200...599).contains(status) else {
                return try respond(head, status: 400, body: "status must be 200...599\n")
            }
            if status == 204 || status == 304 {
                try sendHead(status: status, headers: connectionHeaders(head))
                return try finish(head)
            }
            let challenge = head.query("challenge").map { [("WWW-Authenticate", sanitize($0))] } ?? []
            return try respond(head, status: status, extraHeaders: challenge, body: "status \(status)\n")
        case "echo":
            var headers: [String: String] = [:]
            for (name, value) in head.headers {
                let key = name.lowercased()
                headers[key] = headers[key].map { "\($0), \(value)" } ?? value
            }
            var query: [String: String] = [:]
            for (name, value) in head.query { query[name] = value }
            let object: [String: Any] = [
                "method": head.method, "path": head.path, "target": head.target, "query": query,
                "headers": headers, "http_version": head.version, "body_length": bodyLength,
                "body_sha256": bodyDigest,
            ]
            return try respond(head, status: 200, contentType: "application/json", body: json(object))
        case "upload":
            let object: [String: Any] = ["length": bodyLength, "sha256": bodyDigest]
            return try respond(head, status: 200, contentType: "application/json", body: json(object))
        case "content-disposition":
            let value = sanitize(head.query("name") ?? "attachment")
            return try respond(
                head, status: 200, extraHeaders: [("Content-Disposition", value)],
                body: "content-disposition body\n")
        case "chunked":
            guard parts.count == 2, let count = Int(parts[1]), count >= 0 else { return try notFound(head) }
            let chunk = max(1, Int(head.query("chunk") ?? "") ?? 1000)
            return try serveChunked(head, count: count, chunk: chunk)
        case "json":
            return try respond(head, status: 200, contentType: "application/json", body: TestServer.jsonBody)
        case "cache":
            return try serveCacheable(head, name: parts.count > 1 ? parts[1] : "")
        case "whoami":
            if head.query("auth") == "basic" && head.header("authorization") == nil {
                return try respond(
                    head, status: 401, extraHeaders: [("WWW-Authenticate", #"Basic realm="TestServer""#)],
                    body: "who are you?\n")
            }
            if let gate = head.query("gate"), !waitForGate(gate) { throw ConnectionEnd.close }
            var fields: [(String, String)] = []
            if let control = head.query("cc") { fields.append(("Cache-Control", sanitize(control))) }
            if let cookie = head.query("setcookie") { fields.append(("Set-Cookie", sanitize(cookie))) }
            let who = head.header("authorization") ?? head.header("cookie") ?? "anonymous"
            return try respond(head, status: 200, extraHeaders: fields, body: "for \(who)")
        case "response-headers":
            let extra = head.query.filter { $0.name != "close" && !$0.name.isEmpty }.map {
                (sanitize($0.name).replacingOccurrences(of: ":", with: ""), sanitize($0.value))
            }
            return try respond(head, status: 200, extraHeaders: extra, body: "headers as asked\n")
        case "delay":
            let ms = max(0, min(600_000, Int(head.query("ms") ?? "") ?? 1000))
            if waitForHangup(milliseconds: Int32(ms)) { throw ConnectionEnd.close }
            return try respond(head, status: 200, body: "delayed \(ms) ms\n")
        case "hold":
            guard parts.count == 2, let count = Int(parts[1]), count >= 0, let gate = head.query("gate") else {
                return try notFound(head)
            }
            let after = max(0, min(count, Int(head.query("after") ?? "") ?? count / 2))
            try sendHead(
                status: 200,
                headers: [("Content-Type", "application/octet-stream"), ("Content-Length", "\(count)")]
                    + connectionHeaders(head))
            try sendStream(seed: seed(head), from: 0, count: after, rate: 0)
            if !waitForGate(gate) { throw ConnectionEnd.close }
            let first = min(64 * 1024, count - after)
            try sendStream(seed: seed(head), from: after, count: first, rate: 0)
            core.state.withLock { $0.passed[gate, default: 0] += 1 }
            try sendStream(seed: seed(head), from: after + first, count: count - after - first, rate: 0)
            return try finish(head)
        case "basic-auth":
            guard parts.count == 3 else { return try notFound(head) }
            let expected = Data("\(parts[1]):\(parts[2])".utf8).base64EncodedString()
            if head.header("authorization") == "Basic \(expected)" {
                if let then = head.query("then") { return try redirect(head, to: sanitize(then)) }
                let object: [String: Any] = ["authenticated": true, "user": parts[1]]
                return try respond(head, status: 200, contentType: "application/json", body: json(object))
            }
            return try respond(
                head, status: 401, contentType: "application/json",
                extraHeaders: [("WWW-Authenticate", #"Basic realm="TestServer""#)], body: #"{"authenticated":false}"#)
        case "flaky":
            guard parts.count == 2, let failures = Int(parts[1]) else { return try notFound(head) }
            let key = head.query("key") ?? head.path
            let attempt = core.state.withLock { state -> Int in
                state.hits[key, default: 0] += 1
                return state.hits[key] ?? 0
            }
            if attempt > failures {
                return try respond(head, status: 200, body: "attempt \(attempt)\n")
            }
            if head.query("fail") == "reset" {
                var option = linger(l_onoff: 1, l_linger: 0)
                setsockopt(fd, SOL_SOCKET, SO_LINGER, &option, socklen_t(MemoryLayout<linger>.size))
                throw ConnectionEnd.close
            }
            if head.query("fail") == "close" { throw ConnectionEnd.close }   // an orderly close, no byte sent
            let status = Int(head.query("status") ?? "") ?? 503
            let retryAfter = head.query("retry-after").map { [("Retry-After", sanitize($0))] } ?? []
            return try respond(head, status: (400...599).contains(status) ? status : 503, extraHeaders: retryAfter,
                               body: "attempt \(attempt) failed\n")
        case "bearer":
            guard parts.count == 2 else { return try notFound(head) }
            if head.header("authorization") == "Bearer \(parts[1])" {
                return try respond(head, status: 200, contentType: "application/json", body: #"{"authenticated":true}"#)
            }
            // A refusal waits at the gate, if one is named: every request is in before any 401 leaves.
            if let gate = head.query("gate"), !waitForGate(gate) { throw ConnectionEnd.close }
            return try respond(
                head, status: 401, extraHeaders: [("WWW-Authenticate", #"Bearer realm="TestServer""#)],
                body: "token refused\n")
        case "digest-auth":
            guard parts.count == 3 else { return try notFound(head) }
            let options = DigestServer.Options(
                algorithm: head.query("algorithm") == "SHA-256" ? "SHA-256" : "MD5", qop: head.query("qop") != "none",
                staleFirst: head.query("stale") == "1")
            let verdict = DigestServer.check(
                head.header("authorization"), method: head.method, target: head.target, user: parts[1],
                password: parts[2], options: options)
            if verdict == .accepted {
                let object: [String: Any] = ["authenticated": true, "user": parts[1]]
                return try respond(head, status: 200, contentType: "application/json", body: json(object))
            }
            return try respond(
                head, status: 401, contentType: "application/json",
                extraHeaders: [("WWW-Authenticate", DigestServer.challenge(options, stale: verdict == .stale))],
                body: #"{"authenticated":false}"#)
        default:
            return try notFound(head)
        }
    }

    // MARK: Helpers

    private func seed(_ head: RequestHead) -> UInt64 {
        UInt64(head.query("seed") ?? "") ?? 0
    }

    /// Removes CR, LF and NUL so a query value cannot split the response head.
    private func sanitize(_ value: String) -> String {
        String(value.unicodeScalars.filter { $0 != "\r" && $0 != "\n" && $0 != "\0" }.map(Character.init))
    }

    private func json(_ object: [String: Any]) -> String {
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else {
            return "{}"
        }
        return String(decoding: data, as: UTF8.self)
    }

    private func connectionHeaders(_ head: RequestHead) -> [(String, String)] {
        head.keepAlive ? [] : [("Connection", "close")]
    }

    /// The raw bytes of `/malformed/<kind>`, or nil for an unknown kind.
    static func malformed(_ kind: String) -> [UInt8]? {
        let body = "Content-Length: 2\r\n\r\nhi"
        switch kind {
        case "status-word": return Array("HTTP/1.1 abc OK\r\n\(body)".utf8)
        case "status-low": return Array("HTTP/1.1 099 Low\r\n\(body)".utf8)
        case "http3": return Array("HTTP/3.0 200 OK\r\n\(body)".utf8)
        case "bad-location":
            return Array("HTTP/1.1 302 Found\r\nLocation: http://[::1/x\r\nContent-Length: 0\r\n\r\n".utf8)
        case "huge-head":
            let line = "X-Filler: " + String(repeating: "a", count: 100) + "\r\n"
            return Array(("HTTP/1.1 200 OK\r\n" + String(repeating: line, count: 3200) + body).utf8)
        case "huge-line":
            return Array(("HTTP/1.1 200 OK\r\nX-Big: " + String(repeating: "a", count: 200_000) + "\r\n" + body).utf8)
        case "bad-chunk":
            return Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\nxx\r\n0\r\n\r\n".utf8)
        default: return nil
        }
    }

    /// After a complete response: keep going, or close politely.
    private func finish(_ head: RequestHead) throws -> Bool {
        if head.keepAlive { return true }
        throw ConnectionEnd.linger
    }

    private func notFound(_ head: RequestHead) throws -> Bool {
        try respond(head, status: 404, body: "no route for \(head.path)\n")
    }

    /// `/cache/NAME`: a response with the cache fields asked for, and 304 to a matching validator.
    private func serveCacheable(_ head: RequestHead, name: String) throws -> Bool {
        var fields: [(String, String)] = []
        if let control = head.query("cc") { fields.append(("Cache-Control", sanitize(control))) }
        let etag = head.query("etag").map { "\"\(sanitize($0))\"" }
        if let etag { fields.append(("ETag", etag)) }
        let lastModified = head.query("lm") == "1"
        if lastModified { fields.append(("Last-Modified", TestServer.lastModified)) }
        if let expires = head.query("expires") { fields.append(("Expires", sanitize(expires))) }
        let vary = head.query("vary").map(sanitize)
        if let vary { fields.append(("Vary", vary)) }
        let etagMatches = etag != nil && (head.header("if-none-match")?.contains(etag!) ?? false)
        let dateMatches = lastModified && head.header("if-modified-since") == TestServer.lastModified
        if etagMatches || dateMatches {
            try sendHead(status: 304, headers: fields + connectionHeaders(head))
            return try finish(head)
        }
        var body = head.query("body") ?? "cached \(name)"
        if let vary { body += " \(vary)=\(head.header(vary.lowercased()) ?? "-")" }
        return try respond(head, status: 200, extraHeaders: fields, body: body)
    }

    private func respond(
        _ head: RequestHead, status: Int, contentType: String = "text/plain; charset=utf-8",
        extraHeaders: [(String, String)] = [], body: String
    ) throws -> Bool {
        let bytes = Array(body.utf8)
        var headers: [(String, String)] = [("Content-Type", contentType), ("Content-Length", "\(bytes.count)")]
        headers += extraHeaders + connectionHeaders(head)
        try sendHead(status: status, headers: headers)
        if head.method != "HEAD" {
            try sendAll(bytes)
        }
        return try finish(head)
    }

    private func redirect(_ head: RequestHead, to location: String) throws -> Bool {
        let status = Int(head.query("status") ?? "") ?? 302
        let code = [301, 302, 303, 307, 308].contains(status) ? status : 302
        return try respond(head, status: code, extraHeaders: [("Location", location)], body: "redirecting\n")
    }

    private enum ByteRange {
        case whole
        case part(Int, Int)  // first...last, inclusive
        case unsatisfiable
    }

    private func parseRange(_ value: String, count: Int) -> ByteRange {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        guard trimmed.lowercased().hasPrefix("bytes="), !trimmed.contains(",") else { return .whole }
        let spec = trimmed.dropFirst(6).trimmingCharacters(in: .whitespaces)
        let bounds = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard bounds.count == 2 else { return .whole }
        if bounds[0].isEmpty {
            guard let suffix = Int(bounds[1]), suffix >= 0 else { return .whole }
            if suffix == 0 || count == 0 { return .unsatisfiable }
            return .part(max(0, count - suffix), count - 1)
        }
        guard let first = Int(bounds[0]), first >= 0 else { return .whole }
        if first >= count { return .unsatisfiable }
        if bounds[1].isEmpty { return .part(first, count - 1) }
        guard let last = Int(bounds[1]), last >= first else { return .whole }
        return .part(first, min(last, count - 1))
    }

    private func serveBytes(_ head: RequestHead, count: Int, rate: Int) throws -> Bool {
        let seed = seed(head)
        let etag = head.query("etag").map { "\"\($0)\"" } ?? TestServer.etag(seed: seed, count: count)
        let rangesEnabled = head.query("ranges") != "0"
        var range = ByteRange.whole
        if rangesEnabled, let value = head.header("range") {
            // If-Range: serve the part only if the validator still matches; else the whole.
            let validator = head.header("if-range")
            if validator == nil || validator == etag || validator == TestServer.lastModified {
                range = parseRange(value, count: count)
            }
        }
        var headers: [(String, String)] = [
            ("Content-Type", "application/octet-stream"),
            ("Accept-Ranges", rangesEnabled ? "bytes" : "none"),
            ("ETag", etag),
            ("Last-Modified", TestServer.lastModified),
        ]
        let status: Int
        let first: Int
        let length: Int
        switch range {
        case .whole:
            status = 200
            first = 0
            length = count
        case .part(let a, let b):
            status = 206
            first = a
            length = b - a + 1
            headers.append(("Content-Range", "bytes \(a)-\(b)/\(count)"))
        case .unsatisfiable:
            headers.append(("Content-Range", "bytes */\(count)"))
            return try respond(head, status: 416, extraHeaders: Array(headers.dropFirst()), body: "")
        }
        headers.append(("Content-Length", "\(length)"))
        headers += connectionHeaders(head)
        if status == 206, head.method != "HEAD", let gate = head.query("gate"), !waitForGate(gate) {
            throw ConnectionEnd.close
        }
        try sendHead(status: status, headers: headers)
        if head.method != "HEAD" {
            try sendStream(seed: seed, from: first, count: length, rate: rate)
        }
        return try finish(head)
    }

    private func serveGzipZeros(_ head: RequestHead, count: Int, chunked: Bool) throws -> Bool {
        let body = GzipZeros.member(count: count)
        var headers: [(String, String)] = [("Content-Type", "application/octet-stream"), ("Content-Encoding", "gzip")]
        headers.append(chunked ? ("Transfer-Encoding", "chunked") : ("Content-Length", "\(body.count)"))
        try sendHead(status: 200, headers: headers + connectionHeaders(head))
        if head.method == "HEAD" { return try finish(head) }
        var offset = 0
        while offset < body.count {
            let n = min(16 * 1024, body.count - offset)
            let piece = Array(body[offset..<(offset + n)])
            try sendAll(chunked ? Array(String(n, radix: 16).utf8) + [13, 10] + piece + [13, 10] : piece)
            offset += n
        }
        if chunked { try sendAll("0\r\n\r\n") }
        return try finish(head)
    }

    private func serveChunked(_ head: RequestHead, count: Int, chunk: Int) throws -> Bool {
        let seed = seed(head)
        try sendHead(
            status: 200,
            headers: [("Content-Type", "application/octet-stream"), ("Transfer-Encoding", "chunked")]
                + connectionHeaders(head))
        if head.method == "HEAD" { return try finish(head) }
        var offset = 0
        while offset < count {
            let n = min(chunk, count - offset)
            var piece = Array(String(n, radix: 16).utf8) + [13, 10]
            piece += DeterministicBytes.data(seed: seed, offset: offset, count: n)
            piece += [13, 10]
            try sendAll(piece)
            offset += n
        }
        try sendAll("0\r\n\r\n")
        return try finish(head)
    }

    /// Sends stream bytes `from..<from+count`, paced at `rate` bytes/s when `rate > 0`.
    func sendStream(seed: UInt64, from: Int, count: Int, rate: Int) throws {
        let blockSize = rate > 0 ? max(1, min(64 * 1024, rate / 20)) : 256 * 1024
        let block = UnsafeMutableRawBufferPointer.allocate(byteCount: blockSize, alignment: 16)
        defer { block.deallocate() }
        let clock = ContinuousClock()
        let start = clock.now
        var sent = 0
        while sent < count {
            let n = min(blockSize, count - sent)
            let part = UnsafeMutableRawBufferPointer(rebasing: block[0..<n])
            DeterministicBytes.fill(part, seed: seed, offset: from + sent)
            try sendAll(UnsafeRawBufferPointer(part))
            sent += n
            if rate > 0 && sent < count {
                // Pace against the start time so rounding does not accumulate.
                let due = start.advanced(by: .milliseconds(sent * 1000 / rate))
                let wait = clock.now.duration(to: due)
                if wait > .zero {
                    let ms = wait.components.seconds * 1000 + wait.components.attoseconds / 1_000_000_000_000_000
                    if waitForHangup(milliseconds: Int32(clamping: max(1, ms))) { throw ConnectionEnd.close }
                }
            }
        }
    }
}
