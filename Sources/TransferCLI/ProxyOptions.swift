import Dispatch
import FoundationEssentials
import Glibc
import Transfer

/// `-x/--proxy`, `-U/--proxy-user`, `--noproxy` and `--proxy-cacert`, with curl's meaning,
/// as a ``ProxySetting``:
/// - `-x URL`: the scheme picks the kind (http://, https://, socks5://, socks5h://; none
///   is http); `user:password@` in it are the credentials unless `-U` gives them;
///   `-x ""` uses no proxy and ignores the environment.
/// - `--noproxy "*"` without `-x` also means no proxy; other lists need `-x` (the
///   environment's proxy keeps the environment's `no_proxy`), as do `-U` and
///   `--proxy-cacert`.
/// - Without any of them the environment decides (`http_proxy`, `https_proxy`,
///   `all_proxy`, `no_proxy`), as with curl.
enum ProxyOptions {
    /// - Returns: nil when no proxy flag was given.
    /// - Throws: A usage failure naming the flag.
    static func setting(_ options: Options) throws(Failure) -> ProxySetting? {
        guard let text = options.proxy else {
            if options.noProxy?.trimmingWhitespace() == "*" {
                return ProxySetting.none
            }
            for (flag, value) in [("--proxy-user", options.proxyUser), ("--noproxy", options.noProxy),
                                  ("--proxy-cacert", options.proxyCACert)] where value != nil {
                throw Failure(.usage, "\(flag) needs -x/--proxy")
            }
            return nil
        }
        if text.isEmpty { return ProxySetting.none }
        var proxy: ProxyConfiguration
        do {
            proxy = try ProxyConfiguration(url: text)
        } catch {
            throw Failure(.usage, "--proxy: \(error.message)")
        }
        if let user = options.proxyUser {
            let parts = user.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            proxy.credentials = .init(user: String(parts[0]), password: parts.count > 1 ? String(parts[1]) : "")
        }
        if let list = options.noProxy {
            proxy.bypass = list.split(separator: ",", omittingEmptySubsequences: false).map {
                $0.trimmingWhitespace()
            }
        }
        if let file = options.proxyCACert {
            guard FileManager.default.isReadableFile(atPath: file) else {
                throw Failure(.invalidRequest, "cannot read --proxy-cacert \(file)")
            }
            proxy.caFile = file
        }
        do {
            try proxy.validate()
        } catch {
            throw Failure(.usage, "--proxy: \(error.message)")
        }
        return .through(proxy)
    }
}
