import Foundation
import Synchronization
import TestSupport
import Testing
import Transfer

/// Sessions the test no longer holds, to see that each one goes away.
private struct WeakSession: Sendable {
    weak var session: SessionManager?
}

private final class TeardownCounts: Sendable {
    let completions = Atomic<Int>(0)
    let failures = Locked<[String]>([])
    let sessions = Locked<[WeakSession]>([])
}

@Suite("Session teardown from the engine's own thread", .serialized,
       .enabled(if: NginxFixture.isInstalled, "nginx is not installed (apt-get install nginx)"))
struct SessionTeardownTests {
    /// The completion closures hold the only references to their session, so
    /// the last one is dropped wherever the last task is released: on the
    /// delegate or completion queue, or on the engine's loop thread (the box
    /// of a finished transfer, released after its finish event was already
    /// delivered). There the engine is destroyed from its own thread.
    @Test("a session whose only reference is held by task completions is freed safely, wherever it drops")
    func sessionHeldOnlyByCompletions() async throws {
        let nginx = try NginxFixture.shared()
        let file = try nginx.ensureFile(size: 512, seed: 21)
        let url = nginx.url(.http, "/files/" + URL(fileURLWithPath: file.path).lastPathComponent)
        let sanitized = ProcessInfo.processInfo.environment["TRANSFER_TEST_SANITIZER"] != nil
        let rounds = sanitized ? 20 : 60
        let tasksPerSession = 8
        let counts = TeardownCounts()

        for _ in 0..<rounds {
            try startSession(url: url, tasks: tasksPerSession, counts: counts)
        }

        try await Wait.until("every completion", timeout: .seconds(120), interval: .milliseconds(10)) {
            counts.completions.load(ordering: .acquiring) == rounds * tasksPerSession
        }
        try await Wait.until("every session to be freed", timeout: .seconds(60), interval: .milliseconds(10)) {
            counts.sessions.withLock { $0.allSatisfy { $0.session == nil } }
        }
        #expect(counts.failures.withLock { $0 } == [])
    }

    /// Starts `tasks` requests on a new session and keeps no reference to it.
    private func startSession(url: URL, tasks: Int, counts: TeardownCounts) throws {
        let session = try SessionManager(configuration: .default)
        counts.sessions.withLock { $0.append(WeakSession(session: session)) }
        for _ in 0..<tasks {
            let task = session.dataTask(with: Request(url: url)) { response, _, error in
                // The closure owns the session: the only strong reference left.
                withExtendedLifetime(session) {}
                if let error {
                    counts.failures.withLock { $0.append("\(error)") }
                } else if response?.statusCode != 200 {
                    counts.failures.withLock { $0.append("status \(response?.statusCode ?? 0)") }
                }
                counts.completions.add(1, ordering: .releasing)
            }
            task.resume()
        }
    }
}
