import XCTest
@testable import Cask
import CaskTestSupport

/// The in-memory index checked against a `Dictionary` model, in normal and recovery mode.
final class KeyIndexTests: XCTestCase {
    private typealias Model = [[UInt8]: RecordLocation]

    private func lookup(_ index: KeyIndex, _ key: [UInt8]) -> RecordLocation? {
        key.withUnsafeBytes { index.lookup($0) }
    }

    private func randomLocation(_ rng: inout SeededGenerator) -> RecordLocation {
        // Record lengths stay below 2^29, as every record's does (the index uses the top bits).
        RecordLocation(
            segmentID: UInt32.random(in: 0..<UInt32.max, using: &rng),
            offset: UInt32.random(in: 0...UInt32.max, using: &rng),
            length: UInt32.random(in: 1..<(1 << 29), using: &rng))
    }

    /// Keys of 1 to 300 bytes: a third short (collide often), a third medium, a third long.
    private func randomKey(_ rng: inout SeededGenerator) -> [UInt8] {
        switch Int.random(in: 0..<3, using: &rng) {
        case 0: rng.bytes(Int.random(in: 1...3, using: &rng))
        case 1: rng.bytes(Int.random(in: 4...64, using: &rng))
        default: rng.bytes(Int.random(in: 65...300, using: &rng))
        }
    }

    private func assertMatches(_ index: KeyIndex, _ model: Model, _ context: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(index.count, model.count, "count, \(context)", file: file, line: line)
        XCTAssertEqual(index.totalKeyBytes, model.keys.reduce(0) { $0 + $1.count }, "key bytes, \(context)", file: file, line: line)
        var seen: Model = [:]
        var duplicates = 0
        index.forEach { key, location in
            if seen.updateValue(location, forKey: Array(key)) != nil { duplicates += 1 }
        }
        XCTAssertEqual(duplicates, 0, "forEach repeats keys, \(context)", file: file, line: line)
        XCTAssertTrue(seen == model, "forEach differs from the model (\(seen.count) vs \(model.count) keys), \(context)", file: file, line: line)
        var wrong = 0
        for (key, location) in model where lookup(index, key) != location { wrong += 1 }
        XCTAssertEqual(wrong, 0, "lookups differ from the model, \(context)", file: file, line: line)
        // The probe without the lock takes the same path on the published table.
        var unlike = 0
        for key in model.keys {
            let (probable, unlocked) = key.withUnsafeBytes { (index.probableLocation($0), index.probableLocationWithoutLock($0)) }
            if unlocked != probable.map({ .location($0) }) ?? .absent { unlike += 1 }
        }
        XCTAssertEqual(unlike, 0, "probes without the lock differ from probes with it, \(context)", file: file, line: line)
        // The ordered view (built here if the test has not yet): well formed, and the same keys in
        // byte order, both ways.
        index.buildOrderedView()
        index.checkOrderedView()
        let sorted = model.keys.sorted { $0.lexicographicallyPrecedes($1) }
        var walked: [[UInt8]] = [], locations = 0
        index.walkLocations(KeySpan(), descending: false, limit: .max) { key, location in
            walked.append(Array(key))
            if model[Array(key)] == location { locations += 1 }
            return true
        }
        XCTAssertTrue(walked == sorted, "ascending walk differs from the sorted model (\(walked.count) keys), \(context)", file: file, line: line)
        XCTAssertEqual(locations, model.count, "walk locations, \(context)", file: file, line: line)
        walked = []
        index.walk(KeySpan(), descending: true) { walked.append(Array($0)); return true }
        XCTAssertTrue(walked == sorted.reversed(), "descending walk differs from the sorted model, \(context)", file: file, line: line)
    }

    // MARK: Normal mode

