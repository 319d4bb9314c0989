// The resume journal a previous process left (format in ct_journal_format.c),
// read back by the engine's parser (ResumeJournal.parse calls
// ct_journal_parse). Property: a parsed journal, written again by the
// engine's formatter, parses to the same journal.
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
    // Written again by the engine's own formatter (values come from lines,
    // so none holds a newline and formatting cannot fail).
    guard let text = journal.formatted() else {
        require(false, "a parsed journal cannot be formatted: \(journal)")
        return 0
    }
    let again = ResumeJournal.parse(Data(text.utf8))
    require(again == journal, "journal does not round-trip: \(journal) -> \(String(describing: again))")
    return 0
}

@_cdecl("fuzz_journal_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    runFuzzer(argc, argv, fuzz)
}
