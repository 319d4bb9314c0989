import Foundation
import Testing
import TransferFoundation

@testable import Transfer

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Multipart streaming of large files", .serialized)
struct SerializationMultipartStreamingTests {
    /// Resident memory of this process, from /proc/self/statm.
    private func residentBytes() throws -> Int {
        let statm = try String(contentsOfFile: "/proc/self/statm", encoding: .utf8)
        let fields = statm.split(separator: " ")
        let pages = try #require(fields.count > 1 ? Int(fields[1]) : nil)
        return pages * sysconf(Int32(_SC_PAGESIZE))
    }

    @Test(
        "a 2 GiB file (256 MiB under sanitizers) streams through a multipart body in flat memory, length exact",
        .enabled(if: FileManager.default.fileExists(atPath: "/proc/self/statm")))
    func twoGiBStreamsWithFlatMemory() throws {
        let scratch = try SerializationScratch()
        // scripts/test.sh sets TRANSFER_TEST_SANITIZER for the TSan/ASan runs, where 2 GiB is too slow.
        let underSanitizer = ProcessInfo.processInfo.environment["TRANSFER_TEST_SANITIZER"] != nil
        let fileSize: Int64 = underSanitizer ? 256 << 20 : 2 << 30
        let file = try scratch.file("huge.bin")
        // A sparse file: no disk space, reads return zeros.
        #expect(FileManager.default.createFile(atPath: file.path, contents: nil))
        let handle = try FileHandle(forWritingTo: file)
        try handle.truncate(atOffset: UInt64(fileSize))
        try handle.close()
        let request = try HTTPRequestSerializer().multipartFormRequest(
            urlString: "http://h/upload", parameters: ["name": "huge"]
        ) { form in
            try form.append(fileURL: file, name: "file")
            form.append(formField: "after", name: "tail")
        }
        let boundary = try MultipartTestSupport.boundary(of: request)
        guard case .stream(let provider, let announced)? = request.body, let stream = provider.makeStream() else {
            Issue.record("expected a streamed body")
            return
        }
        let expectedHead = Data(
            """
            --\(boundary)\r
            Content-Disposition: form-data; name="name"\r
            \r
            huge\r
            --\(boundary)\r
            Content-Disposition: form-data; name="file"; filename="huge.bin"\r
            Content-Type: application/octet-stream\r
            \r

            """.utf8)
        let expectedTail = Data(
            """
            \r
            --\(boundary)\r
            Content-Disposition: form-data; name="tail"\r
            \r
            after\r
            --\(boundary)--\r

            """.utf8)
        let chunk = 1 << 20
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: chunk)
        defer { buffer.deallocate() }
        let zeros = UnsafeMutablePointer<UInt8>.allocate(capacity: chunk)
        zeros.initialize(repeating: 0, count: chunk)
        defer { zeros.deallocate() }
        let before = try residentBytes()
        var peak = before
        var total: Int64 = 0
        var head = Data()
        var tail = Data()
        var nonZeroInFile = false

        stream.open()
        while true {
            let count = stream.read(buffer, maxLength: chunk)
            try #require(count >= 0, "stream failed: \(String(describing: stream.streamError))")
            if count == 0 { break }
            let bytes = UnsafeBufferPointer(start: buffer, count: count)
            if head.count < expectedHead.count {
                head.append(contentsOf: bytes.prefix(expectedHead.count - head.count))
            }
            if count >= expectedTail.count {
                tail = Data(bytes.suffix(expectedTail.count))
            } else {
                tail.append(contentsOf: bytes)
                tail = Data(tail.suffix(expectedTail.count))
            }
            // The file region lies between head and tail: it must be all zeros.
            let fileStart = Int64(expectedHead.count)
            let fileEnd = fileStart + fileSize
            if total + Int64(count) > fileStart && total < fileEnd {
                let from = Int(max(0, fileStart - total))
                let to = Int(min(Int64(count), fileEnd - total))
                // memcmp, not a Swift loop: the test runs unoptimised.
                if from < to, memcmp(buffer + from, zeros, to - from) != 0 { nonZeroInFile = true }
            }
            total += Int64(count)
            if total % (256 << 20) < Int64(count) { peak = max(peak, try residentBytes()) }
        }
        stream.close()
        peak = max(peak, try residentBytes())

        #expect(total == announced)
        #expect(request.headers["Content-Length"] == String(total))
        #expect(total == Int64(expectedHead.count) + fileSize + Int64(expectedTail.count))
        #expect(head == expectedHead)
        #expect(tail == expectedTail)
        #expect(!nonZeroInFile)
        #expect(peak - before < 64 << 20, "resident memory grew by \(peak - before) bytes")
    }
}
