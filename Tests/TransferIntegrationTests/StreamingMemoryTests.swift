import Foundation
import Testing
import TestSupport

@testable import Transfer

/// Issue 14 item 2b's target: streaming 1 GiB through the chunk hook grows RSS
/// by less than 16 MiB; the same for a body stream whose reader holds. Peak RSS
/// is the kernel's (VmHWM), reset before each transfer through
/// /proc/self/clear_refs, so that what earlier tests of the process used does
/// not count.
@Suite("Streaming memory", .serialized, .disabled(if: underSanitizer, "sanitizers' shadow memory swamps RSS"))
struct StreamingMemoryTests {
    static let count = 1 << 30
    static let limit = 16 << 20

    /// VmRSS and VmHWM of this process, in bytes.
    private static func memory() throws -> (rss: Int, peak: Int) {
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        func field(_ name: String) -> Int? {
            guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return nil }
            return line.split(separator: " ").compactMap { Int($0) }.first.map { $0 * 1024 }
        }
        return (try #require(field("VmRSS")), try #require(field("VmHWM")))
    }

    /// Resets the peak to the current RSS ("5": reset the peak resident set size, proc(5)).
    private static func resetPeak() throws {
        try "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
    }

    @Test("1 GiB through the chunk hook grows peak RSS by less than 16 MiB, and the completion keeps nothing")
    func hookStaysFlat() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        let seen = Locked(0)
        var hooks = SessionHooks()
        hooks.dataTaskDidReceiveData = { _, _, chunk in seen.withLock { $0 += chunk.count } }
        session.hooks = hooks
        // A warm-up transfer: the session's first use allocates what every later one reuses.
        _ = try await session.data(for: Request(url: server.url("/bytes/1048576?seed=40")))
        seen.withLock { $0 = 0 }
        try Self.resetPeak()
        let before = try Self.memory()

        let (data, response) = try await session.data(for: Request(url: server.url("/bytes/\(Self.count)?seed=41")))
        let after = try Self.memory()

        let growth = after.peak - before.rss
        print("streaming 1 GiB through the chunk hook: RSS \(before.rss >> 20) MiB before, peak \(after.peak >> 20) MiB, "
            + "growth \(growth >> 10) KiB")
        #expect(response.statusCode == 200)
        #expect(data.isEmpty)
        #expect(seen.withLock { $0 } == Self.count)
        #expect(growth < Self.limit, "peak RSS grew by \(growth >> 20) MiB")
    }

    @Test("1 GiB through a body stream whose reader holds every 64 MiB grows peak RSS by less than 16 MiB")
    func streamWithSlowReaderStaysFlat() async throws {
        let server = try await TestServer.start()
        defer { _ = server.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        _ = try await session.data(for: Request(url: server.url("/bytes/1048576?seed=40")))
        try Self.resetPeak()
        let before = try Self.memory()

        let (_, body) = try await session.stream(for: Request(url: server.url("/bytes/\(Self.count)?seed=42")))
        var count = 0
        var nextHold = 64 << 20
        var holds = 0
        for try await chunk in body {
            count += chunk.count
            if count >= nextHold {
                // The reader holds until the engine has paused the transfer.
                nextHold += 64 << 20
                try await Wait.until("the engine to hold the stream", timeout: .seconds(30)) {
                    body.owner.buffer.snapshot.holding || body.owner.buffer.snapshot.finished
                }
                holds += 1
            }
        }
        let after = try Self.memory()

        let growth = after.peak - before.rss
        print("streaming 1 GiB through a body stream, reader holding \(holds) times: RSS \(before.rss >> 20) MiB "
            + "before, peak \(after.peak >> 20) MiB, growth \(growth >> 10) KiB, "
            + "engine held \(body.owner.buffer.snapshot.holds) times")
        #expect(count == Self.count)
        #expect(holds >= 15)
        #expect(growth < Self.limit, "peak RSS grew by \(growth >> 20) MiB")
    }
}
