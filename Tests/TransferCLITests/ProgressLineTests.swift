import Foundation
import Testing
@testable import TransferCLI

@Suite("transfer command: progress lines")
struct ProgressLineTests {
    @Test("a final line loses its trailing white space exactly as the regular expression \\s+$ removed it")
    func trailingWhitespace() {
        let lines = [
            "", " ", "bar", "file.bin   [=====>    ]  50%   ", "tabs\t\t", "nbsp\u{A0}\u{3000}\u{2009}",
            "ends in newline  \n", "inner  space kept", "  leading kept", "é 日本 🐈 \u{85}\u{2028}",
            "no-break-but-not-space\u{200B}", "100%|████████| 1.0 MiB",
        ]
        for line in lines {
            let reference = line.replacingOccurrences(of: "\\s+$", with: "", options: .regularExpression)
            #expect(ProgressDisplay.trimmingTrailingWhitespace(line) == reference, "\(line.debugDescription)")
        }
    }
}
