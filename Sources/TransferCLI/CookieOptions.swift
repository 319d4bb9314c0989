import Dispatch
import FoundationEssentials
import Glibc
import Transfer

/// `-b/--cookie` and `-c/--cookie-jar`, with curl's meaning:
///
/// - `-b "NAME=VALUE; N2=V2"` (the argument has a '='): sent as is in a
///   `Cookie` header of every request (not to another origin after a redirect).
/// - `-b FILE` (no '='): the cookie engine starts from the Netscape cookie
///   file FILE; a FILE that does not exist starts it empty, as curl does;
///   `-b ""` starts it empty. Cookies the responses set are sent on later
///   requests of the run.
/// - `-c FILE`: the cookie engine is on, and every cookie of the run is
///   written to FILE at the end (replaced atomically), readable by `curl -b`.
/// - Neither: no cookie engine, as with curl.
enum CookieOptions {
    /// Sets up `configuration`'s cookies; returns the path for `-c`.
    static func apply(_ options: Options, to configuration: inout SessionConfiguration) throws(Failure) -> String? {
        configuration.cookieStore = nil
        var engine = options.cookieJar != nil
        var store = CookieStore()
        if let argument = options.cookie {
            if argument.contains("=") {
                guard !argument.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) else {
                    throw Failure(.usage, "--cookie: the cookie string has a line break or NUL")
                }
                configuration.httpAdditionalHeaders["Cookie"] = argument
            } else {
                engine = true
                if !argument.isEmpty && FileManager.default.fileExists(atPath: argument) {
                    do throws(TransferError) {
                        store = try CookieStore(contentsOf: URL(fileURLWithPath: argument))
                    } catch {
                        let status: ExitStatus = error.code == .fileError ? .localFile : .invalidRequest
                        throw Failure(status, "--cookie: \(error.message)")
                    }
                }
            }
        }
        if engine { configuration.cookieStore = store }
        if let jar = options.cookieJar, jar.isEmpty { throw Failure(.usage, "--cookie-jar: needs a file name") }
        return options.cookieJar
    }

    /// Writes the run's cookies for `-c FILE`; a failure is reported, not thrown.
    static func writeJar(_ session: SessionManager?, to path: String?) -> Failure? {
        guard let path else { return nil }
        let store = session?.cookieStore ?? CookieStore()
        do throws(TransferError) {
            try store.write(to: URL(fileURLWithPath: path))
            return nil
        } catch {
            return Failure(.localFile, "--cookie-jar: \(error.message)")
        }
    }
}
