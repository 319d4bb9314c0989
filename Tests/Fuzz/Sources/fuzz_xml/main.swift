// The XML well-formedness check of `transfer --serializer xml`
// (XMLWellFormedness): a response body from any server.
// Input: the body.
// Properties: no crash, no hang, memory bounded by the input (the check
// keeps only the stack of open element names); a failure points inside
// the input; a body that passes still passes with a comment and white
// space after it, and fails with a second root element after it.
import FuzzSupport
@testable import Transfer

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    do {
        try XMLWellFormedness.check(input)
    } catch {
        require(error.offset >= 0 && error.offset <= max(size, 1) * 2, "offset \(error.offset) of \(size) bytes")
        return 0
    }
    // UTF-16 input is transcoded first; the suffixes below are UTF-8.
    if size >= 2 && (input[0] == 0xFE || input[0] == 0xFF) { return 0 }
    var trailed = input
    trailed += Array("\n<!-- after -->\n".utf8)
    require((try? XMLWellFormedness.check(trailed)) != nil, "a trailing comment broke a well-formed body")
    var twoRoots = input
    twoRoots += Array("<second/>".utf8)
    require((try? XMLWellFormedness.check(twoRoots)) == nil, "a second root element was accepted")
    return 0
}

@_cdecl("fuzz_xml_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    runFuzzer(argc, argv, fuzz)
}
