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

    /// Listings without the index lock (no key has an expiry, so keys-only listings take no lock
    /// either) while two writers fill whole runs of keys (leaf splits), drain them (merges and
    /// emptied leaves) and churn single keys (overwrites, deletes; enough garbage that the arena
    /// and the ordered view are rebuilt now and then): ascending, descending and paginated, of
    /// prefixes and ranges, keys only and with values. Each listing is in order, without
    /// repeats, inside its range; it holds every key that was live for the whole listing and
    /// none that was dead for the whole of it; every value listed is one its key had. Then, with
    /// the writers stopped, every listing equals the model.
    func testUnlockedListingsRacingSplitsAndMerges() throws {
        let dir = TemporaryDirectory("cask-listing-unlocked-race")
        defer { dir.remove() }
        var options = CaskStore.Options()
        options.automaticCompaction = false
        let store = try CaskStore.open(at: dir.path, options: options)
        let runs = 40, runLength = 150, keyCount = runs * runLength
        @Sendable func key(_ i: Int) -> [UInt8] { Array(String(format: "race/%05d", i).utf8) }
        @Sendable func index(_ key: [UInt8]) -> Int? {
            guard key.count == 10, key.starts(with: Array("race/".utf8)) else { return nil }
            return Int(String(decoding: key.dropFirst(5), as: UTF8.self))
        }
        @Sendable func value(_ i: Int, _ version: Int) -> [UInt8] { key(i) + Array("=\(version)".utf8) }
        // Per key: the number of changes begun and ended (odd while one is under way), whether it
        // is live once the last change ended, and the version of the latest put begun.
        struct Model { var changes: [Int]; var live: [Bool]; var versions: [Int] }
        // Cask's pthread-based `Lock`, not a `Mutex`: the thread sanitizer sees it (ConcurrencyTests' `Problems`).
        let model = Lock(Model(changes: [Int](repeating: 0, count: keyCount), live: [Bool](repeating: false, count: keyCount),
                               versions: [Int](repeating: 0, count: keyCount)))
        let problems = Lock<[String]>([]), writerFailures = Lock<[String]>([])
        for i in 0..<keyCount where i % 3 != 0 {
            try store.put(key(i), value(i, 0))
            model.withLock { $0.live[i] = true }
        }
        _ = try store.keys(limit: 1)  // builds the ordered view
        let stop = Atomic(false)
        let writers = DispatchGroup()
        for writer in 0..<2 {
            DispatchQueue.global().async(group: writers) {
                var rng = SeededGenerator(seed: 0x21 &+ UInt64(writer))
                var version = 0
                func change(_ i: Int, put: Bool) {
                    version += 1
                    model.withLock {
                        $0.changes[i] += 1
                        if put { $0.versions[i] = version }
                    }
                    do {
                        if put { try store.put(key(i), value(i, version)) } else { try store.delete(key(i)) }
                    } catch {
                        writerFailures.withLock { $0.append("\(error)") }
                    }
                    model.withLock {
                        $0.live[i] = put
                        $0.changes[i] += 1
                    }
                }
                while !stop.load(ordering: .relaxed) {
                    // Each writer owns every other run, so the two never change one key at once.
                    let run = 2 * Int.random(in: 0..<(runs / 2), using: &rng) + writer
                    let keys = (run * runLength)..<((run + 1) * runLength)
                    switch Int.random(in: 0..<4, using: &rng) {
                    case 0: for i in keys { change(i, put: true) }
                    case 1: for i in keys { change(i, put: false) }
                    default:
                        for _ in 0..<60 { change(Int.random(in: keys, using: &rng), put: Int.random(in: 0..<3, using: &rng) > 0) }
                    }
                }
            }
        }
        let listers = DispatchGroup()
        let listings = Atomic(0)
        for lister in 0..<3 {
            DispatchQueue.global().async(group: listers) {
                var rng = SeededGenerator(seed: 0x2100 &+ UInt64(lister))
                func note(_ problem: String) { problems.withLock { if $0.count < 20 { $0.append(problem) } } }
                for round in 0..<80 {
                    let descending = Bool.random(using: &rng)
                    let order: KeyOrder = descending ? .descending : .ascending
                    // A prefix of 1, 10, 100 or 1,000 keys' names, or a range between two keys.
                    let low: Int, high: Int, range: KeyRange
                    if Bool.random(using: &rng) {
                        let digits = Int.random(in: 1...4, using: &rng)
                        let prefix = Array(key(Int.random(in: 0..<keyCount, using: &rng)).prefix(5 + digits))
                        var width = 1
                        for _ in digits..<5 { width *= 10 }
                        low = index(prefix + [UInt8](repeating: UInt8(ascii: "0"), count: 5 - digits))!
                        high = min(keyCount, low + width)
                        range = .prefix(prefix)
                    } else {
                        let a = Int.random(in: 0..<keyCount, using: &rng), b = Int.random(in: 0..<keyCount, using: &rng)
                        low = min(a, b)
                        high = max(a, b)
                        range = .from(key(low), to: key(high))
                    }
                    let before = model.withLock { ($0.changes, $0.live) }
                    var listed: [[UInt8]] = []
                    var values: [[UInt8]: [UInt8]] = [:]
                    do {
                        switch round % 4 {
                        case 0: listed = try store.keys(in: range, order: order)
                        case 1:
                            while true {
                                let page = try store.keys(in: range, after: listed.last, limit: 37, order: order)
                                listed += page
                                if page.count < 37 { break }
                            }
                        case 2: try store.forEachKey(in: range, order: order) { listed.append(Array($0)) }
                        default:
                            try store.forEach(in: range, order: order) { key, value in
                                listed.append(Array(key))
                                values[Array(key)] = Array(value)
                            }
                        }
                    } catch {
                        note("listing failed: \(error)")
                        continue
                    }
                    let after = model.withLock { ($0.changes, $0.versions) }
                    listings.add(1, ordering: .relaxed)
                    let pairs = zip(listed, listed.dropFirst())
                    if pairs.contains(where: { descending ? !$0.1.lexicographicallyPrecedes($0.0) : !$0.0.lexicographicallyPrecedes($0.1) }) {
                        note("out of order or repeated (\(order))")
                    }
                    var seen = Set<Int>()
                    for k in listed {
                        guard let i = index(k), i >= low, i < high else {
                            note("\(String(decoding: k, as: UTF8.self)) outside [\(low), \(high))")
                            continue
                        }
                        seen.insert(i)
                        if let v = values[k] {
                            let text = String(decoding: v, as: UTF8.self)
                            // A version the key had by the end; its latest if it did not change.
                            let unchanged = before.0[i] == after.0[i] && before.0[i] % 2 == 0
                            guard v.starts(with: k + Array("=".utf8)), let version = Int(text.dropFirst(11)),
                                  unchanged ? version == after.1[i] : version <= after.1[i] else {
                                note("value \(text) for \(String(decoding: k, as: UTF8.self))")
                                continue
                            }
                        }
                    }
                    for i in low..<high where before.0[i] == after.0[i] && before.0[i] % 2 == 0 {
                        // Unchanged for the whole listing: live, it is listed; dead, it is not.
                        if before.1[i] && !seen.contains(i) { note("key \(i), live throughout, missing (\(order), kind \(round % 4))") }
                        if !before.1[i] && seen.contains(i) { note("key \(i), dead throughout, listed (\(order), kind \(round % 4))") }
                    }
                }
            }
        }
        listers.wait()
        stop.store(true, ordering: .relaxed)
        writers.wait()
        XCTAssertEqual(writerFailures.withLock { $0 }, [])
        XCTAssertEqual(problems.withLock { $0 }, [])
        XCTAssertEqual(listings.load(ordering: .relaxed), 240)
        // Quiet now: every kind of listing is the model exactly.
        let (live, versions) = model.withLock { ($0.live, $0.versions) }
        let want = (0..<keyCount).filter { live[$0] }.map(key)
        XCTAssertTrue(try store.keys() == want)
        XCTAssertTrue(try store.keys(order: .descending) == want.reversed())
        XCTAssertEqual(try store.count(in: .prefix(Array("race/".utf8))), want.count)
        var entries: [[UInt8]] = []
        var wrongValues = 0
        try store.forEach(in: .prefix(Array("race/".utf8))) { k, v in
            entries.append(Array(k))
            if let i = index(Array(k)), Array(v) != value(i, versions[i]) { wrongValues += 1 }
        }
        XCTAssertTrue(entries == want)
        XCTAssertEqual(wrongValues, 0)
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
