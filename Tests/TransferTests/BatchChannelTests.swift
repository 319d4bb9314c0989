import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Transfer

/// The channel that carries a batch's results to its consumer: order,
/// the end, and the three ways a consumer can go away.
@Suite("Batch channel")
struct BatchChannelTests {
    private static func chunk(_ indices: Int...) -> [BatchResult] {
        indices.map { index in
            BatchResult(index: index, result: .failure(TransferError(.cancelled, "test", url: URL(string: "http://a/")!)),
                        metrics: nil, bytesReceived: Int64(index))
        }
    }

    private static func indices(_ chunk: [BatchResult]?) -> [Int]? { chunk?.map(\.index) }

    @Test("chunks sent before the end are taken in order, then nil; a chunk sent after the end is dropped")
    func orderAndEnd() async {
        let channel = BatchChannel()
        channel.send(Self.chunk(0, 1))
        channel.send(Self.chunk(2))
        channel.finish()
        channel.send(Self.chunk(3))

        #expect(Self.indices(await channel.next()) == [0, 1])
        #expect(Self.indices(await channel.next()) == [2])
        #expect(await channel.next() == nil)
        #expect(await channel.next() == nil)
    }

    @Test("a consumer that waits gets the chunk sent later, then the end")
    func waitingConsumer() async throws {
        let channel = BatchChannel()
        let consumer = Task { (await channel.next(), await channel.next()) }
        channel.send(Self.chunk(7))
        channel.finish()

        let (chunk, end) = await consumer.value
        #expect(Self.indices(chunk) == [7])
        #expect(end == nil)
    }

    @Test("cancel runs the handler once; after the end it runs none")
    func cancelOnce() async {
        let runs = Locked<Int>(0)
        let channel = BatchChannel()
        channel.onCancel { runs.withLock { $0 += 1 } }
        channel.cancel()
        channel.cancel()
        #expect(runs.withLock { $0 } == 1)
        #expect(await channel.next() == nil)

        let ended = BatchChannel()
        ended.onCancel { runs.withLock { $0 += 1 } }
        ended.finish()
        ended.cancel()
        #expect(runs.withLock { $0 } == 1)
    }

    @Test("cancelling the task that waits in next() ends it with nil and cancels the batch")
    func cancelledConsumer() async {
        let runs = Locked<Int>(0)
        let channel = BatchChannel()
        channel.onCancel { runs.withLock { $0 += 1 } }
        let consumer = Task { await channel.next() }
        consumer.cancel()

        #expect(await consumer.value == nil)
        #expect(runs.withLock { $0 } == 1)
    }

    @Test("the receiver going away before the end cancels the batch; after the end it does not")
    func lastReceiverGone() {
        let runs = Locked<Int>(0)
        let channel = BatchChannel()
        channel.onCancel { runs.withLock { $0 += 1 } }
        // The sequence and an iterator: two references to one receiver.
        var receivers = [BatchChannel.Receiver(channel)]
        receivers.append(receivers[0])
        receivers.removeFirst()
        #expect(runs.withLock { $0 } == 0)
        receivers.removeAll()
        #expect(runs.withLock { $0 } == 1)

        let ended = BatchChannel()
        ended.onCancel { runs.withLock { $0 += 1 } }
        ended.finish()
        _ = BatchChannel.Receiver(ended)
        #expect(runs.withLock { $0 } == 1)
    }
}
