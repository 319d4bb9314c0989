import FoundationEssentials

extension Request {
    /// Header fields whose values are secrets: replaced by `<redacted>` in
    /// ``curlDescription(redactingCredentials:)`` unless asked otherwise.
    static let credentialHeaderNames: Set<String> = [
        "authorization", "proxy-authorization", "cookie", "set-cookie",
    ]

    /// A `curl` command line that sends this request, for debugging and bug
    /// reports (Alamofire's `cURLDescription()`).
    ///
    /// Every argument is quoted for a POSIX shell, so the line can be pasted
    /// as it is. With `redactingCredentials` (the default) the values of
    /// `Authorization`, `Proxy-Authorization`, `Cookie` and `Set-Cookie` and a
    /// password in the URL are replaced by `<redacted>`.
    ///
    /// The body:
    /// - `.data` that is valid UTF-8 is passed inline (`--data-binary`);
    ///   binary data is not printed, a comment gives its length instead;
    /// - `.file` is passed by path (`--data-binary @path`, whole file only);
    /// - `.stream` cannot be shown: a comment says so.
    ///
    /// Only what the request itself holds is shown: the session's default
    /// headers, its security policy and its limits are not part of it.
    public func curlDescription(redactingCredentials: Bool = true) -> String {
        var words = ["curl"]
        var notes: [String] = []
        switch method {
        case .get: if body != nil { words += ["-X", "GET"] }
        case .head: words.append("--head")
        case .post where body != nil: break
        default: words += ["-X", method.rawValue]
        }
        for field in headers {
            let secret = redactingCredentials && Self.credentialHeaderNames.contains(field.name.lowercased())
            words += ["-H", "\(field.name): \(secret ? "<redacted>" : field.value)"]
        }
        switch body {
        case nil:
            break
        case .data(let data):
            if data.isEmpty {
                words += ["--data-binary", ""]
            } else if let text = String(data: data, encoding: .utf8), !text.contains("\0") {
                // `@` at the start would make curl read a file: send it from stdin-free
                // literal form instead.
                words += [text.hasPrefix("@") ? "--data-raw" : "--data-binary", text]
            } else {
                notes.append("# body: \(data.count) bytes of binary data, not shown")
            }
        case .file(let url, let offset, let length):
            words += ["--data-binary", "@" + url.path]
            if offset != 0 || length != nil {
                notes.append("# body: bytes \(offset)..<\(length.map { String(offset + $0) } ?? "end") of the file only")
            }
        case .stream(_, let length):
            notes.append("# body: a stream of \(length.map { "\($0) bytes" } ?? "unknown length"), not shown")
        }
        words.append(redactingCredentials ? Self.redactingPassword(in: url) : url.absoluteString)
        let line = words.map(Self.shellQuoted).joined(separator: " ")
        return notes.isEmpty ? line : ([line] + notes).joined(separator: "\n")
    }

    /// `url` with the password of its user info replaced by `<redacted>`.
    private static func redactingPassword(in url: URL) -> String {
        guard url.password != nil, var components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        else { return url.absoluteString }
        components.percentEncodedPassword = "%3Credacted%3E"
        return components.string ?? url.absoluteString
    }

    /// `word` quoted for a POSIX shell: bare when it holds only safe characters,
    /// else in single quotes, with each `'` written as `'\''`.
    static func shellQuoted(_ word: String) -> String {
        let safe = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,+%@")
        if !word.isEmpty, word.allSatisfy({ safe.contains($0) }) { return word }
        return "'" + word.replacing("'", with: #"'\''"#) + "'"
    }
}
