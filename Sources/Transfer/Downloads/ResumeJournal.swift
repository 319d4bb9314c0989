import Foundation

/// The engine's resume journal (written by `ct_journal.c`, format in its
/// header comment), read back by a later task or process.
///
/// A journal only claims bytes that were on disk before it was written, so
/// resuming means: truncate the part file to ``durable`` and ask for the
/// rest with `Range` and `If-Range`.
struct ResumeJournal: Sendable, Hashable {
    var url: String
    var etag: String?
    var lastModified: String?
    /// Segment bounds, -1 when the journal covers the whole body.
    var rangeStart: Int64
    var rangeEnd: Int64
    /// The body length when known, else -1.
    var length: Int64
    /// File offset up to which the part file holds confirmed bytes.
    var durable: Int64

    /// The If-Range validator: a strong ETag, else Last-Modified.
    var validator: String? {
        if let etag, !etag.hasPrefix("W/") { return etag }
        return lastModified
    }

    /// The journal at `path`, or nil when it is missing, torn (no `end`
    /// line), of another version or inconsistent.
    static func read(at path: String) -> ResumeJournal? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return parse(data)
    }

    /// The journal in `data` (the bytes of a journal file), or nil as
    /// ``read(at:)`` says. Pure: touches no file (fuzzed by Tests/Fuzz).
    static func parse(_ data: Data) -> ResumeJournal? {
        guard data.count < 64 * 1024 else { return nil }
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        guard lines.first == "transfer-journal 1", lines.contains("end") else { return nil }
        var fields: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let space = line.firstIndex(of: " ") else { continue }
            fields[String(line[..<space])] = String(line[line.index(after: space)...])
        }
        guard let url = fields["url"], let durable = fields["durable"].flatMap({ Int64($0) }), durable >= 0,
            let rangeText = fields["range"]
        else { return nil }
        let range = rangeText.split(separator: " ").compactMap { Int64($0) }
        guard range.count == 2 else { return nil }
        let etag = fields["etag"].flatMap { $0.isEmpty ? nil : $0 }
        let lastModified = fields["last-modified"].flatMap { $0.isEmpty ? nil : $0 }
        let journal = ResumeJournal(url: url, etag: etag, lastModified: lastModified, rangeStart: range[0],
                                    rangeEnd: range[1], length: fields["length"].flatMap { Int64($0) } ?? -1,
                                    durable: durable)
        if journal.rangeStart >= 0 {
            guard journal.durable >= journal.rangeStart, journal.rangeEnd < 0 || journal.durable <= journal.rangeEnd + 1
            else { return nil }
        }
        return journal
    }

    /// Size of the file at `path`, or -1.
    static func fileSize(_ path: String) -> Int64 {
        var info = stat()
        return stat(path, &info) == 0 ? Int64(info.st_size) : -1
    }
}
