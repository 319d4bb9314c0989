import Foundation

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
        guard let path = outcome.filePath, outcome.bytesOnDisk > 0 else { return nil }
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

    func encoded() -> Data? {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return try? encoder.encode(self)
    }

    /// Parses and checks resume data: the format, the version, and that the
    /// partial file still holds at least the bytes it claims.
    static func decode(_ data: Data) throws(TransferError) -> ResumeData {
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
        guard let url = URL(string: decoded.url), let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https", decoded.bytesOnDisk >= 0
        else {
            throw TransferError(.invalidResumeData, "resume data names no http(s) URL")
        }
        let attributes = try? FileManager.default.attributesOfItem(atPath: decoded.partialFile)
        let size = (attributes?[.size] as? NSNumber)?.int64Value ?? -1
        guard size >= decoded.bytesOnDisk else {
            throw TransferError(.invalidResumeData,
                                "the partial file \(decoded.partialFile) is missing or shorter than the resume data says")
        }
        if size > decoded.bytesOnDisk {
            // Bytes past the claimed length were never confirmed: drop them.
            if truncate(decoded.partialFile, off_t(decoded.bytesOnDisk)) != 0 {
                throw TransferError(.invalidResumeData, "cannot trim the partial file \(decoded.partialFile)")
            }
        }
        return decoded
    }

    var request: Request {
        var request = Request(url: URL(string: url)!, method: HTTPMethod(method))
        for pair in headers where pair.count == 2 { request.headers.add(name: pair[0], value: pair[1]) }
        return request
    }
}
