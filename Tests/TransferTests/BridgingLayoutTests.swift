import CTransfer
import Foundation
import Testing

@testable import Transfer

/// The C boundary of the Swift layer: where CTransfer may be imported, and
/// the Swift request spec that is the one writer of `ct_transfer_spec`.
/// No engine, no sockets.
@Suite("Bridging layout and the Swift request spec")
struct BridgingLayoutTests {
    /// Sources/Transfer, found from this file (Tests/TransferTests/…).
    static let sources = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources/Transfer")

    @Test("only Bridging/ and Core/Engine.swift import CTransfer")
    func cTransferIsImportedOnlyWhereBridged() throws {
        // Given every Swift file of the Transfer target
        let enumerator = try #require(FileManager.default.enumerator(at: Self.sources, includingPropertiesForKeys: nil))
        var files: [String] = []
        for case let url as URL in enumerator where url.pathExtension == "swift" {
            files.append(String(url.path.dropFirst(Self.sources.path.count + 1)))
        }
        #expect(files.count > 50, "the walk found the target's files")

        // When the files that import CTransfer are listed
        var importing: [String] = []
        for file in files {
            let text = try String(contentsOf: Self.sources.appendingPathComponent(file), encoding: .utf8)
            let imports = text.split(separator: "\n").contains { line in
                line.trimmingCharacters(in: .whitespaces).hasSuffix("import CTransfer")
            }
            if imports { importing.append(file) }
        }

        // Then all of them are bridging pieces, or the engine itself
        #expect(importing.contains("Core/Engine.swift"))
        let outside = importing.filter { !$0.hasPrefix("Bridging/") && $0 != "Core/Engine.swift" }.sorted()
        #expect(outside == [], "CTransfer imported outside Bridging/: \(outside)")
    }

    @Test("a TransferSpec is laid out as a ct_transfer_spec, so a batch of them is handed to C as is")
    func transferSpecHasTheLayoutOfTheCStruct() {
        #expect(MemoryLayout<TransferSpec>.size == MemoryLayout<ct_transfer_spec>.size)
        #expect(MemoryLayout<TransferSpec>.stride == MemoryLayout<ct_transfer_spec>.stride)
        #expect(MemoryLayout<TransferSpec>.alignment == MemoryLayout<ct_transfer_spec>.alignment)
    }

    @Test("the Swift setters write the engine's fields and flags")
    func settersWriteTheCFields() {
        // Given a spec with the engine's defaults
        let strings = CStrings()
        defer { strings.free() }
        var spec = TransferSpec()
        #expect(spec.sink == .memory)

        // When a resumable segment to a part file is described in Swift terms
        spec.setFileSink(path: nil, partPath: "/tmp/x.part", strings: strings)
        spec.setRange(start: 10, end: 19)
        spec.resumeOffset = 4
        spec.setIfRange("\"etag\"", strings: strings)
        spec.flags.formUnion([.failOnRangeIgnored, .keepPartial])
        spec.setJournal(path: "/tmp/x.part.journal", intervalBytes: 7, intervalMilliseconds: 9, strings: strings)
        spec.setExpectedSHA256([UInt8](repeating: 0xAB, count: 32), strings: strings)
        spec.setCredential(Credential(user: "u", password: "p"), schemes: [.digest], strings: strings)
        spec.maxReceiveSpeed = 1000

        // Then the C struct says the same
        let raw = spec.raw
        #expect(spec.sink == .file)
        #expect(raw.sink_kind == CT_SINK_FILE)
        #expect(raw.sink_path == nil)
        #expect(raw.sink_part_path.map { String(cString: $0) } == "/tmp/x.part")
        #expect(raw.range_start == 10 && raw.range_end == 19 && raw.resume_offset == 4)
        #expect(raw.if_range.map { String(cString: $0) } == "\"etag\"")
        #expect(raw.flags & UInt32(CT_FLAG_FAIL_ON_RANGE_IGNORED) != 0)
        #expect(raw.flags & UInt32(CT_FLAG_KEEP_PARTIAL) != 0)
        #expect(raw.flags & UInt32(CT_FLAG_NO_PROGRESS) == 0)
        #expect(raw.journal_path.map { String(cString: $0) } == "/tmp/x.part.journal")
        #expect(raw.journal_interval_bytes == 7 && raw.journal_interval_ms == 9)
        #expect(raw.expected_sha256.map { Array(UnsafeBufferPointer(start: $0, count: 32)) }
            == [UInt8](repeating: 0xAB, count: 32))
        #expect(raw.user_password.map { String(cString: $0) } == "u:p")
        #expect(raw.auth_schemes == UInt32(CT_AUTH_DIGEST))
        #expect(raw.max_recv_speed == 1000)
    }

    @Test("each sink and body kind maps to the engine's")
    func sinkAndBodyKinds() {
        let strings = CStrings()
        defer { strings.free() }
        var spec = TransferSpec()
        for (sink, kind) in [(TransferSpec.Sink.discard, CT_SINK_DISCARD), (.stream, CT_SINK_STREAM),
                             (.file, CT_SINK_FILE), (.memory, CT_SINK_MEMORY)]
        {
            spec.sink = sink
            #expect(spec.raw.sink_kind == kind)
            #expect(spec.sink == sink)
        }

        let body = LentBody(copying: Data("hello".utf8))
        spec.setBody(body)
        #expect(spec.raw.body_kind == CT_BODY_MEMORY && spec.raw.body_length == 5)
        #expect(spec.raw.body_data.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: 5), as: UTF8.self) }
            == "hello")
        spec.setBody(file: "/tmp/body", offset: 3, length: -1, strings: strings)
        #expect(spec.raw.body_kind == CT_BODY_FILE && spec.raw.body_offset == 3 && spec.raw.body_length == -1)
        spec.setPulledBody(length: 42)
        #expect(spec.raw.body_kind == CT_BODY_PULL && spec.raw.body_length == 42)
    }
}
