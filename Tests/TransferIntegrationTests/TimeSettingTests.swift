import Foundation
import TestSupport
import Testing

@testable import Transfer

/// No number in a time setting crashes the process: `Int64(x)` traps on
/// infinity, NaN and values past 2^63, and `timeoutIntervalForResource =
/// .infinity` is a common URLSession idiom. Infinity and huge values mean
/// "no limit", 0 and negative values "off", NaN a typed error naming the
/// setting (Core/TimeLimit.swift).
@Suite("Time settings: any number, no trap", .serialized)
struct TimeSettingTests {
    static let values: [Double] = [0, -1, -.infinity, 1e-9, 1e300, .greatestFiniteMagnitude, .infinity, .nan]

    /// Each time setting of the configuration and the request, by name.
    static var settings: [(String, (inout SessionConfiguration, inout Request, Double) -> Void)] { [
        ("timeoutIntervalForResource", { c, _, v in c.timeoutIntervalForResource = v }),
        ("timeoutIntervalForRequest", { c, _, v in c.timeoutIntervalForRequest = v }),
        ("connectTimeout", { c, _, v in c.connectTimeout = v }),
        ("lowSpeedTime", { c, _, v in
            c.lowSpeedLimit = 1
            c.lowSpeedTime = v
        }),
        ("Request.timeoutInterval", { _, r, v in r.timeoutInterval = v }),
    ] }

    private static func result(_ session: SessionManager, _ request: Request) async
        -> Result<(Data, HTTPResponse), TransferError>
    {
        do { return .success(try await session.data(for: request)) } catch { return .failure(error) }
    }

    @Test("every time setting takes 0, negatives, 1e300, infinity and NaN over a real socket")
    func everySettingEveryValue() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        for (name, set) in Self.settings {
            for value in Self.values {
                var configuration = SessionConfiguration.ephemeral
                var request = Request(url: server.url("/bytes/64?seed=3"))
                set(&configuration, &request, value)
                let session = try SessionManager(configuration: configuration)
                defer { session.invalidateAndCancel() }

                // Both paths: the fast one, and a task (an observer turns the fast path off).
                let fast = await Self.result(session, request)
                var hooks = SessionHooks()
                hooks.taskDidComplete = { _, _, _ in }
                session.hooks = hooks
                let task = await Self.result(session, request)

                for result in [fast, task] {
                    switch result {
                    case .success(let (body, response)):
                        #expect(!value.isNaN, "\(name) = NaN was accepted")
                        #expect(response.statusCode == 200, "\(name) = \(value)")
                        #expect(body == TestServer.bytes(seed: 3, count: 64), "\(name) = \(value)")
                    case .failure(let error) where value == 1e-9:
                        // One millisecond: a timeout may well pass; that is a
                        // timeout, not a refused setting.
                        #expect(error.code == .timedOut, "\(name) = \(value): \(error)")
                    case .failure(let error):
                        #expect(value.isNaN, "\(name) = \(value): \(error)")
                        #expect(error.code == .invalidRequest, "\(name) = \(value): \(error)")
                        #expect(error.message.contains(name == "Request.timeoutInterval" ? "timeoutInterval" : name),
                                "\(error.message)")
                    }
                }
            }
        }
    }

    @Test("an infinite total timeout is no limit: a slow body completes")
    func infiniteResourceTimeoutIsNoLimit() async throws {
        let server = try await TestServer.start()
        defer { server.stop() }
        var configuration = SessionConfiguration.ephemeral
        configuration.timeoutIntervalForResource = .infinity
        configuration.timeoutIntervalForRequest = .infinity
        configuration.connectTimeout = .infinity
        let session = try SessionManager(configuration: configuration)
        defer { session.invalidateAndCancel() }

        let (body, response) = try await session.data(for: Request(url: server.url("/slow?rate=2000&size=600")))

        #expect(response.statusCode == 200)
        #expect(body.count == 600)
    }

    @Test("the conversion: off, unlimited, rounded-up milliseconds, NaN refused")
    func conversion() throws {
        #expect(try TimeLimit.limit(0, setting: "x") == .off)
        #expect(try TimeLimit.limit(-5, setting: "x") == .off)
        #expect(try TimeLimit.limit(-.infinity, setting: "x") == .off)
        #expect(try TimeLimit.limit(.infinity, setting: "x") == .unlimited)
        #expect(try TimeLimit.limit(1e300, setting: "x") == .unlimited)
        #expect(try TimeLimit.limit(1e-9, setting: "x") == .milliseconds(1))
        #expect(try TimeLimit.limit(1.0005, setting: "x") == .milliseconds(1001))
        #expect(throws: TransferError.self) { try TimeLimit.limit(.nan, setting: "x") }
        #expect(TimeLimit.duration(seconds: .nan) == .zero)
        #expect(TimeLimit.duration(seconds: .infinity) == .seconds(1_000_000_000))
        #expect(TimeLimit.clampedSeconds(.nan, fallback: 5) == 5)
        #expect(TimeLimit.clampedSeconds(.infinity, fallback: 5) == TimeLimit.maximumSeconds)
        #expect(TimeLimit.unixSeconds(Date(timeIntervalSince1970: .infinity)) == 9_007_199_254_740_992)
        #expect(TimeLimit.unixSeconds(Date(timeIntervalSince1970: -.infinity)) == -9_007_199_254_740_992)
        #expect(TimeLimit.unixSeconds(Date(timeIntervalSince1970: 12.7)) == 12)
    }

    @Test("a retry policy's backoff never traps, whatever its numbers")
    func backoffNeverTraps() {
        let odd: [Double] = [0, -1, 1e300, .infinity, -.infinity, .nan]
        for multiplier in odd {
            for jitter in odd {
                for random in odd {
                    let policy = RetryPolicy(maximumAttempts: 5, initialDelay: .seconds(Int64.max),
                                             multiplier: multiplier, maximumDelay: .seconds(Int64.max),
                                             jitter: jitter)
                    for attempt in [0, 1, 2, 64, Int.max] {
                        let delay = policy.backoff(attempt: attempt, random: random)
                        #expect(delay >= .zero && delay <= .seconds(1_000_000_000))
                    }
                }
            }
        }
    }
}
