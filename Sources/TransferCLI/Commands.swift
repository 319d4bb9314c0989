import ArgumentParser
import Transfer

/// The root command: only dispatches to a verb.
struct TransferTool: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "transfer",
        abstract: "HTTP transfers with the Transfer library (curl-style flags).",
        discussion: "Exit codes: 0 ok, 1 internal error, 2 usage, 3 invalid request, 4 cannot connect, "
            + "5 timed out, 6 TLS, 7 pinning, 8 redirects, 9 status, 10 content, 11 truncated or malformed, "
            + "12 local file, 13 checksum, 14 interrupted, 15 proxy, 16 too many open files. "
            + "See docs/CLI.md and transfer(1). "
            + "Without a verb, transfer URL... means get (post with a body option), as curl; "
            + "transfer --version prints the versions of transfer, libcurl, OpenSSL and nghttp2. "
            + "curl's exit codes as ours (docs/CLI.md): curl 6 and 7 are our 4 (cannot connect), curl 22 our 9 "
            + "(status), curl 28 our 5 (timed out), curl 35 our 6 (TLS), curl 47 our 8 (redirects), curl 56 our 11 "
            + "(truncated), curl 60 our 6 (TLS; 7 when pinning refused it), curl 63 our 11 (over --max-filesize).",
        subcommands: [Get.self, Head.self, Post.self, Put.self, Patch.self, Delete.self]
    )
}

/// What every verb has: a method, the options, the URLs.
protocol Verb: ParsableCommand {
    static var method: HTTPMethod { get }
    var options: Options { get }
    var urls: [String] { get }
}

extension Verb {
    func validate() throws {
        if urls.isEmpty && options.urlFile == nil && options.curl.urls.isEmpty {
            throw ValidationError("give at least one URL (or --url-file FILE)")
        }
    }
}

struct Get: Verb {
    static let configuration = CommandConfiguration(abstract: "GET, body to a file or stdout.")
    static var method: HTTPMethod { .get }
    @OptionGroup var options: Options
    @Argument(help: "The URLs to fetch.") var urls: [String] = []
}

struct Head: Verb {
    static let configuration = CommandConfiguration(abstract: "HEAD, prints the status line and headers.")
    static var method: HTTPMethod { .head }
    @OptionGroup var options: Options
    @Argument(help: "The URL.") var urls: [String] = []
}

struct Post: Verb {
    static let configuration = CommandConfiguration(abstract: "POST with --data / --json / --form / --upload-file.")
    static var method: HTTPMethod { .post }
    @OptionGroup var options: Options
    @Argument(help: "The URL.") var urls: [String] = []
}

struct Put: Verb {
    static let configuration = CommandConfiguration(abstract: "PUT (same body options as post).")
    static var method: HTTPMethod { .put }
    @OptionGroup var options: Options
    @Argument(help: "The URL.") var urls: [String] = []
}

struct Patch: Verb {
    static let configuration = CommandConfiguration(abstract: "PATCH (same body options as post).")
    static var method: HTTPMethod { .patch }
    @OptionGroup var options: Options
    @Argument(help: "The URL.") var urls: [String] = []
}

struct Delete: Verb {
    static let configuration = CommandConfiguration(abstract: "DELETE.")
    static var method: HTTPMethod { .delete }
    @OptionGroup var options: Options
    @Argument(help: "The URL.") var urls: [String] = []
}
