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
        for count in [0, 1, PendingIndexUpdates.hintDepth - 1, PendingIndexUpdates.hintDepth, 500] {
            let queue = PendingIndexUpdates(index: index)
            var sent: [(key: [UInt8], seq: UInt64)] = []
            var received: [(key: [UInt8], seq: UInt64)] = []
            for seq in 1...UInt64(max(count, 1)) where count > 0 {
                let length = Bool.random(using: &rng) && seq % 7 == 0
                    ? Int.random(in: (PendingIndexUpdates.maxQueuedKeyLength + 1)...1_000, using: &rng)
                    : Int.random(in: 1...PendingIndexUpdates.maxQueuedKeyLength, using: &rng)
                let key = rng.bytes(length)
                sent.append((key, seq))
                key.withUnsafeBytes { raw in
                    // As recovery does: a key too long to queue is applied at once, after the queue.
                    guard raw.count <= PendingIndexUpdates.maxQueuedKeyLength else {
                        queue.drain { update in received.append((Array(update.key), update.seq)) }
                        return received.append((Array(raw), seq))
                    }
                    let due = queue.add(key: raw, type: .put, seq: seq, expiresAt: nil,
                                        location: RecordLocation(segmentID: 1, offset: UInt32(seq), length: 10))
                    if let due {
                        received.append((Array(due.key), due.seq))
                        XCTAssertEqual(due.location.offset, UInt32(due.seq))
                    }
                }
                // The queue holds at most `depth` updates.
                XCTAssertLessThanOrEqual(sent.count - received.count, PendingIndexUpdates.hintDepth)
            }
            queue.drain { update in received.append((Array(update.key), update.seq)) }
            XCTAssertEqual(received.map(\.seq), sent.map(\.seq), "\(count) updates")
            XCTAssertTrue(zip(received, sent).allSatisfy { $0.key == $1.key }, "keys, \(count) updates")
            queue.drain { _ in XCTFail("drained twice") }
        }
    }

    /// At depth 0 (a scan's records) every update comes straight back, with the caller's key bytes.
    func testDepthZeroHandsEachUpdateBack() {
        let index = KeyIndex(hasher: KeyHasher(seed: 3))
        let queue = PendingIndexUpdates(index: index, depth: 0)
        for seq in UInt64(1)...20 {
            let key = [UInt8](repeating: UInt8(seq), count: Int(seq) * 20)
            key.withUnsafeBytes { raw in
                let due = queue.add(key: raw, type: .put, seq: seq, expiresAt: nil, location: RecordLocation(segmentID: 1, offset: UInt32(seq), length: 10))
                XCTAssertEqual(due?.seq, seq)
                XCTAssertEqual(due?.key.baseAddress, raw.baseAddress)
            }
        }
        queue.drain { _ in XCTFail("nothing waits at depth 0") }
    }
}
