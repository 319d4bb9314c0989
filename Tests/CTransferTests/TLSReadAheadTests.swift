import CTransfer
import Foundation
import TestSupport
import Testing

/// Issue 14 item 4: a bulk HTTPS body is read in 64 KiB blocks (OpenSSL read-ahead) instead of
/// one 16 KiB record per two recv() calls. Whole records then wait in OpenSSL's buffer where epoll
/// cannot see them, and libcurl 7.88 stops reading when the socket is empty: the loop drives such
/// connections again (`ct_loop_tls_redrives`). A record left behind would stall the transfer
/// until the wait below gives up; a record delivered twice or lost would change the digest.
@Suite("TLS read-ahead", .serialized, .enabled(if: NginxFixture.isInstalled))
struct TLSReadAheadTests {
    private var bulkSize: Int {
        ProcessInfo.processInfo.environment["TRANSFER_TEST_SANITIZER"] == nil ? 64 << 20 : 16 << 20
    }

    private func submitFile(_ harness: PhaseHarness, _ url: URL, to path: String, caFile: String) throws -> UInt64 {
        try harness.submit(url.absoluteString) { spec, strings in
            spec.sink_kind = CT_SINK_FILE
            spec.sink_path = strings.dup(path)
            spec.ca_file = strings.dup(caFile)
        }
    }

    /// Starts the HTTPS download of a bulk file (made from `seed`) to `name` in `folder`.
    private func startBulkDownload(_ harness: PhaseHarness, seed: UInt64, into folder: TemporaryDirectory,
                                   name: String) throws -> (id: UInt64, file: String, digest: String)
    {
        let nginx = try NginxFixture.shared()
        let (path, digest) = try nginx.ensureFile(size: bulkSize, seed: seed)
        let file = folder.file(name).path
        let id = try submitFile(harness, nginx.url(.https, path), to: file, caFile: nginx.caFile)
        return (id, file, digest)
    }

    /// Downloads a 4 MiB HTTPS body to a file: its connection reads ahead,
    /// and waits in the pool afterwards.
    private func poolReadAheadConnection(_ harness: PhaseHarness, seed: UInt64) throws {
        let nginx = try NginxFixture.shared()
        let (path, _) = try nginx.ensureFile(size: 4 << 20, seed: seed)
        let folder = try TemporaryDirectory()
        let id = try submitFile(harness, nginx.url(.https, path), to: folder.file("bulk.bin").path, caFile: nginx.caFile)
        let outcome = try harness.waitForFinish(id, timeout: .seconds(60))
        #expect(outcome.code == CT_OK, "\(outcome.message)")
    }

    @Test("a bulk HTTPS body read ahead reaches disk byte for byte, and the loop drove what OpenSSL held")
    func bulkBodyIsExact() throws {
        let folder = try TemporaryDirectory()
        let harness = try PhaseHarness()
        defer { harness.destroy() }

        let (id, file, digest) = try startBulkDownload(harness, seed: 14, into: folder, name: "bulk.bin")
        let outcome = try harness.waitForFinish(id, timeout: .seconds(60))

        #expect(outcome.code == CT_OK, "\(outcome.message)")
        #expect(try FileDigest.sha256(of: URL(fileURLWithPath: file)) == digest)
        #expect(ct_loop_tls_redrives(harness.loop) > 0)
    }

    private func submitDiscard(_ harness: PhaseHarness, _ url: URL, caFile: String) throws -> UInt64 {
        try harness.submit(url.absoluteString) { spec, strings in
            spec.sink_kind = CT_SINK_DISCARD
            spec.ca_file = strings.dup(caFile)
        }
    }

