import XCTest
@testable import Cask
import CaskTestSupport

/// The store's listings (`keys(in:after:limit:order:)`, `count(in:)`, `forEachKey`, `forEach`)
/// against a sorted model through puts, overwrites, deletes, batches, expiring puts, compactions,
/// reopens and recovery after a kill-like close without hints; and listings racing writers.
final class ListingTests: XCTestCase {
    private typealias Model = [[UInt8]: [UInt8]]

    private func key(_ rng: inout SeededGenerator) -> [UInt8] {
        Array("drafts/\(Int.random(in: 0..<12, using: &rng))/\(Int.random(in: 0..<400, using: &rng))".utf8)
    }

    private func check(_ store: CaskStore, _ model: Model, _ rng: inout SeededGenerator, _ context: String) throws {
        let sorted = model.keys.sorted { $0.lexicographicallyPrecedes($1) }
        XCTAssertTrue(try store.keys() == sorted, "all keys, \(context)")
        XCTAssertEqual(try store.count(in: .all), sorted.count, context)
        var wrong = 0
        for _ in 0..<40 {
            let user = Int.random(in: 0..<13, using: &rng)
            let prefix = Array("drafts/\(user)/".utf8)
            let order: KeyOrder = Bool.random(using: &rng) ? .ascending : .descending
            var want = sorted.filter { $0.starts(with: prefix) }
            if order == .descending { want.reverse() }
            if try store.keys(prefix: prefix, order: order) != want { wrong += 1 }
            if try store.count(prefix: prefix) != want.count { wrong += 1 }
            // Pages of 7, each resuming after the last key of the one before.
            var paged: [[UInt8]] = []
            while true {
                let page = try store.keys(in: .prefix(prefix), after: paged.last, limit: 7, order: order)
                paged += page
                if page.count < 7 { break }
            }
            if paged != want { wrong += 1 }
            // A range between two keys, both bounds.
            let a = key(&rng), b = key(&rng)
            let (low, high) = a.lexicographicallyPrecedes(b) ? (a, b) : (b, a)
            let halfOpen = sorted.filter { !$0.lexicographicallyPrecedes(low) && $0.lexicographicallyPrecedes(high) }
            if try store.keys(in: .from(low, to: high)) != halfOpen { wrong += 1 }
            let closed = sorted.filter { !$0.lexicographicallyPrecedes(low) && !high.lexicographicallyPrecedes($0) }
            if try store.keys(in: .from(low, through: high)) != closed { wrong += 1 }
            // Keys lent without copies, and entries with their values, in the same order.
            var lent: [[UInt8]] = []
            try store.forEachKey(in: .prefix(prefix), order: order) { lent.append(Array($0)) }
            if lent != want { wrong += 1 }
            var entries: [([UInt8], [UInt8])] = []
            try store.forEach(in: .prefix(prefix), order: order) { key, value in entries.append((Array(key), Array(value))) }
            if entries.map(\.0) != want || entries.contains(where: { model[$0.0] != $0.1 }) { wrong += 1 }
        }
        XCTAssertEqual(wrong, 0, "listings that differ from the model, \(context)")
    }

    func testListingsAgainstASortedModel() throws {
        var rng = SeededGenerator.fromEnvironment(fallback: 0x115)
        print("ListingTests.testListingsAgainstASortedModel seed \(rng.seed)")
        let dir = TemporaryDirectory("cask-listing-model")
        defer { dir.remove() }
        var options = CaskStore.Options()
        options.maxSegmentSize = 64 << 10
        options.automaticCompaction = false
        var store = try CaskStore.open(at: dir.path, options: options)
        var model: Model = [:]
        for round in 0..<6 {
            for _ in 0..<1_500 {
                let k = key(&rng)
                switch Int.random(in: 0..<10, using: &rng) {
                case 0..<5:
                    let value = rng.bytes(Int.random(in: 0...40, using: &rng))
                    try store.put(k, value)
                    model[k] = value
                case 5, 6:
                    try store.delete(k)
                    model[k] = nil
                case 7:
                    var batch = WriteBatch()
                    let other = key(&rng)
                    batch.put(k, [1])
                    batch.delete(other)
                    try store.write(batch)
                    model[k] = [1]
                    model[other] = nil
                case 8:
                    // Expired at once: never listed.
                    try store.put(k, [2], expiresAtMilliseconds: 1)
                    model[k] = nil
                default:
                    if round == 0 { _ = try store.keys(prefix: Array("drafts/1/".utf8), limit: 3) }  // the view exists early
                }
            }
            try check(store, model, &rng, "round \(round)")
            switch round % 3 {
            case 0: _ = try store.compact()
            case 1:
                try store.close()
                store = try CaskStore.open(at: dir.path, options: options)
            default:
                // Reopened without hint files: recovery scans every record.
                try store.close()
                for name in try FileManager.default.contentsOfDirectory(atPath: dir.path) where name.hasSuffix(".hint") {
                    try FileManager.default.removeItem(atPath: dir.appending(name))
                }
                store = try CaskStore.open(at: dir.path, options: options)
            }
            try check(store, model, &rng, "round \(round), after \(["a compaction", "a reopen", "recovery"][round % 3])")
        }
        try store.close()
    }