    func testRandomOperationsAgainstADictionary() {
        var rng = SeededGenerator.fromEnvironment(fallback: 0x1DE7)
        print("KeyIndexTests.testRandomOperationsAgainstADictionary seed \(rng.seed)")
        let index = KeyIndex(hasher: KeyHasher(seed: rng.next()), minimumCapacity: 16)
        index.buildOrderedView()  // kept up by every update from here on
        var model: Model = [:]
        var keys: [[UInt8]] = []  // every key ever used, so that removed keys come back

        func pickKey(fresh: Int) -> [UInt8] {
            if keys.isEmpty || Int.random(in: 0..<100, using: &rng) < fresh {
                let key = randomKey(&rng)
                keys.append(key)
                return key
            }
            return keys[Int.random(in: 0..<keys.count, using: &rng)]
        }

        func step(upsert: Int, remove: Int, fresh: Int) {
            let roll = Int.random(in: 0..<100, using: &rng)
            if roll < upsert {
                let key = pickKey(fresh: fresh)
                let location = randomLocation(&rng)
                let old = key.withUnsafeBytes { index.upsert($0, location) }
                XCTAssertEqual(old, model.updateValue(location, forKey: key))
            } else if roll < upsert + remove {
                let key = pickKey(fresh: 5)
                let old = key.withUnsafeBytes { index.remove($0) }
                XCTAssertEqual(old, model.removeValue(forKey: key))
            } else if roll < upsert + remove + (100 - upsert - remove) / 2 {
                let key = pickKey(fresh: 10)
                XCTAssertEqual(lookup(index, key), model[key])
            } else {
                let key = pickKey(fresh: 5)
                let current = model[key]
                let expected = current != nil && Bool.random(using: &rng) ? current! : randomLocation(&rng)
                // A switch moves a record whole: the copy has the same length.
                let moved = randomLocation(&rng)
                let location = RecordLocation(segmentID: moved.segmentID, offset: moved.offset, length: expected.length)
                let swapped = key.withUnsafeBytes { index.switchLocation($0, from: expected, to: location) }
                XCTAssertEqual(swapped, current == expected, "switchLocation")
                if swapped { model[key] = location }
            }
        }

        // Grow: mostly new keys, forcing many resizes and several arena chunks.
        for i in 1...30_000 {
            step(upsert: 75, remove: 8, fresh: 70)
            if i % 10_000 == 0 { assertMatches(index, model, "grow \(i)") }
        }
        XCTAssertGreaterThan(model.count, 10_000)
        let grownMemory = index.memoryBytes, grownKeyBytes = index.totalKeyBytes
        // Shrink: remove almost everything; the deleted keys' arena bytes must be reclaimed.
        var removals = 0
        while model.count > 300 {
            let key = model.keys.first!
            XCTAssertEqual(key.withUnsafeBytes { index.remove($0) }, model.removeValue(forKey: key))
            removals += 1
            if removals % 50 == 0 { step(upsert: 20, remove: 40, fresh: 10) }
        }
        assertMatches(index, model, "shrunk")
        // Without compaction nothing would shrink: the table and the entries keep their size.
        XCTAssertLessThan(index.memoryBytes, grownMemory - (grownKeyBytes - index.totalKeyBytes) / 2,
                          "arena not compacted after removing most keys")
        // Churn: a small working set revisited over and over (deleted slots, reused entries).
        keys = Array(model.keys) + (0..<2_000).map { _ in randomKey(&rng) }
        for i in 1...30_000 {
            step(upsert: 40, remove: 30, fresh: 1)
            if i % 10_000 == 0 { assertMatches(index, model, "churn \(i)") }
        }
        // Absent keys stay absent.
        for _ in 0..<1_000 {
            let key = randomKey(&rng)
            if model[key] == nil { XCTAssertNil(lookup(index, key)) }
        }
        // Empty it completely, then fill again.
        for key in Array(model.keys) {
            XCTAssertEqual(key.withUnsafeBytes { index.remove($0) }, model.removeValue(forKey: key))
        }
        assertMatches(index, model, "emptied")
        for _ in 0..<5_000 { step(upsert: 90, remove: 5, fresh: 50) }
        assertMatches(index, model, "refilled")
    }

    /// The smallest table (two groups of 8) kept at its highest load while keys come and go: probe
    /// paths run through full groups and wrap around, and removals leave deleted slots that only
    /// a rehash clears.
    func testSmallestTableUnderChurnAtFullLoad() {
        var rng = SeededGenerator.fromEnvironment(fallback: 0x7A8)
        let index = KeyIndex(hasher: KeyHasher(seed: rng.next()), minimumCapacity: 1)
        var model: Model = [:]
        let keys = (0..<40).map { _ in rng.bytes(Int.random(in: 1...24, using: &rng)) }
        for step in 1...20_000 {
            let key = keys[Int.random(in: 0..<keys.count, using: &rng)]
            if model.count < 13 || (model[key] != nil && Bool.random(using: &rng)) {
                let location = randomLocation(&rng)
                XCTAssertEqual(key.withUnsafeBytes { index.upsert($0, location) }, model.updateValue(location, forKey: key))
            } else {
                XCTAssertEqual(key.withUnsafeBytes { index.remove($0) }, model.removeValue(forKey: key))
            }
            // A probable location is the key's own or nil for an absent key; another key's entry
            // with the same 7-bit tag may come first, which the read path's key check catches.
            let probable = key.withUnsafeBytes { index.probableLocation($0) }
            if model[key] == nil { XCTAssertTrue(probable == nil || model.values.contains(probable!)) }
            if step % 1_000 == 0 { assertMatches(index, model, "step \(step)") }
        }
        assertMatches(index, model, "end")
        // Deleted slots are cleared by rehashing in place, not by growing without end: 13 keys need
        // at most 3 groups at the load a rehash aims for.
        XCTAssertLessThanOrEqual(index.slotCount, 24)
    }