    @Test("bulk bodies multiplexed on one read-ahead HTTP/2 connection, to files and dropped, arrive byte for byte")
    func http2StreamsShareOneReadAheadConnection() throws {
        let nginx = try NginxFixture.shared()
        let size = bulkSize / 4
        let (openerPath, _) = try nginx.ensureFile(size: 64 << 10, seed: 23)
        let files = try [18, 19, 24].map { try nginx.ensureFile(size: size, seed: UInt64($0)) }
        let (droppedPath, _) = try nginx.ensureFile(size: size, seed: 25)
        let folder = try TemporaryDirectory()
        let harness = try PhaseHarness()
        defer { harness.destroy() }

        // Given a small dropped body that opens the h2 connection (and ends
        // first, while the connection still holds records for the others:
        // the re-drive used to follow transfers, and the streams that joined
        // later were never looked at), then bulk bodies on the same
        // connection, three to files and one dropped
        let opener = try submitDiscard(harness, nginx.url(.http2, openerPath), caFile: nginx.caFile)
        var toFiles: [(id: UInt64, file: String, digest: String)] = []
        for (index, (path, digest)) in files.enumerated() {
            let file = folder.file("h2-\(index).bin").path
            toFiles.append((try submitFile(harness, nginx.url(.http2, path), to: file, caFile: nginx.caFile), file, digest))
        }
        let dropped = try submitDiscard(harness, nginx.url(.http2, droppedPath), caFile: nginx.caFile)

        // When all have finished
        let openerOutcome = try harness.waitForFinish(opener, timeout: .seconds(60))
        let fileOutcomes = try toFiles.map { try harness.waitForFinish($0.id, timeout: .seconds(60)) }
        let droppedOutcome = try harness.waitForFinish(dropped, timeout: .seconds(60))

        // Then every body is whole: no record was lost to another stream or
        // left in OpenSSL's buffer
        let all = [openerOutcome, droppedOutcome] + fileOutcomes
        for outcome in all {
            #expect(outcome.code == CT_OK, "\(outcome.message)")
            #expect(outcome.httpVersion == 20)
        }
        #expect(openerOutcome.bodyBytesReceived == 64 << 10)
        #expect(droppedOutcome.bodyBytesReceived == Int64(size))
        for (entry, outcome) in zip(toFiles, fileOutcomes) {
            #expect(outcome.bytesOnDisk == Int64(size))
            #expect(try FileDigest.sha256(of: URL(fileURLWithPath: entry.file)) == entry.digest)
        }
        // And they shared one connection (one local port), which read ahead:
        // the loop drove what OpenSSL held for its streams
        #expect(Set(all.map(\.localPort)).count == 1, "\(all.map(\.localPort))")
        #expect(ct_loop_tls_redrives(harness.loop) > 0)
    }

