import Dispatch
import Foundation
import Testing

@testable import Transfer

@Suite("AutoPurgingCache")
struct AutoPurgingCacheTests {
    private func bytes(_ count: Int) -> Data { Data(repeating: 7, count: count) }

    @Test("going over capacity purges the least recently used down to the preferred usage")
    func purgesToPreferredUsage() {
        let cache = AutoPurgingCache<Data>(memoryCapacity: 100, preferredMemoryUsageAfterPurge: 60)
        cache.add(bytes(30), withIdentifier: "a")
        cache.add(bytes(30), withIdentifier: "b")
        cache.add(bytes(30), withIdentifier: "c")
        #expect(cache.memoryUsage == 90)

        // Touching "a" makes "b" the least recently used.
        #expect(cache.value(withIdentifier: "a") != nil)
        cache.add(bytes(30), withIdentifier: "d")

        #expect(cache.memoryUsage == 60)
        #expect(cache.value(withIdentifier: "b") == nil)
        #expect(cache.value(withIdentifier: "c") == nil)
        #expect(cache.value(withIdentifier: "a") != nil)
        #expect(cache.value(withIdentifier: "d") != nil)
        #expect(cache.count == 2)
    }

    @Test("replacing a value counts only the new cost; removal and removeAll give the bytes back")
    func replaceAndRemove() {
        let cache = AutoPurgingCache<Data>(memoryCapacity: 1000, preferredMemoryUsageAfterPurge: 500)
        cache.add(bytes(100), withIdentifier: "a")
        cache.add(bytes(40), withIdentifier: "a")
        #expect(cache.memoryUsage == 40)
        cache.add(bytes(10), withIdentifier: "b")

        #expect(cache.removeValue(withIdentifier: "a"))
        #expect(!cache.removeValue(withIdentifier: "a"))
        #expect(cache.memoryUsage == 10)
        #expect(cache.removeAll())
        #expect(cache.memoryUsage == 0)
        #expect(cache.count == 0)
        #expect(!cache.removeAll())
    }

    @Test("a value larger than the whole capacity is refused and evicts nothing")
    func oversizedValueIsRefused() {
        let cache = AutoPurgingCache<Data>(memoryCapacity: 100, preferredMemoryUsageAfterPurge: 60)
        cache.add(bytes(50), withIdentifier: "keep")

        #expect(!cache.add(bytes(101), withIdentifier: "huge"))

        #expect(cache.value(withIdentifier: "huge") == nil)
        #expect(cache.value(withIdentifier: "keep") != nil)
        #expect(cache.memoryUsage == 50)
    }

    @Test("odd sizes are clamped: preferred above capacity, negative capacity and costs")
    func clampsBadSizes() {
        let preferred = AutoPurgingCache<Data>(memoryCapacity: 10, preferredMemoryUsageAfterPurge: 50)
        #expect(preferred.preferredMemoryUsageAfterPurge == 10)
        let negative = AutoPurgingCache<Data>(memoryCapacity: -5, preferredMemoryUsageAfterPurge: -1)
        #expect(negative.memoryCapacity == 0)
        #expect(negative.preferredMemoryUsageAfterPurge == 0)
        let weird = AutoPurgingCache<String>(memoryCapacity: 10, preferredMemoryUsageAfterPurge: 5) { _ in -3 }
        #expect(weird.add("x", withIdentifier: "x"))
        #expect(weird.memoryUsage == 0)
    }

    @Test("lookup by request and additional identifier, kept apart by varying headers")
    func requestKeys() throws {
        let cache = AutoPurgingCache<String>(memoryCapacity: 1000, preferredMemoryUsageAfterPurge: 500) {
            $0.utf8.count
        }
        var png = try Request("https://example.com/avatar/1")
        png.headers["Accept"] = "image/png"
        var webp = png
        webp.headers["Accept"] = "image/webp"

        cache.add("original", for: png)
        cache.add("thumbnail", for: png, additionalIdentifier: "64x64")

        #expect(cache.value(for: png) == "original")
        #expect(cache.value(for: png, additionalIdentifier: "64x64") == "thumbnail")
        #expect(cache.value(for: webp) == nil)
        #expect(cache.value(for: try Request("https://example.com/avatar/2")) == nil)
        #expect(cache.removeValue(for: png, additionalIdentifier: "64x64"))
        #expect(cache.value(for: png, additionalIdentifier: "64x64") == nil)
        #expect(cache.identifier(for: png, additionalIdentifier: "x").hasSuffix("\n@x"))
    }

    @Test("many threads adding and reading keep the usage within capacity and consistent")
    func concurrentUse() {
        let cache = AutoPurgingCache<Data>(memoryCapacity: 10_000, preferredMemoryUsageAfterPurge: 6_000)

        DispatchQueue.concurrentPerform(iterations: 400) { index in
            cache.add(Data(repeating: 1, count: 100), withIdentifier: "k\(index % 150)")
            _ = cache.value(withIdentifier: "k\((index * 7) % 150)")
        }

        #expect(cache.memoryUsage <= 10_000)
        #expect(cache.memoryUsage == cache.count * 100)
    }
}