    /// The index keeps record lengths in 29 bits: the largest record the format allows must fit.
    func testTheLargestRecordFitsTheIndexLengthField() {
        XCTAssertLessThan(Limits.maxRecordLength, 1 << 29)
    }

    /// Recovery sizes the table for every record the hints list, dead ones included; what it does
    /// not need is given back at the end, and nothing is lost doing so.
    func testRecoveryGivesBackTheRoomDeadRecordsTookUp() {
        let index = KeyIndex(hasher: KeyHasher(seed: 5))
        index.reserve(400_000)
        index.beginRecovery()
        var model: Model = [:]
        for i in 0..<20_000 {
            let key = Array("key-\(i % 5_000)".utf8)
            let location = RecordLocation(segmentID: 1, offset: UInt32(i), length: 50)
            _ = key.withUnsafeBytes { index.recover($0, location, seq: UInt64(i + 1), isDelete: false) }
            model[key] = location
        }
        let reserved = index.slotCount
        index.endRecovery()
        XCTAssertLessThan(index.slotCount, reserved / 10, "the table keeps its recovery size")
        XCTAssertGreaterThanOrEqual(index.slotCount * 7, model.count * 8)
        assertMatches(index, model, "after shrinking")
    }

    func testPrimeGroupCounts() {
        func isPrime(_ n: Int) -> Bool { n >= 2 && !(2..<n).contains { $0 * $0 <= n && n % $0 == 0 } }
        for n in 0...300 {
            let prime = KeyIndex.prime(atLeast: n)
            XCTAssertTrue(isPrime(prime), "\(prime) for \(n)")
            XCTAssertGreaterThanOrEqual(prime, n)
            XCTAssertFalse((max(n, 2)..<prime).contains(where: isPrime), "a smaller prime than \(prime) for \(n)")
        }
        XCTAssertEqual(KeyIndex.prime(atLeast: 1_000_000), 1_000_003)
        XCTAssertEqual(KeyIndex.prime(atLeast: 536_870_909), 536_870_909)
    }

    func testExtremeKeyLengths() {
        var rng = SeededGenerator(seed: 0xBEEF)
        let index = KeyIndex(hasher: KeyHasher(seed: 1), minimumCapacity: 4)
        var model: Model = [:]
        // Every 1-byte key, keys that are prefixes of each other, and maximum-length keys that
        // straddle arena chunk boundaries.
        for byte in 0...255 { model[[UInt8(byte)]] = randomLocation(&rng) }
        let long = rng.bytes(Limits.maxKeyLength)
        for length in [2, 15, 16, 17, 127, 128, 129, 16_383, 16_384, 65_534, 65_535] { model[Array(long.prefix(length))] = randomLocation(&rng) }
        for i in 0..<60 {
            var key = rng.bytes(Limits.maxKeyLength - Int.random(in: 0..<3, using: &rng))
            key[0] = UInt8(i)
            model[key] = randomLocation(&rng)
        }
        for (key, location) in model { _ = key.withUnsafeBytes { index.upsert($0, location) } }
        assertMatches(index, model, "inserted")
        // Remove the long keys (more than 1 MiB of garbage), forcing arena compaction.
        for key in Array(model.keys) where key.count > 60_000 {
            XCTAssertEqual(key.withUnsafeBytes { index.remove($0) }, model.removeValue(forKey: key))
        }
        assertMatches(index, model, "long keys removed")
        XCTAssertLessThan(index.memoryBytes, 3 << 20)
    }

    // MARK: Recovery mode

    private struct Record {
        var key: [UInt8]
        var location: RecordLocation
        var seq: UInt64
        var isDelete: Bool
    }