    @Test("a suspended stream on a read-ahead HTTP/2 connection does not hold the others, and loses no record")
    func suspendedHTTP2StreamDoesNotHoldTheOthers() throws {
        let nginx = try NginxFixture.shared()
        let size = bulkSize / 4
        let (pausedPath, pausedDigest) = try nginx.ensureFile(size: size, seed: 26)
        let (otherPath, otherDigest) = try nginx.ensureFile(size: size, seed: 27)
        let (droppedPath, _) = try nginx.ensureFile(size: size, seed: 28)
        let folder = try TemporaryDirectory()
        let harness = try PhaseHarness()
        defer { harness.destroy() }
        let pausedFile = folder.file("h2-paused.bin").path
        let otherFile = folder.file("h2-other.bin").path

        // Given three bulk bodies on one HTTP/2 connection that reads ahead,
        // and the first suspended once it receives (served at 2 MiB/s, so it
        // is still running when the pause comes, however slow this thread is)
        let slowPaused = try #require(URL(string: nginx.url(.http2, "/slow" + pausedPath).absoluteString
            + "?rate=2097152"))
        let paused = try submitFile(harness, slowPaused, to: pausedFile, caFile: nginx.caFile)
        let other = try submitFile(harness, nginx.url(.http2, otherPath), to: otherFile, caFile: nginx.caFile)
        let dropped = try submitDiscard(harness, nginx.url(.http2, droppedPath), caFile: nginx.caFile)
        try harness.waitForPhase(paused, CT_PHASE_RECEIVING)
        #expect(ct_loop_pause(harness.loop, paused) == CT_OK)
        try harness.waitForEvent(paused, "the user pause") { $0.why == "suspended" }

        // When the other two finish while it stays suspended
        let otherOutcome = try harness.waitForFinish(other, timeout: .seconds(60))
        let droppedOutcome = try harness.waitForFinish(dropped, timeout: .seconds(60))

        // Then they are whole (records for them were not left behind the
        // suspended stream's), and the suspended one, resumed, is whole too
        #expect(otherOutcome.code == CT_OK, "\(otherOutcome.message)")
        #expect(droppedOutcome.code == CT_OK, "\(droppedOutcome.message)")
        #expect(try FileDigest.sha256(of: URL(fileURLWithPath: otherFile)) == otherDigest)
        #expect(droppedOutcome.bodyBytesReceived == Int64(size))
        #expect(ct_loop_resume(harness.loop, paused) == CT_OK)
        let pausedOutcome = try harness.waitForFinish(paused, timeout: .seconds(60))
        #expect(pausedOutcome.code == CT_OK, "\(pausedOutcome.message)")
        #expect(try FileDigest.sha256(of: URL(fileURLWithPath: pausedFile)) == pausedDigest)
        #expect(Set([pausedOutcome, otherOutcome, droppedOutcome].map(\.localPort)).count == 1)
    }

    @Test("a connection that reads ahead lets go of its transfer's trust verdict when its handshake ends")
    func readAheadConnectionReleasesTheVerdict() throws {
        let nginx = try NginxFixture.shared()
        let (path, digest) = try nginx.ensureFile(size: 4 << 20, seed: 22)
        let folder = try TemporaryDirectory()
        let harness = try PhaseHarness()
        defer { harness.destroy() }

        // Given bulk HTTPS downloads whose new connections read ahead, over
        // HTTP/1.1 and over h2
        for (index, listener) in [NginxFixture.Listener.https, .http2].enumerated() {
            let file = folder.file("verdict-\(index).bin").path
            let id = try submitFile(harness, nginx.url(listener, path), to: file, caFile: nginx.caFile)

            // When each has finished and the loop retired it
            let outcome = try harness.waitForFinish(id, timeout: .seconds(60))
            try harness.waitForPhase(id, CT_PHASE_DONE)

            // Then the body is whole, and no connection still pointed into the
            // freed transfer: the read-ahead hook's info callback passed the
            // handshake's end on to the trust hook's, which lets go of the
            // verdict (the hook used to replace it, and the pointer stayed)
            #expect(outcome.code == CT_OK, "\(outcome.message)")
            #expect(try FileDigest.sha256(of: URL(fileURLWithPath: file)) == digest)
            #expect(ct_loop_tls_verdicts_released(harness.loop) == 0, "\(listener)")
        }
        #expect(ct_loop_tls_redrive_checks(harness.loop) > 0, "a connection read ahead")
    }

    @Test("a small body on a connection that read ahead for a bulk one arrives whole")
    func smallBodyOnReadAheadConnection() throws {
        let nginx = try NginxFixture.shared()
        let (smallPath, smallDigest) = try nginx.ensureFile(size: 300 << 10, seed: 16)
        let harness = try PhaseHarness()
        defer { harness.destroy() }

        // Given a connection opened (and reading ahead) for a bulk body
        try poolReadAheadConnection(harness, seed: 15)

        // When a request that keeps its body in memory (not a bulk one) reuses it
        let small = try harness.submit(nginx.url(.https, smallPath).absoluteString) { spec, strings in
            spec.ca_file = strings.dup(nginx.caFile)
        }
        let outcome = try harness.waitForFinish(small)

        // Then its 300 KiB (about 19 records, read 64 KiB at a time) all arrive
        #expect(outcome.code == CT_OK, "\(outcome.message)")
        #expect(outcome.reusedConnection)
        #expect(FileDigest.sha256(outcome.body) == smallDigest)
    }

    @Test("requests on connections that do not read ahead are never looked at by the re-drive")
    func redriveLooksOnlyAtReadAheadTransfers() throws {
        let nginx = try NginxFixture.shared()
        let (smallPath, smallDigest) = try nginx.ensureFile(size: 8 << 10, seed: 21)
        let harness = try PhaseHarness()
        defer { harness.destroy() }

        // Given a bulk HTTPS download whose connection read ahead (and now
        // waits in the pool: the loop has a read-ahead connection)
        try poolReadAheadConnection(harness, seed: 20)
        let afterBulk = ct_loop_tls_redrive_checks(harness.loop)
        #expect(afterBulk > 0, "the bulk transfer was looked at")

        // When small plain-HTTP requests run on the same loop
        for _ in 0..<20 {
            let id = try harness.submit(nginx.url(.http, smallPath).absoluteString) { _, _ in }
            let small = try harness.waitForFinish(id)
            #expect(small.code == CT_OK, "\(small.message)")
            #expect(FileDigest.sha256(small.body) == smallDigest)
        }

        // Then the re-drive looked at none of them (it used to look at every
        // transfer of the loop after every pass while a read-ahead
        // connection lived, asking libcurl for each one's TLS state)
        #expect(ct_loop_tls_redrive_checks(harness.loop) == afterBulk)
    }

    @Test("a bulk HTTPS download suspended and resumed mid-body loses no record")
    func pauseAndResumeKeepsBufferedRecords() throws {
        let folder = try TemporaryDirectory()
        let harness = try PhaseHarness()
        defer { harness.destroy() }

        // Given a bulk download that is receiving
        let (id, file, digest) = try startBulkDownload(harness, seed: 17, into: folder, name: "paused.bin")
        try harness.waitForPhase(id, CT_PHASE_RECEIVING)

        // When it is suspended (OpenSSL may hold records read ahead) and resumed
        #expect(ct_loop_pause(harness.loop, id) == CT_OK)
        try harness.waitForEvent(id, "the user pause") { $0.why == "suspended" }
        #expect(ct_loop_resume(harness.loop, id) == CT_OK)
        let outcome = try harness.waitForFinish(id, timeout: .seconds(60))

        // Then every byte arrives once, in order
        #expect(outcome.code == CT_OK, "\(outcome.message)")
        #expect(try FileDigest.sha256(of: URL(fileURLWithPath: file)) == digest)
    }
}
