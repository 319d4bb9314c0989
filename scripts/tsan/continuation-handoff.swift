// ThreadSanitizer and Swift continuations: a handoff ordered by a lock is
// still reported as a race (scripts/tsan.supp says why). Reproduce with
//   swiftc -sanitize=thread -g -O scripts/tsan/continuation-handoff.swift -o /tmp/handoff
//   /tmp/handoff                                     # "WARNING: ThreadSanitizer: data race"
//   TSAN_OPTIONS=suppressions=$PWD/scripts/tsan.supp /tmp/handoff   # no report
// Every access to `box` and `pending` is under `cond`; the only unordered pair
// is inside the continuation (the result slot in the awaiting task's frame).
import Foundation
final class Box: @unchecked Sendable {
    let lock = NSLock()
    var c: UnsafeContinuation<Int, Never>?
}
let box = Box()
let cond = NSCondition()
nonisolated(unsafe) var pending = false   // guarded by `cond`
Thread.detachNewThread {
    while true {
        cond.lock()
        while !pending { cond.wait() }
        pending = false
        let c = box.c
        box.c = nil
        cond.unlock()
        c!.resume(returning: 1)
    }
}
func one() async -> Int {
    await withUnsafeContinuation { c in
        cond.lock()
        box.c = c
        pending = true
        cond.signal()
        cond.unlock()
    }
}
var total = 0
for _ in 0..<200000 { total += await one() }
print(total)
