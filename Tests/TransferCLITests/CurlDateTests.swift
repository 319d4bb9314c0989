import Foundation
import Testing
@testable import TransferCLI

/// The command's `-z` dates (it runs without full Foundation, so without
/// `DateFormatter`).
@Suite("transfer command: -z dates")
struct CurlDateTests {
    @Test("-z dates: an IMF-fixdate is written, and curl's common forms are read in UTC")
    func dates() {
        let instant = Date(timeIntervalSince1970: 784_111_777)   // Sun, 06 Nov 1994 08:49:37 GMT
        #expect(CurlDate.httpDate(instant) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(CurlDate.httpDate(Date(timeIntervalSince1970: 0)) == "Thu, 01 Jan 1970 00:00:00 GMT")
        for text in ["Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
                     "1994-11-06T08:49:37Z", "1994-11-06T09:49:37+01:00", "1994-11-06T07:49:37-0100",
                     "1994-11-06T08:49:37", "1994-11-06 08:49:37", "06 Nov 1994 08:49:37"]
        {
            #expect(CurlDate.parse(text) == instant, "\(text)")
        }
        let midnight = Date(timeIntervalSince1970: 784_080_000)   // 1994-11-06 00:00:00 UTC
        for text in ["1994-11-06", "6 nov 1994", "19941106"] {
            #expect(CurlDate.parse(text) == midnight, "\(text)")
        }
        for text in ["1994-02-30", "garbage", "1994-11-06T08:49:37+25:00", "1994-11-06 08:49", "31 Feb 2001",
                     "2001-1-01", ""] {
            #expect(CurlDate.parse(text) == nil, "\(text)")
        }
    }
}
