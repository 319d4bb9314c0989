import Foundation
import Synchronization
import Testing
import TestSupport
import Transfer
import TransferFoundation

/// Where a `GatedStream` waits, shared with the test: a latch, so that a
/// stream made again after a rewind (curl may resend a body, e.g. on a
/// reused connection that died) passes once the test has opened it.
final class StreamGate: @unchecked Sendable {
    // @unchecked Sendable: `opened` and `waiters` are guarded by `condition`.
    private let condition = NSCondition()
    private var opened = false
    private var waiters = 0

    /// Whether a read is waiting at the gate.
    var isBlocked: Bool { condition.withLock { waiters > 0 } }

    func open() {
        condition.withLock {
            opened = true
            condition.broadcast()
        }
    }

    fileprivate func pass() {
        condition.withLock {
            waiters += 1
            while !opened { condition.wait() }
            waiters -= 1
        }
    }
}

/// An upload body that serves `first`, then blocks inside `read` until the test
/// opens the gate, then serves `rest` (or fails, with `failAfterGate`): a pipe
/// whose writer is slow, without a clock. Used by one reader thread.
final class GatedStream: InputStream {
    private let first: Data
    private let rest: Data
    private let failAfterGate: Bool
    private let gate: StreamGate
    private var offset = 0
    private var status: Stream.Status = .notOpen

    init(first: Data, rest: Data, gate: StreamGate, failAfterGate: Bool = false) {
        self.first = first
        self.rest = rest
        self.gate = gate
        self.failAfterGate = failAfterGate
        super.init(data: Data())
    }

    override func open() { if status == .notOpen { status = .open } }
    override func close() { status = .closed }
    override var streamStatus: Stream.Status { status }
    override var streamError: (any Error)? {
        status == .error ? POSIXError(.EIO) : nil
    }
    override var hasBytesAvailable: Bool { status == .open }

    override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength: Int) -> Int {
        guard status == .open else { return status == .error ? -1 : 0 }
        if offset == first.count {
            gate.pass()
            if failAfterGate {
                status = .error
                return -1
            }
        }
        let whole = first + rest
        let count = min(maxLength, whole.count - offset, offset < first.count ? first.count - offset : .max)
        if count <= 0 {
            status = .atEnd
            return 0
        }
        whole.withUnsafeBytes { raw in
            buffer.update(from: raw.baseAddress!.assumingMemoryBound(to: UInt8.self) + offset, count: count)
        }
        offset += count
        return count
    }

    override func getBuffer(
        _ buffer: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>, length: UnsafeMutablePointer<Int>
    ) -> Bool { false }
}

@Suite("Streamed upload bodies")
struct StreamedBodyTests {
    @Test("a streamed body that blocks does not stall the session: a GET completes meanwhile, then the upload arrives intact")
    func blockedStreamDoesNotStallLoop() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let first = TestServer.bytes(seed: 61, count: 48 << 10)
        let rest = TestServer.bytes(seed: 62, count: 1 << 20)
        let stream = StreamGate()
        defer { stream.open() }   // never leave the reader blocked
        var request = Request(url: server.url("/upload"), method: .post)
        request.body = .stream(BodyStreamProvider { GatedStream(first: first, rest: rest, gate: stream) }, length: nil)
        let uploaded = Completion<UploadOutcome>()
        session.uploadTask(withStreamedRequest: request, completionHandler: uploaded.handler).resume()
        try await Wait.until("the body stream to block at its gate", timeout: .seconds(30)) { stream.isBlocked }

        // The upload is stuck inside InputStream.read; a GET of the same session still runs.
        let fetched = Completion<UploadOutcome>()
        session.dataTask(with: Request(url: server.url("/bytes/1024")), completionHandler: fetched.handler).resume()
        let get = try #require(await fetched.wait(timeout: .seconds(30)),
                               "the GET did not finish while the upload's stream was blocked")
        #expect(get.error == nil)
        #expect(get.data?.count == 1024)
        #expect(stream.isBlocked, "the upload's stream was still blocked when the GET completed")

        stream.open()
        let outcome = try #require(await uploaded.wait())
        #expect(outcome.error == nil)
        #expect(outcome.response?.statusCode == 200)
        #expect(outcome.receipt?.length == first.count + rest.count)
        #expect(outcome.receipt?.sha256 == FileDigest.sha256(first + rest))
    }

    @Test("a streamed body whose stream fails ends the task with a file error that says so")
    func failingStream() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let first = TestServer.bytes(seed: 63, count: 16 << 10)
        let stream = StreamGate()
        defer { stream.open() }
        var request = Request(url: server.url("/upload"), method: .post)
        request.body = .stream(BodyStreamProvider {
            GatedStream(first: first, rest: Data(), gate: stream, failAfterGate: true)
        }, length: nil)
        let done = Completion<UploadOutcome>()
        session.uploadTask(withStreamedRequest: request, completionHandler: done.handler).resume()
        try await Wait.until("the body stream to block at its gate", timeout: .seconds(30)) { stream.isBlocked }
        stream.open()

        let outcome = try #require(await done.wait())
        let error = try #require(outcome.error)
        #expect(error.code == .fileError)
        // The stream's own error, not just "failed".
        #expect(error.message.contains("the body stream failed:"), "\(error.message)")
        #expect(outcome.receipt == nil)
    }

    @Test("a 307 re-requests a streamed body of unknown length through the hook, read off the engine thread")
    func redirectRequestsNewStream() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let body = TestServer.bytes(seed: 64, count: 512 << 10)
        let asked = Locked<Int>(0)
        session.hooks.taskNeedNewBodyStream = { _, _ in
            asked.withLock { $0 += 1 }
            return InputStream(data: body)
        }
        var request = Request(url: server.url("/redirect-to?url=/upload&status=307"), method: .post)
        request.body = .stream(BodyStreamProvider { InputStream(data: body) }, length: nil)
        let done = Completion<UploadOutcome>()

        session.uploadTask(withStreamedRequest: request, completionHandler: done.handler).resume()
        let outcome = try #require(await done.wait())

        #expect(outcome.error == nil)
        #expect(outcome.response?.statusCode == 200)
        #expect(outcome.receipt?.length == body.count)
        #expect(outcome.receipt?.sha256 == FileDigest.sha256(body))
        #expect(asked.withLock { $0 } >= 1)
    }

    @Test("a 307 fails clearly when no new body stream can be had")
    func redirectWithoutNewStream() async throws {
        let server = try TestServer()
        defer { server.stop() }
        let session = try SessionManager()
        defer { session.invalidateAndCancel() }
        let body = TestServer.bytes(seed: 65, count: 256 << 10)
        let made = Locked<Int>(0)
        var request = Request(url: server.url("/redirect-to?url=/upload&status=307"), method: .post)
        // One stream only: the provider gives none the second time.
        request.body = .stream(BodyStreamProvider {
            made.withLock { count in
                count += 1
                return count == 1 ? InputStream(data: body) : nil
            }
        }, length: nil)
        let done = Completion<UploadOutcome>()

        session.uploadTask(withStreamedRequest: request, completionHandler: done.handler).resume()
        let outcome = try #require(await done.wait())

        let error = try #require(outcome.error)
        #expect(error.code == .fileError, "\(error)")
        #expect(error.message.contains("send the body again"), "\(error.message)")
        #expect(outcome.receipt == nil)
    }
}