    func testRecoveryKeepsTheNewestRecordInAnyOrder() {
        var rng = SeededGenerator.fromEnvironment(fallback: 0x5EC0)
        print("KeyIndexTests.testRecoveryKeepsTheNewestRecordInAnyOrder seed \(rng.seed)")
        for round in 0..<3 {
            var records: [Record] = []
            var keySet = Set<[UInt8]>()
            while keySet.count < 8_000 { keySet.insert(randomKey(&rng)) }
            for key in keySet {
                for _ in 0..<Int.random(in: 1...5, using: &rng) {
                    records.append(Record(key: key, location: randomLocation(&rng), seq: 0, isDelete: Int.random(in: 0..<10, using: &rng) < 3))
                }
            }
            // Unique sequence numbers in random order.
            var seqs = Array(1...UInt64(records.count)).map { $0 * 2 }
            seqs.shuffle(using: &rng)
            for i in records.indices { records[i].seq = seqs[i] }
            records.shuffle(using: &rng)

            let index = KeyIndex(hasher: KeyHasher(seed: rng.next()), minimumCapacity: 16)
            index.beginRecovery()
            var newest: [[UInt8]: Record] = [:]
            for record in records {
                let outcome = record.key.withUnsafeBytes { index.recover($0, record.location, seq: record.seq, isDelete: record.isDelete) }
                let expected: KeyIndex.RecoveryOutcome
                if let known = newest[record.key] {
                    expected = record.seq > known.seq ? .replaced(known.location, wasDelete: known.isDelete) : .superseded
                } else {
                    expected = .inserted
                }
                XCTAssertEqual(outcome, expected)
                if expected != .superseded { newest[record.key] = record }
                // The same record seen twice (a hint and a scan of the same segment) changes nothing.
                if Int.random(in: 0..<20, using: &rng) == 0 {
                    XCTAssertEqual(record.key.withUnsafeBytes { index.recover($0, record.location, seq: record.seq, isDelete: record.isDelete) }, .superseded)
                }
            }
            let live = newest.filter { !$0.value.isDelete }.mapValues(\.location)
            let deleted = newest.filter { $0.value.isDelete }
            XCTAssertGreaterThan(deleted.count, 100)
            XCTAssertEqual(index.count, live.count, "round \(round)")
            for (key, record) in newest { XCTAssertEqual(lookup(index, key), record.isDelete ? nil : record.location) }
            var tombstones: [RecordLocation] = []
            index.forEachTombstone { tombstones.append($0) }
            XCTAssertEqual(Set(tombstones), Set(deleted.values.map(\.location)), "tombstones, round \(round)")

            index.endRecovery()
            assertMatches(index, live, "after recovery, round \(round)")
            var after: [RecordLocation] = []
            index.forEachTombstone { after.append($0) }
            XCTAssertTrue(after.isEmpty)
            // Normal operation afterwards: deleted keys can come back, live keys can go.
            var model = live
            for (key, _) in deleted.prefix(500) {
                let location = randomLocation(&rng)
                XCTAssertNil(key.withUnsafeBytes { index.upsert($0, location) })
                model[key] = location
            }
            for key in Array(live.keys.prefix(500)) {
                XCTAssertEqual(key.withUnsafeBytes { index.remove($0) }, model.removeValue(forKey: key))
            }
            assertMatches(index, model, "after normal operations, round \(round)")
        }
    }

    func testRecoveryDeleteShadowsOlderPutSeenLater() {
        let index = KeyIndex(hasher: KeyHasher(seed: 3))
        let key = Array("k".utf8)
        let put = RecordLocation(segmentID: 1, offset: 40, length: 20)
        let delete = RecordLocation(segmentID: 2, offset: 40, length: 12)
        let newerPut = RecordLocation(segmentID: 3, offset: 40, length: 20)
        index.beginRecovery()
        key.withUnsafeBytes { key in
            XCTAssertEqual(index.recover(key, delete, seq: 10, isDelete: true), .inserted)
            XCTAssertEqual(index.count, 0)
            XCTAssertNil(index.lookup(key))
            XCTAssertEqual(index.recover(key, put, seq: 5, isDelete: false), .superseded)
            XCTAssertNil(index.lookup(key))
            XCTAssertEqual(index.recover(key, newerPut, seq: 11, isDelete: false), .replaced(delete, wasDelete: true))
            XCTAssertEqual(index.lookup(key), newerPut)
            XCTAssertEqual(index.count, 1)
            XCTAssertEqual(index.recover(key, delete, seq: 12, isDelete: true), .replaced(newerPut, wasDelete: false))
            XCTAssertEqual(index.count, 0)
        }
        index.endRecovery()
        XCTAssertEqual(index.count, 0)
        XCTAssertEqual(index.totalKeyBytes, 0)
        XCTAssertNil(lookup(index, key))
    }

