import XCTest
@testable import Cask
import CaskTestSupport

/// The index's ordered view (``OrderedKeys`` inside ``KeyIndex``) against a sorted model: keys
/// that share long prefixes (heads tie, so comparisons read the arena), ascending and descending
/// fills (leaves split at their ends), deletes that merge and free leaves, the arena rebuilt, and
/// recovery's bulk build; every span shape, both directions.
final class OrderedIndexTests: XCTestCase {
    /// Each key's own location (from its bytes), so that a walk with locations shows it found the key's entry.
    private func location(of key: [UInt8]) -> RecordLocation {
        let hash = key.reduce(UInt32(2_166_136_261)) { ($0 ^ UInt32($1)) &* 16_777_619 }
        return RecordLocation(segmentID: 1 + hash % 7, offset: 64 + hash % 1_000_000, length: 40)
    }

    private func insert(_ index: KeyIndex, _ key: [UInt8]) { key.withUnsafeBytes { _ = index.upsert($0, location(of: key)) } }
    private func remove(_ index: KeyIndex, _ key: [UInt8]) { key.withUnsafeBytes { _ = index.remove($0) } }

    private func walk(_ index: KeyIndex, _ span: KeySpan, descending: Bool, limit: Int = .max) -> [[UInt8]] {
        var keys: [[UInt8]] = []
        index.walk(span, descending: descending) { key in
            keys.append(Array(key))
            return keys.count < limit
        }
        return keys
    }

    /// ``KeyIndex/walkLocations(_:descending:limit:_:)``: its keys (up to `limit`, or until the
    /// body stops it after `stopAfter`), each checked against the key's own location.
    private func walkLocations(_ index: KeyIndex, _ span: KeySpan, descending: Bool, limit: Int, stopAfter: Int = .max) -> [[UInt8]] {
        var keys: [[UInt8]] = []
        index.walkLocations(span, descending: descending, limit: limit) { key, found in
            XCTAssertLessThan(keys.count, min(limit, stopAfter), "called past its limit or after the body stopped it")
            XCTAssertEqual(found, location(of: Array(key)))
            keys.append(Array(key))
            return keys.count < stopAfter
        }
        return keys
    }

    /// What a walk of `span` must return, computed from the sorted model by comparisons alone.
    private func expected(_ sorted: [[UInt8]], _ span: KeySpan, descending: Bool) -> [[UInt8]] {
        func below(_ a: [UInt8], _ b: [UInt8]) -> Bool { a.lexicographicallyPrecedes(b) }
        let inside = sorted.filter { key in
            switch span.lower {
            case .unbounded: break
            case .included(let bound): if below(key, bound) { return false }
            case .excluded(let bound): if !below(bound, key) { return false }
            }
            switch span.upper {
            case .unbounded: return true
            case .included(let bound): return !below(bound, key)
            case .excluded(let bound): return below(key, bound)
            }
        }
        return descending ? inside.reversed() : inside
    }

    /// Keys like `drafts/<user>/<timestamp>` (shared prefixes, some longer than 32 bytes), short keys that differ from
    /// each other only in trailing zero bytes ("a", "a\0"), and 0xFF runs (prefix ends).
    private func randomKey(_ rng: inout SeededGenerator) -> [UInt8] {
        switch Int.random(in: 0..<5, using: &rng) {
        case 0: return Array("drafts/\(Int.random(in: 0..<20, using: &rng))/\(Int.random(in: 0..<2_000, using: &rng))".utf8)
        // Shared prefixes longer than a node keeps inline (32 bytes).
        case 4: return Array("tenants/organisation-0000042/projects/\(Int.random(in: 0..<3, using: &rng))/\(Int.random(in: 0..<3_000, using: &rng))".utf8)
        case 1: return [UInt8(ascii: "a")] + [UInt8](repeating: 0, count: Int.random(in: 0...9, using: &rng))
        case 2: return [0xFF, 0xFF] + rng.bytes(Int.random(in: 0...3, using: &rng))
        default: return rng.bytes(Int.random(in: 1...24, using: &rng))
        }
    }

