import CTransfer

/// libcurl's cookie engine in a share handle (`ct_cookies.h`): the jar a
/// ``CookieStore`` owns and the loops of the sessions that use it retain.
final class CookieJar: @unchecked Sendable {
    // @unchecked Sendable: `pointer` is set once; the jar's C API takes the
    // share handle's lock itself, so any thread may call it.
    let pointer: OpaquePointer

    /// An empty jar; nil only out of memory (or with a libcurl without cookies).
    init?() {
        var created: OpaquePointer?
        guard ct_cookie_jar_create(&created) == CT_OK, let created else { return nil }
        pointer = created
    }

    deinit { ct_cookie_jar_release(pointer) }

    /// The jar's cookies as Netscape lines, expired ones included (nil when
    /// the jar cannot be listed).
    func netscapeLines() -> [Substring]? {
        var text: UnsafeMutablePointer<CChar>?
        var length = 0
        guard ct_cookie_jar_list(pointer, &text, &length) == CT_OK, let text else { return nil }
        defer { ct_cookie_jar_free_text(text) }
        return String(cString: text).split(separator: "\n")
    }

    /// Adds Netscape cookie-file lines (libcurl skips those it cannot parse).
    ///
    /// - Parameter replacingAll: Empty the jar first, in the same locked step.
    /// - Throws: ``TransferError/Code/invalidRequest`` whose message is the engine's code name.
    func add(_ lines: [String], replacingAll: Bool) throws(TransferError) {
        let strings = CStrings()
        defer { strings.free() }
        let array = strings.makeArray(lines)
        let code = ct_cookie_jar_add(pointer, array, lines.count, replacingAll ? 1 : 0)
        guard code == CT_OK else { throw TransferError(.invalidRequest, String(cString: ct_code_name(code))) }
    }

    /// Empties the jar.
    func removeAll() {
        ct_cookie_jar_add(pointer, nil, 0, 1)
    }

    /// Runs `body` holding the jar's lock: transfers see the jar before or after, never between.
    func withLock<R>(_ body: () -> R) -> R {
        ct_cookie_jar_lock(pointer)
        defer { ct_cookie_jar_unlock(pointer) }
        return body()
    }
}

extension CookieStore {
    /// Whether the libcurl in use has a public suffix list (libpsl,
    /// `CURL_VERSION_PSL`), read once from libcurl. With it, a `Set-Cookie`
    /// whose `Domain` is a public suffix (`Domain=co.uk`, `Domain=github.io`)
    /// is refused. Without it, libcurl accepts such a cookie from any host
    /// under the suffix, and sends it to every other site under it: a host
    /// can then set cookies for its neighbours. A session with a cookie store
    /// and a logger warns once when it is false.
    public static let enforcesPublicSuffixList: Bool = ct_curl_has_psl() != 0
}