    /// Listings while writers create and delete keys under the same prefix: each listing is in
    /// order without repeats, holds every key no writer touches, and never a key that was never
    /// written.
    func testListingsRacingWriters() throws {
        let dir = TemporaryDirectory("cask-listing-race")
        defer { dir.remove() }
        let store = try CaskStore.open(at: dir.path)
        let stable = (0..<500).map { Array(String(format: "list/stable/%04d", $0).utf8) }
        for key in stable { try store.put(key, [0]) }
        let stop = Atomic(false)
        let writers = DispatchGroup()
        for writer in 0..<2 {
            DispatchQueue.global().async(group: writers) {
                var rng = SeededGenerator(seed: UInt64(writer) + 7)
                while !stop.load(ordering: .relaxed) {
                    let key = Array(String(format: "list/moving/%d/%04d", writer, Int.random(in: 0..<300, using: &rng)).utf8)
                    if Bool.random(using: &rng) { try? store.put(key, [1]) } else { _ = try? store.delete(key) }
                }
            }
        }
        var problems: [String] = []
        for _ in 0..<200 {
            let keys = try store.keys(prefix: Array("list/".utf8))
            if zip(keys, keys.dropFirst()).contains(where: { !$0.0.lexicographicallyPrecedes($0.1) }) { problems.append("out of order or repeated") }
            let listed = Set(keys)
            if !stable.allSatisfy(listed.contains) { problems.append("a stable key missing") }
            if keys.contains(where: { !$0.starts(with: Array("list/stable/".utf8)) && !$0.starts(with: Array("list/moving/".utf8)) }) {
                problems.append("a key never written")
            }
        }
        stop.store(true, ordering: .relaxed)
        writers.wait()
        XCTAssertEqual(Array(Set(problems)), [])
        try store.close()
    }

    /// Every key and prefix parameter takes a `String` too (issue 23, item 3), with the same
    /// answers as its bytes; listings by a `String` prefix return `String` keys.
    func testStringKeysAndPrefixesEverywhere() async throws {
        let dir = TemporaryDirectory("cask-listing-strings")
        defer { dir.remove() }
        let store = try CaskStore.open(at: dir.path)
        let drafts = store.changes(prefix: "drafts/000007/")
        let token = store.changes(forKey: "session/token")
        for i in [3, 1, 2] { try store.put("drafts/000007/\(i)", Array("draft \(i)".utf8)) }
        try store.put("drafts/000008/1", [8])
        try store.put("session/token", [1], expiresAfter: .seconds(60))
        let keys: [String] = try store.keys(prefix: "drafts/000007/")
        XCTAssertEqual(keys, ["drafts/000007/1", "drafts/000007/2", "drafts/000007/3"])
        XCTAssertEqual(try store.keys(prefix: "drafts/000007/", after: "drafts/000007/3", order: .descending), ["drafts/000007/2", "drafts/000007/1"])
        XCTAssertEqual(try store.keys(prefix: "drafts/000007/", limit: 1), ["drafts/000007/1"])
        XCTAssertEqual(try store.count(prefix: "drafts/000007/"), 3)
        var visited: [String] = []
        try store.forEach(prefix: "drafts/000007/", order: .descending) { key, _ in visited.append(String(decoding: key, as: UTF8.self)) }
        XCTAssertEqual(visited, keys.reversed())
        var entries = try store.entries(prefix: "drafts/000007/")
        XCTAssertEqual(try entries.next()?.value, Array("draft 1".utf8))
        let entry = try XCTUnwrap(try store.entry("session/token"))
        XCTAssertEqual(entry.value, [1])
        XCTAssertNotNil(entry.expiresAtMilliseconds)
        try store.close()
        var seen: [String] = []
        for await change in drafts { seen.append(String(decoding: change.key, as: UTF8.self)) }
        XCTAssertEqual(seen, ["drafts/000007/3", "drafts/000007/1", "drafts/000007/2"])
        var tokenChanges = 0
        for await _ in token { tokenChanges += 1 }
        XCTAssertEqual(tokenChanges, 1)
    }
}

import Synchronization
