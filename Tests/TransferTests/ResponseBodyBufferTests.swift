import Foundation
import Testing

@testable import Transfer

/// The bounded buffer behind `stream(for:)`, driven event by event with no
/// engine: when it asks the engine to hold, when it lets go, and how the end
/// and an abandoned reader are told.
@Suite("Response body buffer")
struct ResponseBodyBufferTests {
    private static let url = URL(string: "http://example.invalid/body")!

    /// Takes what is ready (every call here has something ready, so nothing waits).
    private static func take(_ buffer: ResponseBodyBuffer) async -> (Result<Data?, TransferError>?, Bool) {
        var drained = false
        let result = await withCheckedContinuation { (continuation: ResponseBodyBuffer.ChunkWaiter) in
            let (ready, didDrain) = buffer.take(orWait: continuation)
            drained = didDrain
            // Nothing ready would be a bug of this test's setup: end the wait with a marker.
            continuation.resume(returning: ready ?? .failure(TransferError(.internalError, "nothing ready", url: url)))
        }
        return (result, drained)
    }

    @Test("asks the engine to hold once at the high-water mark and lets it go at the low-water mark")
    func holdsAtHighAndReleasesAtLow() async throws {
        let buffer = ResponseBodyBuffer(highWaterMark: 4000, url: Self.url)
        let chunk = Data(repeating: 7, count: 1000)

        let answers = (0..<4).map { _ in buffer.append(chunk) }
        let held = buffer.snapshot

        #expect(answers == [false, false, false, true])
        #expect(held.holding)
        #expect(held.holds == 1)
        #expect(held.buffered == 4000)

        let first = await Self.take(buffer)
        #expect(first.1 == false)   // 3000 buffered: above the low-water mark (2000)
        let second = await Self.take(buffer)
        #expect(second.1 == true)   // 2000: the engine may go on, once
        let third = await Self.take(buffer)
        #expect(third.1 == false)
        #expect(!buffer.snapshot.holding)
        #expect(buffer.snapshot.consumed == 3000)
    }

    @Test("buffered chunks are read before the end or the error")
    func chunksComeBeforeTheEnd() async throws {
        let buffer = ResponseBodyBuffer(highWaterMark: 1 << 20, url: Self.url)
        _ = buffer.append(Data("ab".utf8))
        _ = buffer.append(Data("cd".utf8))

        buffer.finish(error: TransferError(.truncatedResponse, "short", url: Self.url))
        let a = await Self.take(buffer)
        let b = await Self.take(buffer)
        let end = await Self.take(buffer)

        #expect(try a.0?.get() == Data("ab".utf8))
        #expect(try b.0?.get() == Data("cd".utf8))
        guard case .failure(let error) = end.0 else {
            Issue.record("expected the error after the chunks, got \(String(describing: end.0))")
            return
        }
        #expect(error.code == .truncatedResponse)
    }

    @Test("an abandoned buffer drops its chunks, holds the engine and reports cancelled; only a running one cancels")
    func abandonDropsAndHolds() async throws {
        let buffer = ResponseBodyBuffer(highWaterMark: 1 << 20, url: Self.url)
        _ = buffer.append(Data(count: 100))

        let first = buffer.abandon()
        let again = buffer.abandon()
        let answer = buffer.append(Data(count: 100))
        let taken = await Self.take(buffer)
        let finished = ResponseBodyBuffer(highWaterMark: 10, url: Self.url)
        finished.finish(error: nil)

        #expect(first)
        #expect(!again)
        #expect(answer)
        #expect(buffer.snapshot.buffered == 0)
        guard case .failure(let error) = taken.0 else {
            Issue.record("expected cancelled, got \(String(describing: taken.0))")
            return
        }
        #expect(error.code == .cancelled)
        #expect(!finished.abandon())
    }

    @Test("the head waiter gets the head, or the error when the transfer ends first")
    func headOrError() async throws {
        let buffer = ResponseBodyBuffer(highWaterMark: 10, url: Self.url)
        let failing = ResponseBodyBuffer(highWaterMark: 10, url: Self.url)
        let response = HTTPResponse(url: Self.url, statusCode: 206, headers: HTTPHeaders(), httpVersion: "1.1")

        buffer.didReceive(response)
        let head = await withCheckedContinuation { buffer.waitForHead($0) }
        failing.finish(error: TransferError(.cannotConnect, "refused", url: Self.url))
        let failure = await withCheckedContinuation { failing.waitForHead($0) }

        #expect(try head.get().statusCode == 206)
        guard case .failure(let error) = failure else {
            Issue.record("expected the error")
            return
        }
        #expect(error.code == .cannotConnect)
    }
}
