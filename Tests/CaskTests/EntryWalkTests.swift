import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// `forEachEntry(in:after:order:_:)`: the entries `entries(in:)` returns, in the same order, each with
/// its expiry, compressed values expanded; expired keys left out; a body's error stops it as it is.
final class EntryWalkTests: XCTestCase {
    private struct Stop: Error {}

    func testVisitsWhatEntriesReturnsWithExpiries() throws {
        let dir = TemporaryDirectory("cask-entry-walk")
        var options = CaskStore.Options()
        options.maxSegmentSize = 64 << 10  // several segments
        let store = try CaskStore.open(at: dir.path, options: options)
        var rng = SeededGenerator(seed: 7)
        let future = CaskStore.nowMilliseconds() + 3_600_000
        for i in (0..<600).shuffled(using: &rng) {
            let key = Array("k/\(i)".utf8)
            let value = i % 4 == 0 ? [UInt8](repeating: UInt8(i % 251), count: 2_000) : rng.bytes(i % 50)  // some compress
            if i % 3 == 0 { try store.put(key, value, expiresAtMilliseconds: future + UInt64(i)) } else { try store.put(key, value) }
        }
        try store.put(Array("k/expired".utf8), [1], expiresAtMilliseconds: 1)
        try store.delete("k/5")

        for order in [KeyOrder.ascending, .descending] {
            var expected: [CaskStore.Entry] = []
            var entries = try store.entries(in: .prefix("k/"), order: order)
            while let entry = try entries.next() { expected.append(entry) }
            var walked: [CaskStore.Entry] = []
            try store.forEachEntry(in: .prefix("k/"), order: order) { key, value, expiresAt in
                walked.append(CaskStore.Entry(key: Array(key), value: Array(value), expiresAtMilliseconds: expiresAt))
            }
            XCTAssertEqual(walked.count, 599)
            XCTAssertEqual(walked, expected)
            XCTAssertEqual(walked.first { $0.key == Array("k/3".utf8) }?.expiresAtMilliseconds, future + 3)
            XCTAssertNil(walked.first { $0.key == Array("k/1".utf8) }?.expiresAtMilliseconds)
        }

        var visited = 0
        XCTAssertThrowsError(try store.forEachEntry { _, _, _ in
            visited += 1
            if visited == 10 { throw Stop() }
        }) { XCTAssertTrue($0 is Stop) }
        XCTAssertEqual(visited, 10)
        try store.close()
    }
}
