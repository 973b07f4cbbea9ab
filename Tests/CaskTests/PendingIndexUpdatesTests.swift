import XCTest
@testable import Cask
import CaskTestSupport

/// Recovery's queue of index updates must hand them back in the order they came, whatever mix of
/// short keys (queued, copied) and long ones (applied at once, after everything before them).
final class PendingIndexUpdatesTests: XCTestCase {
    func testUpdatesComeOutInOrderWithTheirKeys() {
        var rng = SeededGenerator.fromEnvironment(fallback: 0x9E4D)
        let index = KeyIndex(hasher: KeyHasher(seed: 3))
        index.beginRecovery()
        for count in [0, 1, PendingIndexUpdates.depth - 1, PendingIndexUpdates.depth, 500] {
            let queue = PendingIndexUpdates()
            var sent: [(key: [UInt8], seq: UInt64)] = []
            var received: [(key: [UInt8], seq: UInt64)] = []
            for seq in 1...UInt64(max(count, 1)) where count > 0 {
                let length = Bool.random(using: &rng) && seq % 7 == 0
                    ? Int.random(in: (PendingIndexUpdates.maxQueuedKeyLength + 1)...1_000, using: &rng)
                    : Int.random(in: 1...PendingIndexUpdates.maxQueuedKeyLength, using: &rng)
                let key = rng.bytes(length)
                sent.append((key, seq))
                key.withUnsafeBytes { raw in
                    queue.add(key: raw, type: .put, seq: seq, expiresAt: nil,
                              location: RecordLocation(segmentID: 1, offset: UInt32(seq), length: 10), index: index) { update in
                        received.append((Array(update.key), update.seq))
                        XCTAssertEqual(update.location.offset, UInt32(update.seq))
                    }
                }
                // The queue holds at most `depth` updates.
                XCTAssertLessThanOrEqual(sent.count - received.count, PendingIndexUpdates.depth)
            }
            queue.drain { update in received.append((Array(update.key), update.seq)) }
            XCTAssertEqual(received.map(\.seq), sent.map(\.seq), "\(count) updates")
            XCTAssertTrue(zip(received, sent).allSatisfy { $0.key == $1.key }, "keys, \(count) updates")
            queue.drain { _ in XCTFail("drained twice") }
        }
    }
}
