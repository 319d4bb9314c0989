import CTransfer
import Foundation
import TestSupport
import Testing

/// The resume journal's one owner is the engine (ct_journal_format.c): these check
/// its reader against what its writer produces and against journals a crash,
/// another version or a hostile file could leave.
@Suite("ct_journal format")
struct JournalFormatTests {
    static let valid = """
        transfer-journal 1
        url http://127.0.0.1:8080/file.bin
        etag "abc"
        last-modified Wed, 21 Oct 2015 07:28:00 GMT
        range -1 -1
        length 1048576
        durable 524288
        end

        """

    /// Parses `text` (its UTF-8 bytes); the record's strings are copied out.
    private func parse(_ bytes: [UInt8]) -> (rc: Int32, url: String?, etag: String?, lastModified: String?,
                                              range: (Int64, Int64), length: Int64, durable: Int64)
    {
        var record = ct_journal_record()
        let rc = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { ct_journal_parse($0.baseAddress, $0.count, &record) }
        }
        defer { ct_journal_clear(&record) }
        return (rc, record.url.map { String(cString: $0) }, record.etag.map { String(cString: $0) },
                record.last_modified.map { String(cString: $0) }, (record.range_start, record.range_end),
                record.length, record.durable)
    }

    private func parse(_ text: String) -> Int32 { parse(Array(text.utf8)).rc }

    @Test("a journal as the engine writes it parses to its fields")
    func parsesAValidJournal() {
        let parsed = parse(Array(Self.valid.utf8))
        #expect(parsed.rc == 1)
        #expect(parsed.url == "http://127.0.0.1:8080/file.bin")
        #expect(parsed.etag == "\"abc\"")
        #expect(parsed.lastModified == "Wed, 21 Oct 2015 07:28:00 GMT")
        #expect(parsed.range == (-1, -1))
        #expect(parsed.length == 1_048_576)
        #expect(parsed.durable == 524_288)
    }

    @Test("empty validators mean none; a segment's offset inside its range is accepted")
    func emptyValidatorsAndSegments() {
        let text = "transfer-journal 1\nurl http://h/x\netag \nlast-modified \nrange 100 199\nlength -1\ndurable 200\nend\n"
        let parsed = parse(Array(text.utf8))
        #expect(parsed.rc == 1)
        #expect(parsed.etag == nil && parsed.lastModified == nil)
        #expect(parsed.range == (100, 199) && parsed.durable == 200)
    }

    @Test(
        "journals that are not whole or not consistent are refused",
        arguments: [
            ("torn: no end line", Self.valid.replacingOccurrences(of: "end\n", with: "")),
            ("another version", Self.valid.replacingOccurrences(of: "transfer-journal 1", with: "transfer-journal 2")),
            ("no url", Self.valid.replacingOccurrences(of: "url http://127.0.0.1:8080/file.bin\n", with: "")),
            ("no durable", Self.valid.replacingOccurrences(of: "durable 524288\n", with: "")),
            ("no range", Self.valid.replacingOccurrences(of: "range -1 -1\n", with: "")),
            ("negative durable", Self.valid.replacingOccurrences(of: "durable 524288", with: "durable -5")),
            ("durable not a number", Self.valid.replacingOccurrences(of: "durable 524288", with: "durable 52x")),
            ("durable with a sign", Self.valid.replacingOccurrences(of: "durable 524288", with: "durable +5")),
            ("durable overflowing int64", Self.valid.replacingOccurrences(of: "durable 524288",
                                                                           with: "durable 9223372036854775808")),
            ("range with one bound", Self.valid.replacingOccurrences(of: "range -1 -1", with: "range 5")),
            ("range with three bounds", Self.valid.replacingOccurrences(of: "range -1 -1", with: "range 1 2 3")),
            ("durable before its segment", "transfer-journal 1\nurl u\nrange 100 199\ndurable 50\nend\n"),
            ("durable past its segment", "transfer-journal 1\nurl u\nrange 100 199\ndurable 201\nend\n"),
            ("an end without a start", "transfer-journal 1\nurl u\nrange -1 10\ndurable 0\nend\n"),
            ("empty", ""),
        ])
    func refusesBrokenJournals(_ what: String, _ text: String) {
        #expect(parse(text) == 0, "\(what)")
    }

    @Test("a NUL byte, or more than 64 KiB, is refused before any field is read")
    func refusesNulAndHugeInput() {
        var withNul = Array(Self.valid.utf8)
        withNul.insert(0, at: 30)
        #expect(parse(withNul).rc == 0)
        let padding = String(repeating: "x", count: Int(CT_JOURNAL_MAX_BYTES))
        #expect(parse(Self.valid.replacingOccurrences(of: "end\n", with: "pad \(padding)\nend\n")) == 0)
    }

    @Test("format then parse gives the same record; a value holding a newline cannot be formatted")
    func formatRoundTrips() throws {
        var record = ct_journal_record()
        #expect(ct_journal_parse(Self.valid, Self.valid.utf8.count, &record) == 1)
        defer { ct_journal_clear(&record) }
        var length = 0
        let text = try #require(ct_journal_format(&record, &length))
        defer { free(text) }
        #expect(String(cString: text) == Self.valid)
        #expect(length == Self.valid.utf8.count)

        let bad = strdup("http://h/\nInjected: 1")
        defer { free(bad) }
        var injected = record
        injected.url = bad
        #expect(ct_journal_format(&injected, nil) == nil)
    }

    @Test("write lays the journal down whole and read gives it back; a symlink or a FIFO is not read")
    func writeAndRead() throws {
        let folder = try TemporaryDirectory()
        let path = folder.file("a.journal").path
        var record = ct_journal_record()
        #expect(ct_journal_parse(Self.valid, Self.valid.utf8.count, &record) == 1)
        defer { ct_journal_clear(&record) }
        #expect(ct_journal_write(path, &record) == 0)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == Self.valid)
        #expect(!FileManager.default.fileExists(atPath: path + ".tmp"))

        var back = ct_journal_record()
        #expect(ct_journal_read(path, &back) == 1)
        #expect(back.durable == 524_288 && back.url.map { String(cString: $0) } == "http://127.0.0.1:8080/file.bin")
        ct_journal_clear(&back)

        let link = folder.file("link.journal").path
        #expect(symlink(path, link) == 0)
        #expect(ct_journal_read(link, &back) == 0)
        let fifo = folder.file("fifo.journal").path
        #expect(mkfifo(fifo, 0o600) == 0)
        #expect(ct_journal_read(fifo, &back) == 0)
        #expect(ct_journal_read(folder.file("missing.journal").path, &back) == 0)
        #expect(back.url == nil)
    }
}
