import Foundation

/// Reading `--url-file FILE`. A failure names the file and says why in
/// plain words (a folder, a missing file, no permission), never a
/// Foundation error number.
enum URLFile {
    /// The whole text of `path`, or of standard input for `-`. Bytes that
    /// are not UTF-8 become U+FFFD, so such a line fails as a bad URL.
    ///
    /// - Throws: ``Failure`` with exit 3, labelled with `path`.
    static func read(_ path: String) throws(Failure) -> String {
        if path == "-" { return String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self) }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw failure(path, String(cString: strerror(errno))) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw failure(path, String(cString: strerror(errno))) }
        if info.st_mode & S_IFMT == S_IFDIR { throw failure(path, "it is a folder, not a file") }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { Foundation.read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw failure(path, String(cString: strerror(errno))) }
            if count == 0 { break }
            bytes.append(contentsOf: buffer[0..<count])
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func failure(_ path: String, _ why: String) -> Failure {
        var failure = Failure(.invalidRequest, "cannot read the --url-file: \(why)")
        failure.subject = path
        return failure
    }
}
