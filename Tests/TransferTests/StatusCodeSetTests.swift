import Foundation
import Testing
import Transfer
import TransferFoundation

@Suite("Status code sets")
struct StatusCodeSetTests {
    @Test("ranges merge when they overlap or touch, and stay sorted")
    func merging() {
        var codes = StatusCodeSet(300..<400)
        codes.insert(integersIn: 200..<250)
        codes.insert(404)
        codes.insert(integersIn: 250..<300)
        #expect(codes.ranges == [200..<400, 404..<405])
        codes.insert(integersIn: 100..<500)
        #expect(codes.ranges == [100..<500])
        #expect(codes.count == 400)
        #expect(StatusCodeSet().isEmpty)
    }

    @Test("contains, remove and union")
    func membership() {
        var codes: StatusCodeSet = [201, 204, 404]
        #expect(codes.contains(204) && !codes.contains(203) && !codes.contains(500))
        codes.formUnion(StatusCodeSet(200...299))
        #expect(codes.ranges == [200..<300, 404..<405])
        codes.remove(integersIn: 250..<260)
        codes.remove(404)
        #expect(codes.ranges == [200..<250, 260..<300])
        #expect(!codes.contains(255) && codes.contains(260) && codes.contains(249))
        #expect(Array(StatusCodeSet([3, 1, 2, 2])) == [1, 2, 3])
        #expect(StatusCodeSet(200..<300).union([404]).description == "200..<300, 404")
    }

    @Test("an IndexSet converts both ways (TransferFoundation)")
    func indexSetRoundTrip() {
        let indexes = IndexSet(200..<300).union(IndexSet([404, 405]))
        let codes = StatusCodeSet(indexes)
        #expect(codes.ranges == [200..<300, 404..<406])
        #expect(codes.indexSet == indexes)
    }
}
