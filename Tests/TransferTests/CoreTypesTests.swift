import Foundation
import TestSupport
import Testing
@testable import Transfer

@Suite("Core types")
struct CoreTypesTests {
    @Test("raw header blocks parse into ordered, case-insensitive fields")
    func headerParsing() {
        let headers = HTTPHeaders(rawHeaderBlock: "Content-Type: text/plain; charset=UTF-8\r\nX-A:  1 \r\nx-a: 2\r\nbroken line\r\n: novalue\r\nEmpty:\r\n")

        #expect(headers["content-type"] == "text/plain; charset=UTF-8")
        #expect(headers.values(for: "X-A") == ["1", "2"])
        #expect(headers["Empty"] == "")
        #expect(headers.count == 4)
    }

    @Test("header names must be tokens and values free of CR, LF and NUL")
    func headerValidation() {
        #expect(throws: TransferError.self) { try HTTPHeaders.validate(name: "X Bad", value: "v") }
        #expect(throws: TransferError.self) { try HTTPHeaders.validate(name: "", value: "v") }
        #expect(throws: TransferError.self) { try HTTPHeaders.validate(name: "X", value: "a\r\nB: c") }
        #expect(throws: TransferError.self) { try HTTPHeaders.validate(name: "X", value: "a\u{0}b") }
        #expect(throws: Never.self) { try HTTPHeaders.validate(name: "X-Good_1.2~", value: "any value; q=0.5") }
        // RFC 9110's tchar, byte by byte: letters, digits and 15 symbols.
        let symbols = Array("!#$%&'*+-.^_`|~".utf8)
        for byte in UInt8(0)...UInt8(0x7F) {
            let isToken = (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                || symbols.contains(byte)
            let name = "X" + String(UnicodeScalar(byte))
            var accepted = true
            do { try HTTPHeaders.validate(name: name, value: "v") } catch { accepted = false }
            #expect(accepted == isToken, "byte \(byte)")
        }
        #expect(throws: TransferError.self) { try HTTPHeaders.validate(name: "X-é", value: "v") }
    }

    @Test("setting a header replaces every field of that name; nil removes it")
    func headerReplacement() {
        var headers: HTTPHeaders = ["Accept": "a", "X": "1"]
        headers.add(name: "accept", value: "b")

        headers["ACCEPT"] = "c"
        #expect(headers.values(for: "accept") == ["c"])
        headers["x"] = nil
        #expect(!headers.contains("X"))
    }

    @Test("requests accept only absolute http(s) URLs")
    func requestValidation() throws {
        #expect(throws: TransferError.self) { try Request("relative/path") }
        #expect(throws: TransferError.self) { try Request("file:///etc/passwd") }
        #expect(throws: TransferError.self) { try Request("http://") }
        let request = try Request("https://example.com/a?b=c", method: "post")
        #expect(request.method == .post)
        #expect(request.url.query == "b=c")
    }

    @Test("response media type and charset come from Content-Type")
    func responseContentType() {
        let response = HTTPResponse(url: URL(string: "http://h/")!, statusCode: 200,
                                    headers: ["Content-Type": "Application/JSON; Charset=\"UTF-8\"", "Content-Length": "12"])
        #expect(response.mimeType == "application/json")
        #expect(response.textEncodingName == "utf-8")
        #expect(response.expectedContentLength == 12)
    }

    @Test("progress fractions, rates and estimates")
    func progressMath() {
        let unknown = TransferProgress(completedUnitCount: 10, totalUnitCount: -1)
        #expect(unknown.fractionCompleted == nil)
        #expect(unknown.estimatedTimeRemaining == nil)
        let half = TransferProgress(completedUnitCount: 50, totalUnitCount: 100, elapsed: 2)
        #expect(half.fractionCompleted == 0.5)
        #expect(half.bytesPerSecond == 25)
        #expect(half.estimatedTimeRemaining == 2)
        let resumed = TransferProgress(completedUnitCount: 150, totalUnitCount: 200, elapsed: 1, resumeOffset: 100)
        #expect(resumed.bytesPerSecond == 50)
        #expect(TransferProgress(completedUnitCount: 5, totalUnitCount: 5).isFinished)
    }

    @Test("resume data that is corrupt, foreign, of another version or without its file is refused")
    func resumeDataValidation() throws {
        let directory = try TemporaryDirectory()  // mkdtemp: 0700, ours, as the session's folder
        let partial = directory.file("partial.part")
        try Data(repeating: 7, count: 100).write(to: partial)
        func document(_ fields: [String: Any]) throws -> Data {
            var base: [String: Any] = ["format": "transfer.resume", "version": 1, "url": "http://h/f", "method": "GET",
                                       "headers": [[String]](), "bytesOnDisk": 60, "partialFile": partial.path]
            base.merge(fields) { $1 }
            return try JSONSerialization.data(withJSONObject: base)
        }

        for bad in [Data("not json".utf8), try document(["format": "other"]), try document(["version": 9]),
                    try document(["url": "ftp://h/f"]), try document(["partialFile": "/nonexistent"]),
                    try document(["bytesOnDisk": 1000])]
        {
            #expect(throws: TransferError.self) { try ResumeData.decode(bad, temporaryFolder: directory.path) }
            do {
                _ = try ResumeData.decode(bad, temporaryFolder: directory.path)
            } catch {
                #expect(error.code == .invalidResumeData)
            }
        }
        let good = try ResumeData.decode(try document([:]), temporaryFolder: directory.path)
        #expect(good.bytesOnDisk == 60)
        // Outside the session's folder the same document is refused.
        #expect(throws: TransferError.self) { try ResumeData.decode(try document([:])) }
        // Decoding touches nothing: the engine drops the unconfirmed bytes
        // when the task runs.
        #expect((try FileManager.default.attributesOfItem(atPath: partial.path)[.size] as? NSNumber)?.intValue == 100)
    }

    @Test("Protected serialises concurrent updates")
    func protectedCounter() async {
        let counter = Protected(0)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask { for _ in 0..<10_000 { counter.withLock { $0 += 1 } } }
            }
        }
        #expect(counter.withLock { $0 } == 80_000)
    }
}
