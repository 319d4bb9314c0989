// Transfer only generates multipart bodies (nothing parses one), so this
// fuzzes what takes user input there: the boundary, field names, file
// names, MIME types and part headers, through request(byFinalizing:) and
// the body source. Properties: a boundary or header that could break the
// framing is refused with invalidRequest; an accepted form's stream gives
// exactly Content-Length bytes, and each part's head has exactly the
// header lines we set (a name can never inject a line or end the part).
import FuzzSupport
import Foundation
import Transfer

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let f = fields(bytes(data, size), 7)
    var form = MultipartFormData(boundary: f[0])
    form.append(formField: f[3], name: f[1])
    form.append(Data(f[3].utf8), name: f[1], fileName: f[2], mimeType: f[4])
    var custom = HTTPHeaders()
    custom.add(name: f[5], value: f[6])
    form.append(Data(), headers: custom)
    let base = Request(url: URL(string: "http://127.0.0.1/upload")!, method: .post)
    let request: Request
    do {
        request = try form.request(byFinalizing: base)
    } catch {
        require(error.code == .invalidRequest, "unexpected error \(error)")
        return 0
    }
    require(!f[0].isEmpty && f[0].utf8.count <= 70, "bad boundary accepted: \(f[0].debugDescription)")
    guard let length = request.headers["Content-Length"].flatMap({ Int($0) }) else {
        require(false, "no Content-Length")
        return 0
    }
    let source = form.makeSource()
    var body = [UInt8]()
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let n: Int
        do {
            n = try buffer.withUnsafeMutableBytes { try source.read(into: $0) }
        } catch {
            require(false, "stream error \(error)")
            return 0
        }
        if n == 0 { break }
        body += buffer[0..<n]
        require(body.count <= length, "stream longer than Content-Length")
    }
    source.close()
    require(body.count == length, "stream gives \(body.count) bytes, Content-Length says \(length)")
    // Each part starts with the boundary line; its head ends at the first
    // empty line and has one line per header we set.
    let expected = form.parts.map(\.headers.count)
    var offset = 0
    for (index, count) in expected.enumerated() {
        let opening = Array(((index == 0 ? "" : "\r\n") + "--\(f[0])\r\n").utf8)
        require(Array(body[offset..<min(body.count, offset + opening.count)]) == opening,
                "part \(index) does not start with the boundary")
        offset += opening.count
        var lines = 0
        while true {
            guard let end = (offset..<(body.count - 1)).first(where: { body[$0] == 0x0D && body[$0 + 1] == 0x0A })
            else {
                require(false, "unterminated head of part \(index)")
                return 0
            }
            if end == offset { offset += 2; break }
            require(!body[offset..<end].contains(0x0A), "bare LF in a part header")
            lines += 1
            offset = end + 2
        }
        require(lines == count, "part \(index) head has \(lines) lines, \(count) headers were set")
        offset += Int(form.parts[index].length)
    }
    return 0
}

@_cdecl("fuzz_multipart_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    runFuzzer(argc, argv, fuzz)
}
