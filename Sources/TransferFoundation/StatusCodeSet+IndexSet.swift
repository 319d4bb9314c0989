import Foundation
import Transfer

extension StatusCodeSet {
    /// The codes of `indexSet` (status codes as earlier releases took them).
    public init(_ indexSet: IndexSet) {
        self.init()
        for range in indexSet.rangeView { insert(integersIn: range) }
    }

    /// The codes as a Foundation `IndexSet`.
    public var indexSet: IndexSet {
        var result = IndexSet()
        for range in ranges { result.insert(integersIn: range) }
        return result
    }
}
