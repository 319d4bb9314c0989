// Resume data (a JSON document an app stores and hands back, so anyone
// who can write it controls it), parsed by ResumeData.decode.
//
// The target runs with a private folder standing in for the session's
// temporary folder, holding two part files of 4096 bytes. Its path is
// random, so the input may say `@DIR@` where it means that folder (the
// seeds do); everything else reaches decode as it is.
//
// Properties (issue 11 item 6): decode touches no file (both part files
// keep their 4096 bytes); an accepted document is a transfer.resume v1
// with an http(s) URL, a non-negative length no larger than its part
// file, and a part file directly inside the folder; every header, the
// method, ETag and Last-Modified pass the request validator (no CR, LF or
// NUL); encoded() decodes to the same value; building the request does
// not crash.
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

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    _ = sandbox
    for name in partFiles {
        let fd = open(name, O_WRONLY | O_CREAT | O_NOFOLLOW, 0o600)
        require(fd >= 0 && ftruncate(fd, 4096) == 0, "reset \(name)")
        close(fd)
    }
    let input = withFolder(bytes(data, size))
    let decoded: ResumeData
    do {
        decoded = try ResumeData.decode(input, temporaryFolder: sandbox)
    } catch {
        require(error.code == .invalidResumeData, "unexpected error \(error)")
        untouched()
        return 0
    }
    untouched()
    require(decoded.format == "transfer.resume" && decoded.version == 1, "foreign document accepted")
    require(decoded.bytesOnDisk >= 0 && decoded.bytesOnDisk <= 4096, "impossible length accepted")
    let scheme = URL(string: decoded.url)?.scheme?.lowercased()
    require(scheme == "http" || scheme == "https", "non-http URL accepted: \(decoded.url)")
    let name = (decoded.partialFile as NSString).lastPathComponent
    require(partFiles.contains(name) && (decoded.partialFile == name || decoded.partialFile == sandbox + "/" + name),
            "part file outside the folder accepted: \(decoded.partialFile)")
    let request = decoded.request
    _ = decoded.validator
    require((try? request.headers.validate()) != nil, "resume data injects a header: \(decoded.headers)")
    for value in [decoded.method, decoded.etag ?? "", decoded.lastModified ?? ""] {
        require(!value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }),
                "CR/LF/NUL accepted in \(value.debugDescription)")
    }
    guard let encoded = decoded.encoded() else {
        require(false, "an accepted document cannot be encoded")
        return 0
    }
    let again = try? ResumeData.decode(encoded, temporaryFolder: sandbox)
    require(again == decoded, "encode/decode does not round-trip: \(decoded)")
    return 0
}

/// The input with every `@DIR@` replaced by the folder's path.
func withFolder(_ input: Data) -> Data {
    let marker = Data("@DIR@".utf8)
    guard input.range(of: marker) != nil else { return input }
    var out = Data()
    var rest = input[...]
    while let hit = rest.range(of: marker) {
        out.append(rest[rest.startIndex..<hit.lowerBound])
        out.append(Data(sandbox.utf8))
        rest = rest[hit.upperBound...]
    }
    out.append(rest)
    return out
}

/// Decoding never changes a file: both part files still hold 4096 bytes.
func untouched() {
    for name in partFiles {
        var info = stat()
        require(lstat(name, &info) == 0 && info.st_size == 4096, "decode touched \(name)")
    }
}

@_cdecl("fuzz_resume_data_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    runFuzzer(argc, argv, fuzz)
}
