import Dispatch
import FoundationEssentials
import Glibc

/// Reading `--url-file FILE`. A failure names the file and says why in
/// plain words (a folder, a missing file, no permission), never a
/// Foundation error number.
enum URLFile {
    /// The whole text of `path`, or of standard input for `-`. Bytes that
    /// are not UTF-8 become U+FFFD, so such a line fails as a bad URL.
    ///
    /// - Throws: ``Failure`` with exit 3, labelled with `path`.
    static func read(_ path: String) throws(Failure) -> String {
        let lines = try Lines(path: path)
        var bytes: [UInt8] = []
        while let chunk = try lines.readChunk() { bytes.append(contentsOf: chunk) }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The URL lines of a file (or of standard input for `-`), trimmed,
    /// without blank lines and `#` comments, read 64 KiB at a time: the
    /// file is never held whole. Not thread-safe (``URLStream`` locks).
    final class Lines {
        private let path: String
        private var fd: Int32
        private var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        /// Bytes read and not yet split into lines (the start of a line the
        /// last read cut).
        private var pending: [UInt8] = []
        private var lines: [String] = []
        private var position = 0
        private var atEnd = false

        /// Opens `path`; `-` is standard input.
        ///
        /// - Throws: ``Failure`` (exit 3) for a missing or unreadable file, or a folder.
        init(path: String) throws(Failure) {
            self.path = path
            if path == "-" {
                fd = STDIN_FILENO
                return
            }
            fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw URLFile.failure(path, String(cString: strerror(errno))) }
            var info = stat()
            guard fstat(fd, &info) == 0 else {
                let why = String(cString: strerror(errno))
                close(fd)
                throw URLFile.failure(path, why)
            }
            if info.st_mode & S_IFMT == S_IFDIR {
                close(fd)
                throw URLFile.failure(path, "it is a folder, not a file")
            }
        }

        deinit { closeFile() }

        private func closeFile() {
            if fd > STDIN_FILENO { close(fd) }
            fd = -1
        }

        /// The longest line kept; a longer one is skipped and reported.
        static let maximumLineLength = 1 << 20
        /// The start of a line longer than ``maximumLineLength``, while the
        /// rest of it is skipped.
        private var longLine: String?

        /// The next URL line (a failure for a line longer than 1 MiB, which
        /// no server takes as a URL), or nil at the end of the file.
        ///
        /// - Throws: ``Failure`` (exit 3) when a read fails.
        func next() throws(Failure) -> Result<String, Failure>? {
            while position == lines.count {
                lines.removeAll(keepingCapacity: true)
                position = 0
                if atEnd { return nil }
                guard let chunk = try readChunk() else {
                    // The last line may have no line break.
                    atEnd = true
                    if let start = longLine { return .failure(Self.tooLong(start)) }
                    lines = Parse.urlLines(bytes: pending)
                    pending.removeAll()
                    continue
                }
                // Split at the last line break: what follows it waits for more.
                guard let cut = chunk.lastIndex(where: { $0 == 0x0A || $0 == 0x0D }) else {
                    if longLine == nil {
                        pending.append(contentsOf: chunk)
                        if pending.count > Self.maximumLineLength {
                            longLine = String(decoding: pending.prefix(60), as: UTF8.self)
                            pending.removeAll()
                        }
                    }
                    continue
                }
                if let start = longLine {
                    // The long line ends in this chunk: report it, then go on after it.
                    longLine = nil
                    let end = chunk.firstIndex(where: { $0 == 0x0A || $0 == 0x0D })!
                    pending.removeAll(keepingCapacity: true)
                    pending.append(contentsOf: chunk[(end + 1)...])
                    if let next = pending.lastIndex(where: { $0 == 0x0A || $0 == 0x0D }) {
                        lines = Parse.urlLines(bytes: Array(pending[..<next]))
                        pending.removeFirst(next + 1)
                    }
                    return .failure(Self.tooLong(start))
                }
                pending.append(contentsOf: chunk[..<cut])
                lines = Parse.urlLines(bytes: pending)
                pending.removeAll(keepingCapacity: true)
                pending.append(contentsOf: chunk[(cut + 1)...])
            }
            defer { position += 1 }
            return .success(lines[position])
        }

        private static func tooLong(_ start: String) -> Failure {
            Failure(.invalidRequest, "a line of the --url-file is longer than 1 MiB: \(start.debugDescription)...")
        }

        /// The next bytes of the file, or nil at its end.
        fileprivate func readChunk() throws(Failure) -> ArraySlice<UInt8>? {
            guard fd >= 0 else { return nil }
            while true {
                let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count >= 0 else {
                    let why = String(cString: strerror(errno))
                    closeFile()
                    throw URLFile.failure(path, why)
                }
                if count == 0 {
                    closeFile()
                    return nil
                }
                return buffer[0..<count]
            }
        }
    }

    fileprivate static func failure(_ path: String, _ why: String) -> Failure {
        var failure = Failure(.invalidRequest, "cannot read the --url-file: \(why)")
        failure.subject = path
        return failure
    }
}
