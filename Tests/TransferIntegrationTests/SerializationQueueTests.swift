import Foundation
import TestSupport
import Testing

@testable import Transfer

/// Response serializers run where completions are delivered, concurrently,
/// never on the session's serial delegate queue: a service parsing JSON
/// from many requests parses it on several threads at once.
@Suite("Response serialization off the delegate queue", .serialized)
struct SerializationQueueTests {
    /// Two serializations meet here: each waits until the other has started.
    /// Run one after the other, the first would wait for a second that can
    /// only start once it returned (its wait gives up, and says so).
    private final class Rendezvous: Sendable {
        private let bothArrived = DispatchSemaphore(value: 0)
        private let count = Locked(0)
        let onDelegateQueue = Locked(false)
        let met = Locked(0)

        func meet() {
            if DispatchQueue.getSpecific(key: Rendezvous.probe) != nil { onDelegateQueue.withLock { $0 = true } }
            let arrived = count.withLock { count -> Int in
                count += 1
                return count
            }
            // The second to arrive lets both go on.
            if arrived == 2 {
                bothArrived.signal()
                bothArrived.signal()
            }
            if bothArrived.wait(timeout: .now() + 20) == .success { met.withLock { $0 += 1 } }
        }

        static let probe = DispatchSpecificKey<Bool>()
    }

    private struct MeetingSerializer: ResponseSerializer {
        var acceptableStatusCodes = StatusCodeSet(200..<300)
        var acceptableContentTypes: Set<String>?
        let rendezvous: Rendezvous

        func serialize(response: HTTPResponse?, data: Data?, error: TransferError?) throws(TransferError) -> Int {
            if let error { throw error }
            rendezvous.meet()
            return data?.count ?? 0
        }
    }

    @Test("two slow serializers of one session run at the same time, off the delegate queue")
    func serializersOverlap() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        session.delegateQueue.setSpecific(key: Rendezvous.probe, value: true)
        let rendezvous = Rendezvous()
        session.responseSerializer = MeetingSerializer(rendezvous: rendezvous)
        let values = Locked<[Int]>([])

        // Given two data tasks whose serialized completions both need the serializer
        for size in [100, 200] {
            session.dataTask(with: Request(url: server.url("/bytes/\(size)?seed=1")),
                             serializedCompletionHandler: { _, value, error in
                #expect(error == nil)
                values.withLock { $0.append(value as? Int ?? -1) }
            }).resume()
        }

        // When both complete, then each serializer saw the other running
        // (ordering, not time: a serial queue could never let them meet)
        try await Wait.until("both serialized completions", timeout: .seconds(60)) { values.withLock { $0.count } == 2 }
        #expect(values.withLock { $0.sorted() } == [100, 200])
        #expect(rendezvous.met.withLock { $0 } == 2)
        #expect(!rendezvous.onDelegateQueue.withLock { $0 })
    }

    @Test("a task's validations, serializer and handlers live on the task: none stays in the session")
    func perTaskStateOnTheTask() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        let manager = try HTTPSessionManager(baseURL: server.url("/"), session: session)
        let outcomes = Locked<[String]>([])

        // A validated data task, a serialized one, and a manager's GET
        session.dataTask(with: Request(url: server.url("/status/404"))) { _, _, error in
            outcomes.withLock { $0.append("validated:\(error?.code.name ?? "ok")") }
        }.validate().resume()
        session.dataTask(with: Request(url: server.url("/bytes/10?seed=2")),
                         serializedCompletionHandler: { _, value, _ in
                             outcomes.withLock { $0.append("serialized:\((value as? Data)?.count ?? -1)") }
                         }).resume()
        manager.GET("json", parameters: nil, headers: nil, progress: nil,
                    success: { task, _ in outcomes.withLock { $0.append("get:\(task.response?.statusCode ?? 0)") } },
                    failure: { _, error in outcomes.withLock { $0.append("get:\(error)") } })

        try await Wait.until("three completions", timeout: .seconds(60)) { outcomes.withLock { $0.count } == 3 }
        #expect(outcomes.withLock { $0.sorted() } == ["get:200", "serialized:10", "validated:unacceptableStatusCode"])
        #expect(session.tasks.isEmpty)
    }
}
