import XCTest
import Synchronization
@testable import Cask
import CaskTestSupport

/// Gets without the store's lock: the reader registry's grace period, and probes of the index
/// while its one writer grows, changes and shrinks it (also run under the thread sanitizer).
final class LockFreeReadTests: XCTestCase {
    /// `waitForReaders()` returns only once the readers inside when it was called have left, and
    /// does not wait for readers that enter after it returned.
    func testWaitingForReadersWaitsForTheOnesInside() throws {
        let registry = ReaderRegistry()
        XCTAssertEqual(registry.readersInside, 0)
        let entered = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0), left = DispatchSemaphore(value: 0)
        for _ in 0..<3 {
            Thread.detachNewThread {
                registry.read {
                    entered.signal()
                    release.wait()  // a reader that stays inside (real ones never wait)
                }
                left.signal()
            }
        }
        for _ in 0..<3 { entered.wait() }
        XCTAssertEqual(registry.readersInside, 3)
        let waited = Atomic(false)
        let waiterDone = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            registry.waitForReaders()
            waited.store(true, ordering: .releasing)
            waiterDone.signal()
        }
        for remaining in (0..<3).reversed() {
            Thread.sleep(forTimeInterval: 0.05)
            XCTAssertFalse(waited.load(ordering: .acquiring), "returned with \(remaining + 1) readers inside")
            release.signal()
            left.wait()
        }
        XCTAssertEqual(waiterDone.wait(timeout: .now() + 10), .success)
        XCTAssertTrue(waited.load(ordering: .acquiring))
        XCTAssertEqual(registry.readersInside, 0)
        registry.waitForReaders()  // no reader inside: returns at once
    }

    /// Two threads probe the index without the lock while one writer inserts, overwrites and
    /// removes keys (growing the table many times from its smallest size, and compacting the arena).
    /// Keys the writer never touches are never absent; every location a probe returns is one the
    /// writer gave some key, where a torn pair (one update's place, another's length) counts too —
    /// the caller's record check rejects those, and another key's entry with the same hash bits.
    func testProbesWithoutTheLockBesideAWriterThatGrowsAndChangesTheTable() {
        // The test's threads share the index the way the store's do: one writer, readers without a lock.
        struct Shared: @unchecked Sendable { let index: KeyIndex }
        let index = KeyIndex(minimumCapacity: 8)
        let shared = Shared(index: index)
        let stable = (0..<64).map { Array("stable-\($0)".utf8) }
        @Sendable func stableLocation(_ i: Int) -> RecordLocation { RecordLocation(segmentID: 1, offset: UInt32(i) * 100, length: 50) }
        for (i, key) in stable.enumerated() { key.withUnsafeBytes { _ = index.upsert($0, stableLocation(i)) } }
        // A changing key's locations all have segment 2, and offset and length that are multiples
        // of 8 (so that a torn pair is recognisable as the writer's too).
        let changing = (0..<512).map { Array("changing-\($0)".utf8) }
        @Sendable func isGiven(_ location: RecordLocation) -> Bool {
            switch location.segmentID {
            case 1: location.offset % 100 == 0 && location.offset < 6400 && location.length == 50
            case 2: location.offset % 8 == 0 && location.length % 8 == 0
            default: false
            }
        }
        let stop = Atomic(false)
        let failures = Mutex<[String]>([])
        let done = DispatchGroup()
        for reader in 0..<2 {
            done.enter()
            Thread.detachNewThread {
                defer { done.leave() }
                let index = shared.index
                var rng = SeededGenerator(seed: 0x10CF + UInt64(reader))
                var probes = 0, collisions = 0
                while !stop.load(ordering: .relaxed) || probes < 10_000 {
                    probes += 1
                    let i = Int.random(in: 0..<stable.count, using: &rng)
                    // A probe returns the first entry on the path whose hash bits match: the key's
                    // own, or now and then another key's (which the record's key check rejects).
                    if case .location(let found) = stable[i].withUnsafeBytes({ index.probableLocationWithoutLock($0) }), isGiven(found) {
                        if found != stableLocation(i) { collisions += 1 }
                    } else {
                        failures.withLock { $0.append("stable key \(i) not found at a location given") }
                        return
                    }
                    let key = changing[Int.random(in: 0..<changing.count, using: &rng)]
                    switch key.withUnsafeBytes({ index.probableLocationWithoutLock($0) }) {
                    case .absent: break
                    case .location(let location):
                        if !isGiven(location) {
                            failures.withLock { $0.append("changing key at \(location)") }
                            return
                        }
                    case .unsure:
                        failures.withLock { $0.append("a tombstone outside recovery") }
                        return
                    }
                }
                // Collisions are rare (9 bits of hash): nearly every probe found the key's own entry.
                if collisions * 20 > probes { failures.withLock { $0.append("\(collisions) of \(probes) probes found another key") } }
            }
        }
        var rng = SeededGenerator(seed: 0xC4A6)
        for round in 0..<200 {
            for key in changing.shuffled(using: &rng) {
                let location = RecordLocation(segmentID: 2, offset: UInt32.random(in: 0..<1_000_000, using: &rng) * 8,
                                              length: UInt32.random(in: 1..<10_000, using: &rng) * 8)
                key.withUnsafeBytes {
                    if Bool.random(using: &rng) || round % 10 == 9 { index.remove($0) } else { _ = index.upsert($0, location) }
                }
            }
        }
        stop.store(true, ordering: .relaxed)
        done.wait()
        XCTAssertEqual(failures.withLock { $0.first }, nil)
        // Every probe above ran on a table that a later resize replaced, or on the last one.
        XCTAssertGreaterThan(index.slotCount, 512)
    }
}
