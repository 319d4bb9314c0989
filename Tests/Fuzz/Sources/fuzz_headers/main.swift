// A response head as the engine delivers it (raw "Name: value" lines),
// parsed by HTTPHeaders(rawHeaderBlock:), and what HTTPResponse derives
// from it. Properties: names are non-empty, trimmed and hold no colon;
// nothing parsed holds CR or LF; lookups agree with the field list.
import FuzzSupport
import Foundation
import Transfer

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let raw = String(decoding: bytes(data, size), as: UTF8.self)
    let headers = HTTPHeaders(rawHeaderBlock: raw)
    for field in headers {
        require(!field.name.isEmpty, "empty header name")
        require(!field.name.utf8.contains(0x3A), "colon in name \(field.name.debugDescription)")
        for text in [field.name, field.value] {
            require(!text.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A }), "CR/LF in \(text.debugDescription)")
            require(text.utf8.first != 0x20 && text.utf8.last != 0x20, "untrimmed \(text.debugDescription)")
        }
        require(headers.contains(field.name), "lookup misses \(field.name.debugDescription)")
        _ = try? HTTPHeaders.validate(name: field.name, value: field.value)
    }
    require(headers.count <= raw.utf8.count / 2 + 1, "more fields than the input can hold")
    _ = headers.dictionary
    _ = headers.description
    let response = HTTPResponse(url: URL(string: "http://127.0.0.1/a")!, statusCode: 200, headers: headers)
    _ = response.mimeType
    _ = response.textEncodingName
    _ = response.expectedContentLength
    _ = response.suggestedFilename
    return 0
}

@_cdecl("fuzz_headers_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    runFuzzer(argc, argv, fuzz)
}
