/// A set of HTTP status codes, kept as sorted ranges: the type of
/// ``ResponseSerializer/acceptableStatusCodes`` (AFNetworking's `NSIndexSet`).
///
/// Foundation's `IndexSet` is not in FoundationEssentials, so the core has its
/// own; TransferFoundation converts both ways (`StatusCodeSet(indexSet)`,
/// `indexSet`).
///
/// ```swift
/// var serializer = StringResponseSerializer()
/// serializer.acceptableStatusCodes = StatusCodeSet(200..<300).union([404])
/// ```
public struct StatusCodeSet: Sendable, Hashable, Sequence, ExpressibleByArrayLiteral, CustomStringConvertible {
    /// Sorted, disjoint and non-adjacent.
    public private(set) var ranges: [Range<Int>] = []

    /// The empty set.
    public init() {}

    /// The codes of `range`.
    public init(_ range: Range<Int>) { insert(integersIn: range) }

    /// The codes of `range`.
    public init(_ range: ClosedRange<Int>) { insert(integersIn: Range(range)) }

    /// The codes of `range` (`IndexSet(integersIn:)`'s spelling).
    public init(integersIn range: Range<Int>) { insert(integersIn: range) }

    /// The codes of `codes`.
    public init<S: Sequence>(_ codes: S) where S.Element == Int {
        for code in codes { insert(code) }
    }

    /// The listed codes.
    public init(arrayLiteral codes: Int...) { self.init(codes) }

    /// Whether no code is in the set.
    public var isEmpty: Bool { ranges.isEmpty }

    /// How many codes the set holds.
    public var count: Int { ranges.reduce(0) { $0 + $1.count } }

    /// Whether `code` is in the set.
    public func contains(_ code: Int) -> Bool {
        // Binary search for the last range starting at or before `code`.
        var low = 0
        var high = ranges.count
        while low < high {
            let middle = (low + high) / 2
            if ranges[middle].lowerBound <= code { low = middle + 1 } else { high = middle }
        }
        return low > 0 && ranges[low - 1].contains(code)
    }

    /// Adds `code`.
    public mutating func insert(_ code: Int) {
        guard code < Int.max else { return }
        insert(integersIn: code..<(code + 1))
    }

    /// Adds every code of `range`.
    public mutating func insert(integersIn range: Range<Int>) {
        guard !range.isEmpty else { return }
        var lower = range.lowerBound
        var upper = range.upperBound
        var merged: [Range<Int>] = []
        merged.reserveCapacity(ranges.count + 1)
        var placed = false
        for existing in ranges {
            if existing.upperBound < lower {
                merged.append(existing)
            } else if existing.lowerBound > upper {
                if !placed {
                    merged.append(lower..<upper)
                    placed = true
                }
                merged.append(existing)
            } else {
                // Overlapping or adjacent: absorb it.
                lower = Swift.min(lower, existing.lowerBound)
                upper = Swift.max(upper, existing.upperBound)
            }
        }
        if !placed { merged.append(lower..<upper) }
        ranges = merged
    }

    /// Removes `code`.
    public mutating func remove(_ code: Int) {
        guard code < Int.max else { return }
        remove(integersIn: code..<(code + 1))
    }

    /// Removes every code of `range`.
    public mutating func remove(integersIn range: Range<Int>) {
        guard !range.isEmpty else { return }
        var kept: [Range<Int>] = []
        kept.reserveCapacity(ranges.count + 1)
        for existing in ranges {
            if existing.upperBound <= range.lowerBound || existing.lowerBound >= range.upperBound {
                kept.append(existing)
                continue
            }
            if existing.lowerBound < range.lowerBound { kept.append(existing.lowerBound..<range.lowerBound) }
            if existing.upperBound > range.upperBound { kept.append(range.upperBound..<existing.upperBound) }
        }
        ranges = kept
    }

    /// The codes of both sets.
    public func union(_ other: StatusCodeSet) -> StatusCodeSet {
        var result = self
        result.formUnion(other)
        return result
    }

    /// Adds the codes of `other`.
    public mutating func formUnion(_ other: StatusCodeSet) {
        for range in other.ranges { insert(integersIn: range) }
    }

    /// The codes in ascending order.
    public func makeIterator() -> FlattenSequence<[Range<Int>]>.Iterator {
        ranges.joined().makeIterator()
    }

    /// The ranges, as `200..<300, 404`.
    public var description: String {
        ranges.map { $0.count == 1 ? String($0.lowerBound) : "\($0.lowerBound)..<\($0.upperBound)" }
            .joined(separator: ", ")
    }
}
