// The core's JSON parser (JSONResponseSerializer.parse without JSON5: the
// strict RFC 8259 path that replaced JSONSerialization). Properties: no
// crash and no unbounded recursion on any input; an accepted text
// re-encodes (JSONRequestSerializer.encode) to text that parses to the same
// value, numbers compared by value (an integral double may come back as an
// int); a value without fragmentsAllowed is an array or an object.
import FuzzSupport
import Foundation
import Transfer

/// Equal values, with numbers compared as doubles.
func same(_ a: JSONValue, _ b: JSONValue) -> Bool {
    switch (a, b) {
    case (.int, .int), (.int, .double), (.double, .int), (.double, .double):
        return a.doubleValue == b.doubleValue
    case (.array(let x), .array(let y)):
        return x.count == y.count && zip(x, y).allSatisfy { same($0, $1) }
    case (.object(let x), .object(let y)):
        return x.count == y.count && x.allSatisfy { key, value in y[key].map { same(value, $0) } ?? false }
    default:
        return a == b
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = bytes(data, size)
    if let strict = try? JSONResponseSerializer.parse(input) {
        switch strict {
        case .array, .object: break
        default: require(false, "a fragment accepted without fragmentsAllowed")
        }
    }
    guard let value = try? JSONResponseSerializer.parse(input, options: [.fragmentsAllowed]) else { return 0 }
    let encoded: Data
    do {
        encoded = try JSONRequestSerializer.encode(value, options: [.fragmentsAllowed])
    } catch {
        require(false, "an accepted value does not encode: \(error)")
        return 0
    }
    do {
        let again = try JSONResponseSerializer.parse(encoded, options: [.fragmentsAllowed])
        require(same(value, again), "round trip changed \(value) into \(again)")
    } catch {
        require(false, "the encoding of an accepted value does not parse: \(error)")
    }
    return 0
}

@_cdecl("fuzz_json_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    runFuzzer(argc, argv, fuzz)
}
