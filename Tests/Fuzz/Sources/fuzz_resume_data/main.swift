// Resume data (a JSON document an app stores and hands back, so anyone
// who can write it controls it), parsed by ResumeData.decode.
//
// decode() on today's code truncates the partial file it names, so the
// target runs in a private temporary folder and calls it only for names
// inside that folder; other documents go through the JSON decoding alone.
//
// Properties: an accepted document is a transfer.resume v1 with an
// http(s) URL and a non-negative length; the part file is cut to exactly
// that length; encoded() decodes to the same value; the request it makes
// does not crash. With FUZZ_STRICT_RESUME=1, also issue 11 item 6: every
// header, the method, ETag and Last-Modified pass the request validator.
import FuzzSupport
import Foundation
@testable import Transfer

let sandbox: String = {
    let template = NSTemporaryDirectory() + "/transfer-fuzz-resume-XXXXXX"
    var bytes = Array(template.utf8CString)
    guard let made = mkdtemp(&bytes) else { fatalError("mkdtemp failed") }
    let path = String(cString: made)
    require(chdir(path) == 0, "chdir \(path)")
    return path
}()
let partFiles = ["a.part", "b.part"]
let strict = ProcessInfo.processInfo.environment["FUZZ_STRICT_RESUME"] == "1"

/// Only names that stay inside the sandbox: relative without "..", or
/// absolute below it.
func insideSandbox(_ path: String) -> Bool {
    if path.isEmpty || path.utf8.contains(0) { return false }
    if path.split(separator: "/").contains("..") { return false }
    return !path.hasPrefix("/") || path.hasPrefix(sandbox + "/")
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    _ = sandbox
    for name in partFiles { require(truncate(name, 4096) == 0 || creat(name, 0o600) >= 0, "reset \(name)") }
    for name in partFiles { _ = truncate(name, 4096) }
    let input = bytes(data, size)
    guard let parsed = try? JSONDecoder().decode(ResumeData.self, from: input),
        insideSandbox(parsed.partialFile)
    else { return 0 }
    let decoded: ResumeData
    do {
        decoded = try ResumeData.decode(input)
    } catch {
        require(error.code == .invalidResumeData, "unexpected error \(error)")
        return 0
    }
    require(decoded.format == "transfer.resume" && decoded.version == 1, "foreign document accepted")
    require(decoded.bytesOnDisk >= 0, "negative length accepted")
    let scheme = URL(string: decoded.url)?.scheme?.lowercased()
    require(scheme == "http" || scheme == "https", "non-http URL accepted: \(decoded.url)")
    var info = stat()
    if stat(decoded.partialFile, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG {
        require(Int64(info.st_size) == decoded.bytesOnDisk, "part file not cut to bytesOnDisk")
    }
    let request = decoded.request
    _ = decoded.validator
    if strict {
        require((try? request.headers.validate()) != nil, "resume data injects a header: \(decoded.headers)")
        for value in [decoded.method, decoded.etag ?? "", decoded.lastModified ?? ""] {
            require(!value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }),
                    "CR/LF/NUL accepted in \(value.debugDescription)")
        }
    }
    guard let encoded = decoded.encoded() else {
        require(false, "an accepted document cannot be encoded")
        return 0
    }
    let again = try? ResumeData.decode(encoded)
    require(again == decoded, "encode/decode does not round-trip: \(decoded)")
    return 0
}

@_cdecl("fuzz_resume_data_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    runFuzzer(argc, argv, fuzz)
}
