import FoundationEssentials
import Glibc

/// What the engine's resume journal says, read back by a later task or
/// process. The engine owns the format (`ct_journal_format.c`): it writes the
/// journal and parses it (`read(at:)`, `parse(_:)` and `write(to:)` in
/// Bridging/ResumeJournal+Engine.swift); nothing here knows its syntax.
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

    /// Size of the file at `path`, or -1.
    static func fileSize(_ path: String) -> Int64 {
        var info = stat()
        return stat(path, &info) == 0 ? Int64(info.st_size) : -1
    }
}
