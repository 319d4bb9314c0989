import Foundation
import Testing

@testable import Transfer

/// `String.equalsIgnoringCase(_:)` over contiguous bytes gives the answers of
/// the generic `StringProtocol` version, for ASCII and beyond.
@Suite("Case-insensitive compare")
struct CaseInsensitiveCompareTests {
    @Test("the String version answers as the generic one and as Foundation for ASCII")
    func sameAnswers() {
        let words = ["", "a", "A", "http", "HTTP", "Https", "https", "http ", "user-agent", "User-Agent",
                     "USER_AGENT", "[", "{", "@", "`", "é", "É", "ée", "ÉE", "ß", "SS", "ss", "straße", "STRASSE",
                     "İ", "i̇", "ΣA", "σa", "Content-Type", "content-typE", "x\u{0}", "X\u{0}"]
        for left in words {
            for right in words {
                let fast = left.equalsIgnoringCase(right)
                let generic = left[...].equalsIgnoringCase(right[...])
                #expect(fast == generic, "\(left.debugDescription) vs \(right.debugDescription)")
                if left.allSatisfy(\.isASCII) && right.allSatisfy(\.isASCII) {
                    #expect(fast == (left.caseInsensitiveCompare(right) == .orderedSame),
                            "\(left.debugDescription) vs \(right.debugDescription)")
                }
            }
        }
    }
}
