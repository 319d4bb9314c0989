import Foundation

/// `-F/--form` bodies: multipart/form-data written to a temporary file in
/// large blocks, then uploaded from that file (never whole in memory).
///
/// Stand-in until the serialization branch's streamed multipart builder is
/// merged: `MultipartBody.build` is the one call site to switch.
struct MultipartBody {
    enum Part {
        case field(name: String, value: String)
        case file(name: String, path: String, mimeType: String)
    }

    let parts: [Part]
    let boundary: String

    /// Parses `name=value` and `name=@file[;type=mime]`; nil when malformed.
    static func parse(_ specs: [String]) -> [Part]? {
        var parts: [Part] = []
        for spec in specs {
            guard let equals = spec.firstIndex(of: "="), equals != spec.startIndex else { return nil }
            let name = String(spec[..<equals])
            let value = String(spec[spec.index(after: equals)...])
            if value.hasPrefix("@") {
                var path = String(value.dropFirst())
                var mime = "application/octet-stream"
                if let range = path.range(of: ";type=", options: .backwards) {
                    mime = String(path[range.upperBound...])
                    path = String(path[..<range.lowerBound])
                }
                guard !path.isEmpty, !mime.isEmpty else { return nil }
                parts.append(.file(name: name, path: path, mimeType: mime))
            } else {
                parts.append(.field(name: name, value: value))
            }
        }
        return parts
    }

    init(parts: [Part]) {
        self.parts = parts
        boundary = "transfer-" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
    }

    var contentType: String { "multipart/form-data; boundary=\(boundary)" }

    /// Writes the body to `destination`.
    /// - Throws: ``Failure`` with `.invalidRequest` for an unreadable part
    ///   file, `.localFile` when the temporary file cannot be written.
    func write(to destination: String) throws(Failure) {
        let out = open(destination, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard out >= 0 else {
            throw Failure(.localFile, "cannot create \(destination): \(String(cString: strerror(errno)))")
        }
        defer { close(out) }
        func emit(_ text: String) throws(Failure) {
            let rc = Terminal.writeAll(out, Array(text.utf8))
            if rc != 0 { throw Failure(.localFile, "cannot write \(destination): \(String(cString: strerror(rc)))") }
        }
        for part in parts {
            try emit("--\(boundary)\r\n")
            switch part {
            case .field(let name, let value):
                try emit("Content-Disposition: form-data; name=\"\(Self.quoted(name))\"\r\n\r\n\(value)\r\n")
            case .file(let name, let path, let mime):
                let filename = (path as NSString).lastPathComponent
                try emit("Content-Disposition: form-data; name=\"\(Self.quoted(name))\"; "
                    + "filename=\"\(Self.quoted(filename))\"\r\nContent-Type: \(mime)\r\n\r\n")
                try copy(path, to: out, destination: destination)
                try emit("\r\n")
            }
        }
        try emit("--\(boundary)--\r\n")
    }

    private func copy(_ path: String, to out: Int32, destination: String) throws(Failure) {
        let input = open(path, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else {
            throw Failure(.invalidRequest, "cannot read form file \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(input) }
        let size = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let n = read(input, buffer.baseAddress, size)
            if n < 0 {
                if errno == EINTR { continue }
                throw Failure(.invalidRequest, "cannot read form file \(path): \(String(cString: strerror(errno)))")
            }
            if n == 0 { return }
            let rc = Terminal.writeAll(out, UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            if rc != 0 { throw Failure(.localFile, "cannot write \(destination): \(String(cString: strerror(rc)))") }
        }
    }

    /// Quotes for a header parameter: no CR/LF, escaped `"` and `\`.
    private static func quoted(_ text: String) -> String {
        Terminal.printable(text).replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
    }
}
