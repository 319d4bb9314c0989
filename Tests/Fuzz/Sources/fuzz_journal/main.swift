// The resume journal a previous process left (format in ct_journal.c),
// read back by ResumeJournal.parse. Property: a parsed journal, written
// again in the engine's format, parses to the same journal.
import FuzzSupport
import Foundation
@testable import Transfer

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard let journal = ResumeJournal.parse(bytes(data, size)) else { return 0 }
    require(journal.durable >= 0, "negative durable offset \(journal.durable)")
    if journal.rangeStart >= 0 {
        require(journal.durable >= journal.rangeStart, "durable before the segment start")
    }
    _ = journal.validator
    let text = """
        transfer-journal 1
        url \(journal.url)
        etag \(journal.etag ?? "")
        last-modified \(journal.lastModified ?? "")
        range \(journal.rangeStart) \(journal.rangeEnd)
        length \(journal.length)
        durable \(journal.durable)
        end

        """
    let again = ResumeJournal.parse(Data(text.utf8))
    require(again == journal, "journal does not round-trip: \(journal) -> \(String(describing: again))")
    return 0
}

@_cdecl("fuzz_journal_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    runFuzzer(argc, argv, fuzz)
}
