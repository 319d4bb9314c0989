import CTransfer
import FoundationEssentials
import Glibc

/// The journal's format belongs to the engine: these only convert between
/// ``ResumeJournal`` and `ct_journal_record`.
extension ResumeJournal {
    /// The journal at `path`, or nil when it is missing, torn (no `end`
    /// line), of another version or inconsistent (`ct_journal_read`).
    static func read(at path: String) -> ResumeJournal? {
        var record = ct_journal_record()
        guard ct_journal_read(path, &record) == 1 else { return nil }
        defer { ct_journal_clear(&record) }
        return ResumeJournal(record)
    }

    /// The journal in `data` (the bytes of a journal file), or nil as
    /// ``read(at:)`` says. Pure: touches no file (fuzzed by Tests/Fuzz).
    static func parse(_ data: Data) -> ResumeJournal? {
        var record = ct_journal_record()
        let valid = data.withUnsafeBytes { bytes in
            ct_journal_parse(bytes.baseAddress?.assumingMemoryBound(to: CChar.self), bytes.count, &record)
        }
        guard valid == 1 else { return nil }
        defer { ct_journal_clear(&record) }
        return ResumeJournal(record)
    }

    /// The journal as the engine writes it (`ct_journal_format`); nil when a
    /// value holds a newline.
    func formatted() -> String? {
        withRecord { record in
            var length = 0
            guard let text = ct_journal_format(&record, &length) else { return nil }
            defer { free(text) }
            return String(decoding: UnsafeRawBufferPointer(start: text, count: length), as: UTF8.self)
        }
    }

    /// Replaces the journal at `path` the engine's way (temporary file,
    /// fsync, rename); for a journal an earlier process would have left.
    /// Throws the errno as a POSIX error.
    func write(to path: String) throws {
        let error = withRecord { record in ct_journal_write(path, &record) }
        guard error == 0 else { throw POSIXError(POSIXErrorCode(rawValue: error) ?? .EIO) }
    }

    private init(_ record: ct_journal_record) {
        self.init(url: record.url.map { String(cString: $0) } ?? "",
                  etag: record.etag.map { String(cString: $0) },
                  lastModified: record.last_modified.map { String(cString: $0) },
                  rangeStart: record.range_start, rangeEnd: record.range_end, length: record.length,
                  durable: record.durable)
    }

    private func withRecord<Result>(_ body: (inout ct_journal_record) -> Result) -> Result {
        url.withCString { url in
            etag.withOptionalCString { etag in
                lastModified.withOptionalCString { lastModified in
                    var record = ct_journal_record(
                        url: UnsafeMutablePointer(mutating: url), etag: etag.map { UnsafeMutablePointer(mutating: $0) },
                        last_modified: lastModified.map { UnsafeMutablePointer(mutating: $0) },
                        range_start: rangeStart, range_end: rangeEnd, length: length, durable: durable)
                    return body(&record)
                }
            }
        }
    }
}
