// Content-Disposition file names (a server chooses them) and URL path
// names. Property: a sanitized name is one safe path component: never
// empty, ".", "..", hidden, longer than 255 bytes, and holds no '/', '\',
// NUL or control character.
import FuzzSupport
import Foundation
@testable import Transfer

func checkSafe(_ name: String, from input: String) {
    require(!name.isEmpty, "empty name from \(input.debugDescription)")
    // Bytes, not Characters: a combining mark after '.' must not hide it.
    require(name.utf8.first != UInt8(ascii: ".") && name.utf8.last != UInt8(ascii: "."),
            "hidden or dot name \(name.debugDescription)")
    require(name.utf8.count <= 255, "name longer than NAME_MAX")
    for scalar in name.unicodeScalars {
        require(scalar != "/" && scalar != "\\", "separator in \(name.debugDescription)")
        require(scalar.value >= 0x20 && !(0x7F...0x9F).contains(scalar.value),
                "control character in \(name.debugDescription)")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let parts = fields(bytes(data, size), 2)
    let header = parts[0]
    if let raw = HTTPResponse.filename(fromContentDisposition: header) {
        if let safe = HTTPResponse.sanitizedFilename(raw) {
            checkSafe(safe, from: raw)
            // Sanitizing is idempotent: a safe name stays as it is.
            require(HTTPResponse.sanitizedFilename(safe) == safe, "not idempotent on \(safe.debugDescription)")
        }
    }
    if let safe = HTTPResponse.sanitizedFilename(header) { checkSafe(safe, from: header) }
    // The whole path: header plus a server-chosen URL path.
    var components = URLComponents()
    components.scheme = "http"
    components.host = "127.0.0.1"
    components.path = "/" + parts[1]
    if let url = components.url {
        var headers = HTTPHeaders()
        if !header.isEmpty { headers["Content-Disposition"] = header }
        let response = HTTPResponse(url: url, statusCode: 200, headers: headers)
        let name = response.suggestedFilename
        checkSafe(name, from: header + " / " + parts[1])
        let destination = DownloadTask.destination(inDirectory: URL(fileURLWithPath: "/nonexistent/dir"))
        let target = destination(url, response)
        require(target.deletingLastPathComponent().path == "/nonexistent/dir",
                "destination leaves its folder: \(target.path)")
    }
    return 0
}

@_cdecl("fuzz_filename_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    runFuzzer(argc, argv, fuzz)
}
