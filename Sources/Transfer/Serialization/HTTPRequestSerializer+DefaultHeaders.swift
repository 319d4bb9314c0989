import FoundationEssentials

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

extension HTTPRequestSerializer {
    /// The version named in ``defaultUserAgent``.
    public static let libraryVersion = "0.1.0"

    /// `Accept-Language` for the process locale, e.g. `fr-FR;q=1, fr;q=0.9, en;q=0.8`.
    public static var defaultAcceptLanguage: String {
        acceptLanguage(for: preferredLanguages(environment: ProcessInfo.processInfo.environment))
    }

    /// The languages of the POSIX locale environment, most preferred first:
    /// `LANGUAGE` (a colon-separated list), then the first of `LC_ALL`,
    /// `LC_MESSAGES`, `LANG`, as BCP 47 tags (`fr_FR.UTF-8` → `fr-FR`). The C
    /// and POSIX locales name no language; with none, `["en"]`.
    public static func preferredLanguages(environment: [String: String]) -> [String] {
        var candidates: [String] = []
        if let list = environment["LANGUAGE"] {
            candidates += list.split(separator: ":").map(String.init)
        }
        if let single = ["LC_ALL", "LC_MESSAGES", "LANG"].lazy.compactMap({ environment[$0] })
            .first(where: { !$0.isEmpty })
        {
            candidates.append(single)
        }
        var result: [String] = []
        for candidate in candidates {
            guard let tag = languageTag(posixLocale: candidate), !result.contains(tag) else { continue }
            result.append(tag)
        }
        return result.isEmpty ? ["en"] : result
    }

    private static func languageTag(posixLocale: String) -> String? {
        // language[_territory][.codeset][@modifier]
        var name = Substring(posixLocale)
        if let at = name.firstIndex(of: "@") { name = name[..<at] }
        if let dot = name.firstIndex(of: ".") { name = name[..<dot] }
        guard !name.isEmpty, name != "C", name != "POSIX" else { return nil }
        let tag = String(name.replacing("_", with: "-"))
        // A header value: keep only what a language tag may contain.
        guard tag.utf8.allSatisfy({ $0 == UInt8(ascii: "-") || ($0 < 0x80 && isalnum(Int32($0)) != 0) }) else {
            return nil
        }
        return tag
    }

    /// AFNetworking's Accept-Language: the first six languages with q from 1
    /// down to 0.5 in steps of 0.1, joined by ", ".
    public static func acceptLanguage(for languages: [String]) -> String {
        languages.prefix(6).enumerated().map { index, language in
            let tenths = 10 - index
            let q = tenths == 10 ? "1" : "0.\(tenths)"
            return "\(language);q=\(q)"
        }.joined(separator: ", ")
    }

    /// `Transfer/<version>`: the User-Agent of every request the library
    /// sends (``SessionManager`` and ``HTTPSessionManager`` alike) unless the
    /// session's `httpAdditionalHeaders`, the serializer's headers or the
    /// request set one. It names no kernel, host or machine.
    public static var defaultUserAgent: String { "Transfer/\(libraryVersion)" }

    /// The header line of ``defaultUserAgent``, made once.
    static let userAgentLine = "User-Agent: Transfer/\(libraryVersion)"
}
