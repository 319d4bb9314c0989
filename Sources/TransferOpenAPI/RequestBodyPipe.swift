import Foundation
import OpenAPIRuntime
import Transfer

/// Streams an `HTTPBody` to the engine as a `BodySource`, without holding
/// it whole: a task reads the body's chunks into a bounded buffer, and the
/// engine's body reader (a thread of its own, see Transfer's streamed upload
/// bodies) takes them out. The producer waits while the buffer holds
/// `capacity` bytes or more, and goes on when the reader has taken it below.
///
/// Each ``makeSource()`` starts the body from the beginning (a redirect or an
/// authentication retry asks again); a body that can be iterated only once
/// gives no second stream. ``cancel()`` stops the producer and makes a
/// blocked read fail at once.
final class RequestBodyPipe: Sendable {
    private let body: HTTPBody
    private let capacity: Int
    private let state = Mutex()

    init(body: HTTPBody, capacity: Int) {
        self.body = body
        self.capacity = capacity
    }

    /// A fresh stream of the whole body, or nil when it cannot be read again
    /// (or the pipe was cancelled).
    func makeSource() -> (any BodySource)? {
        let feed = BodyFeed(capacity: capacity)
        let previous: BodyFeed?
        do {
            previous = try state.replace(with: feed, singlePass: body.iterationBehavior == .single)
        } catch {
            return nil
        }
        previous?.cancel()
        let body = self.body
        let producer = Task {
            do {
                for try await chunk in body {
                    guard await feed.push(chunk) else { return }
                }
                feed.finish(failure: nil)
            } catch {
                feed.finish(failure: error)
            }
        }
        feed.attach(producer)
        return FeedSource(feed)
    }

    /// Ends the production and fails any read in progress or to come.
    func cancel() {
        state.cancel()?.cancel()
    }

    /// The current feed, guarded by a lock.
    private final class Mutex: @unchecked Sendable {
        private let lock = NSLock()
        private var current: BodyFeed?
        private var streams = 0
        private var cancelled = false

        struct Refused: Error {}

        func replace(with feed: BodyFeed, singlePass: Bool) throws -> BodyFeed? {
            try lock.withLock {
                if cancelled || (singlePass && streams > 0) { throw Refused() }
                streams += 1
                defer { current = feed }
                return current
            }
        }

        func cancel() -> BodyFeed? {
            lock.withLock {
                cancelled = true
                return current
            }
        }
    }
}

/// One pass over the body: the bounded buffer between its producer task and
/// the engine's reader thread.
///
/// @unchecked Sendable: every stored property is guarded by `condition`.
final class BodyFeed: @unchecked Sendable {
    private let capacity: Int
    private let condition = NSCondition()
    private var bytes: [UInt8] = []
    private var head = 0
    private var ended = false
    private var failure: (any Error)?
    private var cancelled = false
    private var spaceWaiter: CheckedContinuation<Void, Never>?
    private var producer: Task<Void, Never>?

    init(capacity: Int) { self.capacity = capacity }

    private var buffered: Int { bytes.count - head }

    /// Keeps the producer task, to cancel it with the feed.
    func attach(_ task: Task<Void, Never>) {
        let cancelNow: Bool = condition.withLock {
            producer = task
            return cancelled
        }
        if cancelNow { task.cancel() }
    }

    /// Producer: appends `chunk`, then waits while the buffer is full.
    /// - Returns: false once the feed is cancelled (stop producing).
    func push(_ chunk: ArraySlice<UInt8>) async -> Bool {
        let full: Bool = condition.withLock {
            guard !cancelled else { return false }
            if head > 0 && head >= bytes.count / 2 {
                bytes.removeFirst(head)
                head = 0
            }
            bytes.append(contentsOf: chunk)
            condition.broadcast()
            return buffered >= capacity
        }
        if full {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                condition.lock()
                if cancelled || buffered < capacity {
                    condition.unlock()
                    continuation.resume()
                } else {
                    spaceWaiter = continuation
                    condition.unlock()
                }
            }
        }
        return condition.withLock { !cancelled }
    }

    /// Producer: the body ended, or failed with `failure`.
    func finish(failure error: (any Error)?) {
        condition.withLock {
            if let error { failure = error } else { ended = true }
            condition.broadcast()
        }
    }

    /// Stops the producer and fails reads.
    func cancel() {
        let (waiter, task): (CheckedContinuation<Void, Never>?, Task<Void, Never>?) = condition.withLock {
            cancelled = true
            condition.broadcast()
            defer { spaceWaiter = nil }
            return (spaceWaiter, producer)
        }
        waiter?.resume()
        task?.cancel()
    }

    /// Why reads fail, if they do.
    var streamError: (any Error)? {
        condition.withLock { failure ?? (cancelled ? CancellationError() : nil) }
    }

    /// The producer waits for the reader to make room (for tests).
    var isWaitingForSpace: Bool { condition.withLock { spaceWaiter != nil } }
    /// A reader waits for the producer (for tests).
    var isReaderWaiting: Bool { condition.withLock { readerWaiting } }
    private var readerWaiting = false

    /// Reader thread: blocks until bytes, the end, a failure or cancellation.
    /// Returns the count copied, 0 at the end, -1 on failure or cancellation.
    func read(into target: UnsafeMutablePointer<UInt8>, maxLength: Int) -> Int {
        condition.lock()
        while buffered == 0 && !ended && failure == nil && !cancelled {
            readerWaiting = true
            condition.wait()
        }
        readerWaiting = false
        if cancelled || (buffered == 0 && failure != nil) {
            condition.unlock()
            return -1
        }
        if buffered == 0 {
            condition.unlock()
            return 0
        }
        let count = min(maxLength, buffered)
        bytes.withUnsafeBufferPointer { source in
            target.update(from: source.baseAddress! + head, count: count)
        }
        head += count
        var waiter: CheckedContinuation<Void, Never>?
        if buffered < capacity {
            waiter = spaceWaiter
            spaceWaiter = nil
        }
        condition.unlock()
        waiter?.resume()
        return count
    }
}

/// The body source the engine's body reader reads a ``BodyFeed`` through.
/// Made on one thread and then used only by the reader thread it is handed
/// to; the feed has its own lock.
final class FeedSource: BodySource {
    private let feed: BodyFeed
    private var ended = false

    init(_ feed: BodyFeed) { self.feed = feed }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        guard !ended, let base = buffer.baseAddress, !buffer.isEmpty else { return 0 }
        let count = feed.read(into: base.assumingMemoryBound(to: UInt8.self), maxLength: buffer.count)
        if count < 0 { throw feed.streamError ?? CancellationError() }
        if count == 0 { ended = true }
        return count
    }
}