    private func randomSpan(_ sorted: [[UInt8]], _ rng: inout SeededGenerator) -> KeySpan {
        func someKey() -> [UInt8] {
            if !sorted.isEmpty && Bool.random(using: &rng) { return sorted[Int.random(in: 0..<sorted.count, using: &rng)] }
            return randomKey(&rng)
        }
        func bound() -> KeySpan.Bound {
            switch Int.random(in: 0..<3, using: &rng) {
            case 0: return .unbounded
            case 1: return .included(someKey())
            default: return .excluded(someKey())
            }
        }
        switch Int.random(in: 0..<3, using: &rng) {
        case 0:
            let key = someKey()
            return KeySpan(prefix: Array(key.prefix(Int.random(in: 0...key.count, using: &rng))))
        case 1: return KeySpan(from: someKey(), to: Bool.random(using: &rng) ? someKey() : nil)
        default: return KeySpan(lower: bound(), upper: bound())
        }
    }

    private func checkSpans(_ index: KeyIndex, _ model: Set<[UInt8]>, _ rng: inout SeededGenerator, _ context: String) {
        index.checkOrderedView()
        let sorted = model.sorted { $0.lexicographicallyPrecedes($1) }
        XCTAssertTrue(walk(index, KeySpan(), descending: false) == sorted, "whole walk, \(context)")
        var wrong = 0
        for _ in 0..<100 {
            let span = randomSpan(sorted, &rng)
            let descending = Bool.random(using: &rng)
            let limit = Int.random(in: 1...50, using: &rng)
            let want = expected(sorted, span, descending: descending)
            if walk(index, span, descending: descending) != want { wrong += 1 }
            if walk(index, span, descending: descending, limit: limit) != Array(want.prefix(limit)) { wrong += 1 }
            // Located in batches of 16: limits and stops on either side of a batch's end.
            if walkLocations(index, span, descending: descending, limit: limit) != Array(want.prefix(limit)) { wrong += 1 }
            let stop = Int.random(in: 1...40, using: &rng)
            if walkLocations(index, span, descending: descending, limit: .max, stopAfter: stop) != Array(want.prefix(stop)) { wrong += 1 }
            // Resuming after the last key of a page gives the next page.
            if want.count > limit {
                let next = walk(index, span.resuming(after: want[limit - 1], descending: descending), descending: descending)
                if next != Array(want[limit...]) { wrong += 1 }
            }
        }
        XCTAssertEqual(wrong, 0, "spans that differ from the model, \(context)")
    }

    func testRandomUpdatesAndSpansAgainstASortedModel() {
        var rng = SeededGenerator.fromEnvironment(fallback: 0x0DE7)
        print("OrderedIndexTests.testRandomUpdatesAndSpansAgainstASortedModel seed \(rng.seed)")
        let index = KeyIndex(hasher: KeyHasher(seed: rng.next()), minimumCapacity: 16)
        index.buildOrderedView()
        var model = Set<[UInt8]>()
        for round in 1...6 {
            // Grow, then churn, then shrink: splits, shifts to neighbours, merges, freed leaves.
            let (inserts, removes) = round % 3 == 0 ? (20, 70) : round % 3 == 1 ? (80, 10) : (50, 45)
            for _ in 0..<8_000 {
                let key = randomKey(&rng)
                let roll = Int.random(in: 0..<100, using: &rng)
                if roll < inserts {
                    insert(index, key)
                    model.insert(key)
                } else if roll < inserts + removes, let victim = model.randomElement(using: &rng) {
                    remove(index, victim)
                    model.remove(victim)
                } else {
                    // An overwrite keeps the key's place.
                    if let existing = model.randomElement(using: &rng) { insert(index, existing) }
                }
            }
            checkSpans(index, model, &rng, "round \(round), \(model.count) keys")
        }
    }

