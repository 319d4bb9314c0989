import FoundationEssentials
import Glibc

/// What a cancelled download needs to continue: a documented, versioned
/// JSON document (format "transfer.resume", version 1).
///
/// ```json
/// {"format":"transfer.resume","version":1,"url":"https://…","method":"GET",
///  "headers":[["Accept","*/*"]],"etag":"\"abc\"","lastModified":"…",
///  "bytesOnDisk":1048576,"partialFile":"/tmp/…/download-….part"}
/// ```
/// The partial file holds exactly `bytesOnDisk` bytes that were written and
/// fsync'd before the document was made.
struct ResumeData: Codable, Sendable, Hashable {
    static let format = "transfer.resume"
    static let currentVersion = 1

    var format: String
    var version: Int
    var url: String
    var method: String
    var headers: [[String]]
    var etag: String?
    var lastModified: String?
    var bytesOnDisk: Int64
    var partialFile: String

    var partialFilePath: String { partialFile }

    /// The If-Range validator: a strong ETag, else Last-Modified.
    var validator: String? {
        if let etag, !etag.hasPrefix("W/") { return etag }
        return lastModified
    }

    init?(task: DownloadTask, outcome: Outcome) {
        guard let kept = outcome.filePath, outcome.bytesOnDisk > 0,
            let path = Self.partialFileInTemporaryFolder(kept, folder: task.session.temporaryDirectory.path)
        else { return nil }
        let request = task.originalRequest
        format = Self.format
        version = Self.currentVersion
        url = (task.currentRequest ?? request).url.absoluteString
        method = request.method.rawValue
        headers = request.headers.map { [$0.name, $0.value] }
        etag = outcome.etag
        lastModified = outcome.lastModified
        bytesOnDisk = outcome.bytesOnDisk
        partialFile = path
    }

    /// Resume data may only name a file in the session's temporary folder:
    /// a part file kept elsewhere (next to a fixed destination) moves there.
    private static func partialFileInTemporaryFolder(_ path: String, folder: String) -> String? {
        if TemporaryFolder.contains(path, folder: folder) { return path }
        do throws(TransferError) {
            try TemporaryFolder.prepare(folder)
            let target = folder + "/download-\(UUID().uuidString).part"
            try FileMover.move(from: URL(fileURLWithPath: path), to: URL(fileURLWithPath: target))
            return target
        } catch {
            return nil
        }
    }

    func encoded() -> Data? {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return try? encoder.encode(self)
    }

    /// Parses and checks resume data without touching any file: the format,
    /// the version, the request it repeats (through the same validator as a
    /// user's request: no CR, LF or NUL anywhere), and that the partial file
    /// is a regular file directly inside the session's private temporary
    /// folder holding at least the bytes it claims.
    ///
    /// Resume data may come from anywhere (a file, a server, a crafted
    /// document), so it is never trusted to name a path: bytes past
    /// `bytesOnDisk` are dropped by the engine when the task starts, and
    /// only inside `temporaryFolder`.
    static func decode(_ data: Data, temporaryFolder: String = TemporaryFolder.path())
        throws(TransferError) -> ResumeData
    {
        let decoded: ResumeData
        do {
            decoded = try JSONDecoder().decode(ResumeData.self, from: data)
        } catch {
            throw TransferError(.invalidResumeData, "resume data is not a Transfer resume document: \(error)")
        }
        guard decoded.format == format else {
            throw TransferError(.invalidResumeData, "resume data has a foreign format \(decoded.format.debugDescription)")
        }
        guard decoded.version == currentVersion else {
            throw TransferError(.invalidResumeData, "resume data version \(decoded.version) is not supported")
        }
        guard decoded.bytesOnDisk >= 0 else {
            throw TransferError(.invalidResumeData, "resume data claims a negative length")
        }
        do throws(TransferError) {
            _ = try decoded.validatedRequest()
        } catch {
            throw TransferError(.invalidResumeData, "resume data holds an invalid request: \(error.message)")
        }
        try decoded.checkPartialFile(in: temporaryFolder)
        return decoded
    }

    /// The partial file: inside `folder` once resolved (no `..`, no symlink
    /// in the way), a regular file of ours, at least `bytesOnDisk` long.
    private func checkPartialFile(in folder: String) throws(TransferError) {
        guard TemporaryFolder.contains(partialFile, folder: folder) else {
            throw TransferError(.invalidResumeData,
                                "the partial file \(partialFile.debugDescription) is not in the temporary folder \(folder)")
        }
        var st = stat()
        guard lstat(partialFile, &st) == 0 else {
            throw TransferError(.invalidResumeData, "the partial file \(partialFile) is missing")
        }
        guard st.st_mode & S_IFMT == S_IFREG, st.st_uid == geteuid(), st.st_nlink == 1 else {
            throw TransferError(.invalidResumeData, "the partial file \(partialFile) is not a plain file of ours")
        }
        guard Int64(st.st_size) >= bytesOnDisk else {
            throw TransferError(.invalidResumeData,
                                "the partial file \(partialFile) is shorter than the resume data says")
        }
    }

    /// The request to repeat, checked as a user's request is checked.
    func validatedRequest() throws(TransferError) -> Request {
        guard let url = URL(string: url) else {
            throw TransferError(.invalidRequest, "not a URL: \(url.debugDescription)")
        }
        var request = Request(url: url, method: HTTPMethod(method))
        for pair in headers {
            guard pair.count == 2 else {
                throw TransferError(.invalidRequest, "a header is not a name and a value")
            }
            request.headers.add(name: pair[0], value: pair[1])
        }
        try request.validate()
        if let etag { try HTTPHeaders.validate(name: "If-Range", value: etag) }
        if let lastModified { try HTTPHeaders.validate(name: "If-Range", value: lastModified) }
        return request
    }

    /// The request to repeat; ``decode(_:temporaryFolder:)`` validated it.
    var request: Request {
        var request = Request(url: URL(string: url)!, method: HTTPMethod(method))
        for pair in headers where pair.count == 2 { request.headers.add(name: pair[0], value: pair[1]) }
        return request
    }
}