    /// Two records with one seq (a compaction's copy and its original): the later position wins,
    /// whichever is seen first, so a reopen after a compaction reads what was read before it.
    func testRecoveryBreaksSeqTiesByPositionInAnyOrder() {
        let key = Array("k".utf8)
        let original = RecordLocation(segmentID: 2, offset: 4_096, length: 20)
        let sameSegmentLater = RecordLocation(segmentID: 2, offset: 8_192, length: 20)
        let copy = RecordLocation(segmentID: 9, offset: 40, length: 20)
        for order in [[original, sameSegmentLater, copy], [copy, sameSegmentLater, original], [sameSegmentLater, copy, original]] {
            let index = KeyIndex(hasher: KeyHasher(seed: 5))
            index.beginRecovery()
            key.withUnsafeBytes { key in
                for location in order { index.recover(key, location, seq: 7, isDelete: false) }
                XCTAssertEqual(index.recover(key, copy, seq: 7, isDelete: false), .superseded, "the winner seen again")
                XCTAssertEqual(index.recover(key, original, seq: 6, isDelete: false), .superseded)
            }
            index.endRecovery()
            XCTAssertEqual(lookup(index, key), copy, "order \(order)")
        }
    }

    // MARK: Memory

    /// Memory per key beyond the key bytes: the target is at most 32 bytes.
    func testMemoryOverheadPerKeyForAMillion16ByteKeys() {
        let total = 1_000_000
        let index = KeyIndex(hasher: KeyHasher(seed: 11))
        index.buildOrderedView()
        var worst = (keys: 0, overhead: 0.0)
        for i in 0..<total {
            var key = (UInt64(i).littleEndian, (UInt64(i) &* 0x9E37_79B9_7F4A_7C15).littleEndian)
            withUnsafeBytes(of: &key) { raw in
                _ = index.upsert(raw, RecordLocation(segmentID: 1, offset: UInt32(i), length: 100))
            }
            let count = i + 1
            // The figure must hold at every size, not just at the end: the table grows in steps and
            // is at its emptiest right after one. Allowed on top: the slack of the last, partly
            // filled arena chunk (256 KiB), which shrinks as keys are added.
            if count >= 400_000 && count % 5_000 == 0 {
                let overhead = Double(index.memoryBytes - index.totalKeyBytes - (256 << 10)) / Double(count)
                if overhead > worst.overhead { worst = (count, overhead) }
            }
        }
        XCTAssertEqual(index.count, total)
        XCTAssertEqual(index.totalKeyBytes, 16 * total)
        let overhead = Double(index.memoryBytes - index.totalKeyBytes) / Double(total)
        print("KeyIndex: \(index.memoryBytes) bytes for \(total) 16-byte keys: \(overhead) bytes of overhead per key; worst from 400k, less 256 KiB of chunk slack: \(worst)")
        // The ordered view adds 12 bytes per key at its leaves' fill (about 80% under random
        // inserts): while the table grows, up to about 45 bytes in all.
        XCTAssertLessThanOrEqual(overhead, 48)
        XCTAssertLessThanOrEqual(worst.overhead, 48, "at \(worst.keys) keys")
        // As an open and a first listing build it (the table sized for its keys, the leaves filled
        // to 60 of 64): at most 40 bytes.
        let reopened = KeyIndex(hasher: KeyHasher(seed: 12))
        reopened.reserve(total)
        reopened.beginRecovery()
        for i in 0..<total {
            var key = (UInt64(i).littleEndian, (UInt64(i) &* 0x9E37_79B9_7F4A_7C15).littleEndian)
            withUnsafeBytes(of: &key) { raw in
                _ = reopened.recover(raw, RecordLocation(segmentID: 1, offset: UInt32(i), length: 100), seq: UInt64(i), isDelete: false)
            }
        }
        reopened.endRecovery()
        reopened.buildOrderedView()
        let reopenedOverhead = Double(reopened.memoryBytes - reopened.totalKeyBytes) / Double(total)
        print("KeyIndex as an open builds it: \(reopenedOverhead) bytes of overhead per key")
        XCTAssertLessThanOrEqual(reopenedOverhead, 40)
        // Spot-check that the keys are all there.
        for i in stride(from: 0, to: total, by: 997) {
            var key = (UInt64(i).littleEndian, (UInt64(i) &* 0x9E37_79B9_7F4A_7C15).littleEndian)
            XCTAssertEqual(withUnsafeBytes(of: &key) { index.lookup($0) }?.offset, UInt32(i))
        }
    }
}
