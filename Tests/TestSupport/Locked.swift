import Transfer

/// Shared test state behind the package's one lock wrapper, `Protected`
/// (a pthread mutex).
///
/// Not `Synchronization.Mutex`: on Linux it parks contended threads with raw
/// futex calls that ThreadSanitizer does not model, so `swift test
/// --sanitize=thread` reports false races on the state it guards (seen with
/// Swift 6.3.1). TestSupport runs under TSan in CI, so its shared state, and
/// every test's, lives in one of these.
package typealias Locked<Value> = Protected<Value>