    func testAscendingAndDescendingFillsAndMassDeletes() {
        var rng = SeededGenerator.fromEnvironment(fallback: 0xA5C)
        for descending in [false, true] {
            let index = KeyIndex(hasher: KeyHasher(seed: 9))
            index.buildOrderedView()
            var model = Set<[UInt8]>()
            let keys = (0..<8_000).map { Array(String(format: "user/%08d", $0).utf8) }
            for key in descending ? keys.reversed() : keys {
                insert(index, key)
                model.insert(key)
            }
            // Leaves split at their ends keep their entries: close to 12 bytes per key.
            index.checkOrderedView()
            checkSpans(index, model, &rng, descending ? "descending fill" : "ascending fill")
            // Every other key, then all but a few: leaves merge, then empty ones are freed and
            // the arena is rebuilt in key order.
            for (offset, key) in keys.enumerated() where offset % 2 == 0 {
                remove(index, key)
                model.remove(key)
            }
            checkSpans(index, model, &rng, "half deleted")
            for key in keys.shuffled(using: &rng).prefix(7_700) where model.contains(key) {
                remove(index, key)
                model.remove(key)
            }
            checkSpans(index, model, &rng, "nearly empty")
            for key in model {
                remove(index, key)
            }
            model.removeAll()
            checkSpans(index, model, &rng, "empty")
            for key in keys.prefix(100) { insert(index, key); model.insert(key) }
            checkSpans(index, model, &rng, "refilled")
        }
    }

    /// Recovery keeps no ordered view; one built after it sorts the table's keys (ties in the bytes
    /// after their shared prefix by the arena), and tombstones are not in it. A view built before
    /// some keys exist is kept up as they come; one built on an index that already holds keys
    /// (the store's first listing) sorts them.
    func testRecoveryBuildsTheOrderedViewOnce() {
        var rng = SeededGenerator.fromEnvironment(fallback: 0x5EC)
        let index = KeyIndex(hasher: KeyHasher(seed: 4))
        index.beginRecovery()
        var latest: [[UInt8]: (seq: UInt64, delete: Bool)] = [:]
        for seq in 1...20_000 as ClosedRange<UInt64> {
            let key = randomKey(&rng)
            let delete = Int.random(in: 0..<5, using: &rng) == 0
            _ = key.withUnsafeBytes { index.recover($0, location(of: key), seq: seq, isDelete: delete) }
            latest[key] = (seq, delete)
        }
        index.endRecovery()
        XCTAssertFalse(index.hasOrderedView)
        index.buildOrderedView()
        var model = Set(latest.filter { !$0.value.delete }.keys)
        XCTAssertEqual(index.count, model.count)
        checkSpans(index, model, &rng, "after recovery")
        // And it is kept up from then on.
        for _ in 0..<2_000 {
            let key = randomKey(&rng)
            insert(index, key)
            model.insert(key)
        }
        checkSpans(index, model, &rng, "after recovery and inserts")
    }

    func testPrefixSpanEnds() {
        XCTAssertEqual(KeySpan(prefix: []), KeySpan())
        XCTAssertEqual(KeySpan(prefix: [1, 2]), KeySpan(lower: .included([1, 2]), upper: .excluded([1, 3])))
        XCTAssertEqual(KeySpan(prefix: [1, 0xFF, 0xFF]), KeySpan(lower: .included([1, 0xFF, 0xFF]), upper: .excluded([2])))
        XCTAssertEqual(KeySpan(prefix: [0xFF]), KeySpan(lower: .included([0xFF]), upper: .unbounded))
    }

    /// The key order, compared a word at a time, against the byte order of Swift's arrays: keys of
    /// 0 to 40 bytes sharing prefixes of every length, differing in one byte of any value (the high
    /// bit set or not, where a signed or little-endian compare would go wrong), and prefixes of
    /// each other.
    func testKeyOrderIsTheByteOrder() {
        var rng = SeededGenerator.fromEnvironment(fallback: 0x0D4)
        for _ in 0..<20_000 {
            let a = rng.bytes(Int.random(in: 0...40, using: &rng))
            var b: [UInt8]
            switch Int.random(in: 0..<4, using: &rng) {
            case 0: b = rng.bytes(Int.random(in: 0...40, using: &rng))
            case 1:  // the same bytes but one
                b = a
                if !b.isEmpty { b[Int.random(in: 0..<b.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng) }
            case 2: b = Array(a.prefix(Int.random(in: 0...a.count, using: &rng)))  // a prefix of it
            default: b = a + rng.bytes(Int.random(in: 0...9, using: &rng))  // it and more
            }
            let expected = a.lexicographicallyPrecedes(b) ? -1 : (a == b ? 0 : 1)
            let order = a.withUnsafeBytes { a in b.withUnsafeBytes { OrderedKeys.compare(a, $0) } }
            XCTAssertEqual(order.signum(), expected, "\(a) against \(b)")
        }
    }
}
