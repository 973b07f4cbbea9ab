import Foundation
import Synchronization  // Atomic
import XCTest
@testable import Cask
import CaskTestSupport

/// `forEach(prefix:_:)` and `entries(prefix:)`: exactly the live entries, each once, with their exact
/// values — against a model, from the write buffer, through mappings and `pread`, across reopens and
/// compactions (also racing them), with damage, and with a body that throws.
final class IterationTests: XCTestCase {
    /// What an iteration saw: each key's value, and the keys seen more than once.
    private struct Visited {
        var values: [[UInt8]: [UInt8]] = [:]
        var repeated: [[UInt8]] = []

        mutating func add(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
            let key = Array(key)
            if values.updateValue(Array(value), forKey: key) != nil { repeated.append(key) }
        }
    }

    private func visit(_ store: CaskStore, prefix: [UInt8] = []) throws -> Visited {
        var visited = Visited()
        try store.forEach(prefix: prefix) { key, value in visited.add(key, value) }
        return visited
    }

    private static func name(_ key: [UInt8]) -> String { String(decoding: key, as: UTF8.self) }
    private func name(_ key: [UInt8]) -> String { Self.name(key) }

    /// Checks that `forEach` and `entries` visit exactly `model` (the keys under `prefix`), each once.
    private func assertVisits(
        _ store: CaskStore, _ model: [[UInt8]: [UInt8]], expiries: [[UInt8]: UInt64] = [:], prefix: [UInt8] = [],
        _ context: String, file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let expected = model.filter { $0.key.starts(with: prefix) }
        let visited = try visit(store, prefix: prefix)
        XCTAssertEqual(visited.repeated.map(name), [], "\(context): keys visited twice", file: file, line: line)
        XCTAssertEqual(visited.values.count, expected.count, "\(context): entries visited", file: file, line: line)
        for (key, value) in expected where visited.values[key] != value {
            XCTFail("\(context): \(name(key)) visited as \(visited.values[key].map { "\($0.count) bytes" } ?? "nothing"), expected \(value.count) bytes",
                    file: file, line: line)
        }
        for key in visited.values.keys where expected[key] == nil {
            XCTFail("\(context): \(name(key)) visited but not in the model", file: file, line: line)
        }
        // The cursor: the same entries, with their expiry.
        var entries = try store.entries(prefix: prefix)
        var seen: [[UInt8]: CaskStore.Entry] = [:]
        while let entry = try entries.next() {
            XCTAssertNil(seen.updateValue(entry, forKey: entry.key), "\(context): entries() gave \(name(entry.key)) twice", file: file, line: line)
        }
        let expectedEntries = expected.mapValues { CaskStore.Entry(key: [], value: $0) }
        XCTAssertEqual(Set(seen.keys), Set(expectedEntries.keys), "\(context): entries() keys", file: file, line: line)
        for (key, entry) in seen {
            XCTAssertEqual(entry.value, expected[key], "\(context): entries() value of \(name(key))", file: file, line: line)
            XCTAssertEqual(entry.expiresAtMilliseconds, expiries[key], "\(context): entries() expiry of \(name(key))", file: file, line: line)
        }
    }

    // MARK: Against a model

    func testModelWithReopensOS() throws {
        try runModel(durability: .os, fallbackSeed: 0x17E4)
    }

    func testModelWithReopensBuffered() throws {
        try runModel(durability: .buffered, fallbackSeed: 0xB1E4)
    }

    /// Random puts, overwrites, deletes, expiring and already expired puts and compactions against a
    /// dictionary, in small segments; every few hundred operations the iteration must visit exactly the
    /// model, then the store is reopened (with or without hints, mapped or read with `pread`, or read-only).
    private func runModel(durability: Durability, fallbackSeed: UInt64) throws {
        var rng = SeededGenerator.fromEnvironment(fallback: fallbackSeed)
        print("IterationTests \(durability): seed \(rng.seed) (replay with CASK_TEST_SEED=\(rng.seed))")
        let dir = TemporaryDirectory("cask-iteration-model")
        defer { dir.remove() }
        var keys = (0..<200).map { Array("user/\($0)".utf8) } + (0..<100).map { Array("item/\($0 * 7919)".utf8) }
        for _ in 0..<40 { keys.append(rng.bytes(Int.random(in: 1...40, using: &rng))) }
        keys.append(rng.bytes(3_000))
        keys = Array(Set(keys))
        var model: [[UInt8]: [UInt8]] = [:]
        var expiries: [[UInt8]: UInt64] = [:]
        var options = CaskStore.Options(durability: durability)
        options.maxSegmentSize = 16 << 10
        options.bufferSize = 6 << 10
        options.compactionMinDeadBytes = 32 << 10
        var store = try CaskStore.open(at: dir.path, options: options)
        var visits = 0
        for phase in 0..<12 {
            for _ in 0..<300 {
                let key = keys[Int.random(in: 0..<keys.count, using: &rng)]
                let roll = Int.random(in: 0..<100, using: &rng)
                switch roll {
                case 0..<55:
                    let value = randomValue(&rng)
                    try store.put(key, value)
                    model[key] = value
                    expiries[key] = nil
                case 55..<70:
                    _ = try store.delete(key)
                    model[key] = nil
                    expiries[key] = nil
                case 70..<80:
                    // Expires in an hour: visited, with its expiry.
                    let value = randomValue(&rng), at = CaskStore.nowMilliseconds() + 3_600_000
                    try store.put(key, value, expiresAtMilliseconds: at)
                    model[key] = value
                    expiries[key] = at
                case 80..<88:
                    // Expired already: never visited, and hides the key's older value.
                    try store.put(key, randomValue(&rng), expiresAtMilliseconds: CaskStore.nowMilliseconds() - 1_000)
                    model[key] = nil
                    expiries[key] = nil
                case 88..<90:
                    try store.compact()
                default:
                    XCTAssertEqual(try store.get(key), model[key], "get \(name(key))")
                }
            }
            try assertVisits(store, model, expiries: expiries, "phase \(phase), open")
            visits += 1
            let prefix = [Array("user/1".utf8), Array("item/".utf8), keys[0]][phase % 3]
            try assertVisits(store, model, expiries: expiries, prefix: prefix, "phase \(phase), prefix \(name(prefix))")
            try store.close()
            options.memoryMapping = Bool.random(using: &rng)
            switch Int.random(in: 0..<3, using: &rng) {
            case 0: try StoreFiles.removeHints(in: dir.path)
            case 1:
                var readOnly = options
                readOnly.readOnly = true
                let reader = try CaskStore.open(at: dir.path, options: readOnly)
                try assertVisits(reader, model, expiries: expiries, "phase \(phase), read-only (mapped: \(options.memoryMapping))")
                try reader.close()
            default: break
            }
            store = try CaskStore.open(at: dir.path, options: options)
            XCTAssertTrue(store.recoveryReport.isClean, "\(store.recoveryReport)")
            try assertVisits(store, model, expiries: expiries, "phase \(phase), reopened (mapped: \(options.memoryMapping))")
        }
        let segments = try store.statistics().segments.count
        XCTAssertGreaterThan(segments, 3, "segments should rotate")
        try store.close()
        print("IterationTests \(durability): \(visits) phases, \(model.count) keys at the end, \(segments) segments")
    }

    private func randomValue(_ rng: inout SeededGenerator) -> [UInt8] {
        let length = [0, Int.random(in: 1...400, using: &rng), Int.random(in: 400...3_000, using: &rng)][Int.random(in: 0..<3, using: &rng)]
        if Bool.random(using: &rng) {
            // Compressible: a short random pattern repeated, so it is stored with LZ4.
            let pattern = rng.bytes(Int.random(in: 1...8, using: &rng))
            return (0..<length).map { pattern[$0 % pattern.count] }
        }
        return rng.bytes(length)
    }

    // MARK: Prefixes

    func testPrefixSelectsExactlyTheKeysStartingWithIt() throws {
        let dir = TemporaryDirectory("cask-iteration-prefix")
        defer { dir.remove() }
        let store = try CaskStore.open(at: dir.path)
        var model: [[UInt8]: [UInt8]] = [:]
        let keys: [[UInt8]] = [
            Array("a".utf8), Array("ab".utf8), Array("abc".utf8), Array("abd".utf8), Array("b".utf8), Array("ba".utf8),
            [0x00], [0x00, 0x01], [0xFF, 0x00], [0xFF], Array("drafts/ada/1".utf8), Array("drafts/ada/2".utf8), Array("drafts/bob/1".utf8),
        ]
        for (index, key) in keys.enumerated() {
            model[key] = Array("value of \(index)".utf8) + [UInt8](repeating: UInt8(index), count: index * 10)
            try store.put(key, model[key]!)
        }
        let prefixes: [[UInt8]] = [[], Array("a".utf8), Array("ab".utf8), Array("abc".utf8), Array("abcd".utf8), Array("c".utf8),
                                   [0x00], [0xFF], Array("drafts/".utf8), Array("drafts/ada/".utf8), Array("drafts/ada/10".utf8)]
        for prefix in prefixes {
            try assertVisits(store, model, prefix: prefix, "prefix \(prefix)")
        }
        XCTAssertEqual(try visit(store, prefix: Array("ab".utf8)).values.keys.map(name).sorted(), ["ab", "abc", "abd"])
        XCTAssertEqual(try visit(store, prefix: Array("abcd".utf8)).values.count, 0)
        try store.close()
    }

    // MARK: Order

    /// Entries come in key order (bytewise), ascending or descending, whatever order the keys
    /// were written in and whichever segments hold them; `after` resumes after a key.
    func testVisitsInKeyOrder() throws {
        let dir = TemporaryDirectory("cask-iteration-order")
        defer { dir.remove() }
        var options = CaskStore.Options()
        options.maxSegmentSize = 16 << 10
        options.automaticCompaction = false
        var store = try CaskStore.open(at: dir.path, options: options)
        var rng = SeededGenerator(seed: 0x0DE5)
        var model = Set<[UInt8]>()
        for _ in 0..<3_000 {
            let key = Array("key-\(Int.random(in: 0..<1_500, using: &rng))".utf8)
            if Int.random(in: 0..<8, using: &rng) == 0 {
                try store.delete(key)
                model.remove(key)
            } else {
                try store.put(key, rng.bytes(Int.random(in: 1...120, using: &rng)))
                model.insert(key)
            }
        }
        let expected = model.sorted { $0.lexicographicallyPrecedes($1) }
        for reopen in [false, true] {
            if reopen {
                try store.close()
                store = try CaskStore.open(at: dir.path, options: options)
            }
            XCTAssertGreaterThan(try StoreFiles.segmentIDs(in: dir.path).count, 5)
            var order: [[UInt8]] = []
            try store.forEach { key, _ in order.append(Array(key)) }
            XCTAssertEqual(order.count, expected.count, "reopened: \(reopen)")
            XCTAssertTrue(order == expected, "reopened: \(reopen): not in key order")
            order = []
            try store.forEach(order: .descending) { key, _ in order.append(Array(key)) }
            XCTAssertTrue(order == expected.reversed(), "reopened: \(reopen): not in descending key order")
            order = []
            var entries = try store.entries(after: expected[700])
            while let entry = try entries.next() { order.append(entry.key) }
            XCTAssertTrue(order == Array(expected[701...]), "reopened: \(reopen): resumed after a key")
        }
        try store.close()
    }

    // MARK: The write buffer

    /// In `.buffered` mode unflushed records are read out of the write buffer; then from the file
    /// after a flush, and from both at once.
    func testBufferedValuesComeFromTheWriteBuffer() throws {
        let dir = TemporaryDirectory("cask-iteration-buffered")
        defer { dir.remove() }
        var options = CaskStore.Options(durability: .buffered)
        options.bufferSize = 4 << 20
        options.flushInterval = 0  // only explicit flushes
        for mapped in [true, false] {
            options.memoryMapping = mapped
            let store = try CaskStore.open(at: dir.appending("mapped-\(mapped)"), options: options)
            var rng = SeededGenerator(seed: 0xB0FF)
            var model: [[UInt8]: [UInt8]] = [:]
            for i in 0..<300 {
                let key = Array("buffered/\(i)".utf8)
                model[key] = i % 2 == 0 ? rng.bytes(Int.random(in: 0...500, using: &rng)) : [UInt8](repeating: UInt8(i & 0xFF), count: 300)
                try store.put(key, model[key]!)
            }
            let segment = try XCTUnwrap(StoreFiles.segmentIDs(in: store.directory).last)
            XCTAssertEqual(try StoreFiles.fileSize(StoreFiles.segmentPath(store.directory, segment)), SegmentHeader.length,
                           "the records should still be in the buffer")
            try assertVisits(store, model, "mapped \(mapped): all in the buffer")
            try store.flush()
            try assertVisits(store, model, "mapped \(mapped): flushed")
            for i in 0..<300 where i % 3 == 0 {
                let key = Array("buffered/\(i)".utf8)
                model[key] = Array("overwritten \(i)".utf8)
                try store.put(key, model[key]!)
            }
            try store.delete(Array("buffered/1".utf8))
            model[Array("buffered/1".utf8)] = nil
            try assertVisits(store, model, "mapped \(mapped): file and buffer")
            try store.close()
        }
    }

    // MARK: Compaction and concurrent writers

    /// A listing reads the keys of one leaf of the ordered view at a time without the lock, and
    /// each value when its entry is visited, as a get does: every entry after the first shows the
    /// value its key has then (a key deleted since its slice was read is left out), found where a
    /// compaction moved it.
    func testRecordsMovedByACompactionAreFoundAgain() throws {
        for compacting in [true, false] {
            let dir = TemporaryDirectory("cask-iteration-moved")
            defer { dir.remove() }
            var options = CaskStore.Options()
            options.maxSegmentSize = 8 << 10
            options.automaticCompaction = false
            let store = try CaskStore.open(at: dir.path, options: options)
            var model: [[UInt8]: [UInt8]] = [:]
            for round in 0..<3 {
                for i in 0..<120 {
                    let key = Array("k\(i)".utf8)
                    model[key] = Array("round \(round) of \(i) ".utf8) + [UInt8](repeating: UInt8(i), count: 60)
                    try store.put(key, model[key]!)
                }
            }
            let before = model
            var entries = try store.entries()
            var seen: [[UInt8]: [UInt8]] = [:]
            let first = try XCTUnwrap(entries.next())
            seen[first.key] = first.value
            for i in 0..<120 where i % 10 == 0 {
                let key = Array("k\(i)".utf8)
                try store.delete(key)
                model[key] = nil
            }
            for i in 0..<120 where i % 10 == 5 {
                let key = Array("k\(i)".utf8)
                model[key] = Array("after the first slice \(i)".utf8)
                try store.put(key, model[key]!)
            }
            if compacting {
                let result = try store.compact()
                XCTAssertGreaterThan(result.segmentsCompacted, 1)
            }
            while let entry = try entries.next() {
                XCTAssertNil(seen.updateValue(entry.value, forKey: entry.key), "\(name(entry.key)) twice")
            }
            // The first entry: as it was when it was read. Every other key: as it is now,
            // compaction or not.
            var wrong: [String] = []
            for key in Set(model.keys).union(before.keys) {
                let allowed = key == first.key ? before[key] : model[key]
                if seen[key] != allowed { wrong.append(name(key)) }
            }
            XCTAssertEqual(wrong, [], "compacting: \(compacting): keys with values they never had at those times")
            try store.close()
        }
    }

    /// Iterations running while writers overwrite and delete their own keys and compactions (on
    /// demand and automatic) move everything: no crash, no error, no key twice; every key no writer
    /// touches is visited with its exact value, and every value visited is whole and its key's.
    func testIterationDuringCompactionsAndWriters() throws {
        for mapped in [true, false] {
            let dir = TemporaryDirectory("cask-iteration-race")
            defer { dir.remove() }
            var options = CaskStore.Options(durability: .os)
            options.maxSegmentSize = 32 << 10
            options.compactionDeadRatio = 0.3
            options.compactionMinDeadBytes = 0
            options.memoryMapping = mapped
            let store = try CaskStore.open(at: dir.path, options: options)
            // Stable keys (never written again) interleaved with the writers' keys in every segment.
            var stable: [[UInt8]: [UInt8]] = [:]
            var rng = SeededGenerator(seed: mapped ? 0x5AB1E : 0x5AB1F)
            for i in 0..<2_000 {
                let key = Array("stable/\(i)".utf8)
                stable[key] = i % 2 == 0 ? rng.bytes(Int.random(in: 1...200, using: &rng)) : [UInt8](repeating: UInt8(i & 0xFF), count: 150)
                try store.put(key, stable[key]!)
                try store.put(ConcurrencyTests.key(i % ConcurrencyTests.keyCount),
                              SelfDescribingValue.make(key: i % ConcurrencyTests.keyCount, writer: 0, version: UInt64(i + 1), padding: 50))
            }
            let frozen = stable
            let writers = 2
            let writersDone = Atomic(0)
            let iterations = Atomic(0)
            let problems = Problems()
            runThreads(writers + 3) { thread in
                var random = SeededGenerator(seed: UInt64(thread) &+ 99)
                if thread < writers {
                    for version in 1...1_500 {
                        let key = Int.random(in: 0..<ConcurrencyTests.keyCount, using: &random)
                        do {
                            if version % 7 == 0 {
                                try store.delete(ConcurrencyTests.key(key))
                            } else {
                                try store.put(ConcurrencyTests.key(key), SelfDescribingValue.make(
                                    key: key, writer: thread, version: UInt64(version), padding: Int.random(in: 0..<400, using: &random)))
                            }
                        } catch { problems.add("writer \(thread): \(error)") }
                    }
                    writersDone.add(1, ordering: .releasing)
                } else if thread == writers {
                    while writersDone.load(ordering: .acquiring) < writers {
                        do { try store.compact() } catch { problems.add("compact: \(error)") }
                        usleep(500)
                    }
                } else {
                    // Iterators, until the writers are done, then once more.
                    var last = false
                    while !last {
                        last = writersDone.load(ordering: .acquiring) == writers
                        var seenStable = 0
                        var seen = Set<[UInt8]>()
                        do {
                            try store.forEach { key, value in
                                let key = Array(key)
                                if !seen.insert(key).inserted { problems.add("iterator: \(Self.name(key)) visited twice") }
                                if let expected = frozen[key] {
                                    seenStable += 1
                                    if !value.elementsEqual(expected) { problems.add("iterator: \(Self.name(key)) has a wrong value of \(value.count) bytes") }
                                } else if let decoded = SelfDescribingValue.decode(Array(value)) {
                                    if ConcurrencyTests.key(decoded.key) != Self.name(key) {
                                        problems.add("iterator: \(Self.name(key)) holds the value of key \(decoded.key)")
                                    }
                                } else {
                                    problems.add("iterator: \(Self.name(key)) holds a torn or foreign value of \(value.count) bytes")
                                }
                            }
                        } catch { problems.add("iterator: forEach threw \(error)") }
                        if seenStable != frozen.count { problems.add("iterator: \(seenStable) of \(frozen.count) stable keys visited") }
                        iterations.add(1, ordering: .relaxed)
                    }
                }
            }
            problems.assertNone("mapped \(mapped):")
            XCTAssertGreaterThan(iterations.load(ordering: .relaxed), 2, "mapped \(mapped): iterations")
            try store.close()
        }
    }

    // MARK: Damage

    /// A record damaged on disk (a flipped byte of its value, its index loaded from the hint file, so
    /// opening does not see it) stops the iteration with an error naming the file and the offset,
    /// after every entry before it; the cursor goes on after it.
    func testDamagedRecordThrowsNamingFileAndOffset() throws {
        for mapped in [true, false] {
            let dir = TemporaryDirectory("cask-iteration-damage")
            defer { dir.remove() }
            var options = CaskStore.Options()
            options.maxSegmentSize = 8 << 10
            options.memoryMapping = mapped
            var store = try CaskStore.open(at: dir.path, options: options)
            var model: [[UInt8]: [UInt8]] = [:]
            var rng = SeededGenerator(seed: 0xDA3A6E)
            for i in 0..<400 {
                let key = Array("key-\(i)".utf8)
                // Half compressed, half not.
                model[key] = i % 2 == 0 ? rng.bytes(60) : Array("value \(i) ".utf8) + [UInt8](repeating: UInt8(i & 0xFF), count: 60)
                try store.put(key, model[key]!)
            }
            try store.close()
            let ids = try StoreFiles.segmentIDs(in: dir.path)
            guard ids.count > 2 else { return XCTFail("too few segments: \(ids.count)") }
            let damagedID = ids[1]
            let path = StoreFiles.segmentPath(dir.path, damagedID)
            let records = try StoreFiles.records(ofSegment: path)
            let damaged = records[records.count / 2]
            try StoreFiles.flip(path, at: damaged.end - 1)
            // Entries before the damaged one in key order.
            let before = model.keys.filter { $0.lexicographicallyPrecedes(damaged.key) }.count

            store = try CaskStore.open(at: dir.path, options: options)
            XCTAssertTrue(store.recoveryReport.isClean, "the index comes from the hint files")
            var visited = 0
            do {
                try store.forEach { _, _ in visited += 1 }
                XCTFail("mapped \(mapped): forEach did not throw")
            } catch {
                guard case .corruptRecord(let file, let offset, let reason) = error else { return XCTFail("mapped \(mapped): \(error)") }
                XCTAssertEqual(file, path, "mapped \(mapped)")
                XCTAssertEqual(offset, Int64(damaged.offset), "mapped \(mapped)")
                XCTAssertTrue(reason.hasPrefix("checksum mismatch"), "mapped \(mapped): \(reason)")
                XCTAssertEqual(error.description, "corrupt record in \(path) at offset \(damaged.offset): \(reason)")
            }
            XCTAssertEqual(visited, before, "mapped \(mapped): entries visited before the damaged one")
            // The cursor reports it and goes on with the rest.
            var entries = try store.entries()
            var seen: [[UInt8]: [UInt8]] = [:]
            var errors: [CaskError] = []
            while true {
                do {
                    guard let entry = try entries.next() else { break }
                    seen[entry.key] = entry.value
                } catch {
                    errors.append(error)
                }
            }
            XCTAssertEqual(errors.count, 1, "mapped \(mapped): \(errors)")
            var expected = model
            expected[damaged.key] = nil
            XCTAssertEqual(seen, expected, "mapped \(mapped): every other entry")
            try store.close()
        }
    }

    // MARK: The body

    /// An error thrown by the body stops the iteration at once and comes out as it is: a
    /// `CaskError` through the typed overload, any other error through the untyped one. The body
    /// may call the store, writes included.
    func testBodyErrorStopsTheIterationAndPropagates() throws {
        let dir = TemporaryDirectory("cask-iteration-body")
        defer { dir.remove() }
        var options = CaskStore.Options(durability: .buffered)
        options.flushInterval = 0
        let store = try CaskStore.open(at: dir.path, options: options)
        for i in 0..<50 { try store.put("key-\(i)", Array("value \(i)".utf8)) }

        // A body that does not throw, or throws only CaskError, picks the typed overload.
        var visited = 0
        do throws(CaskError) {
            try store.forEach { _, _ throws(CaskError) in
                visited += 1
                if visited == 3 { throw CaskError.readOnly(path: dir.path) }
            }
            XCTFail("forEach did not throw")
        } catch {
            XCTAssertEqual(error, .readOnly(path: dir.path))
        }
        XCTAssertEqual(visited, 3)

        struct Stop: Error, Equatable { var after: Int }
        visited = 0
        do {
            try store.forEach { _, _ in
                visited += 1
                if visited == 7 { throw Stop(after: visited) }
            }
            XCTFail("forEach did not throw")
        } catch let stop as Stop {
            XCTAssertEqual(stop, Stop(after: 7))
        }
        XCTAssertEqual(visited, 7)

        // Writes and reads from inside the body (the buffered path takes the writer mutex).
        var copied = 0
        try store.forEach { key, value throws(CaskError) in
            guard !key.starts(with: "copy/".utf8) else { return }
            try store.put(Array("copy/".utf8) + Array(key), value)
            XCTAssertEqual(try store.get(key), Array(value))
            copied += 1
        }
        XCTAssertEqual(copied, 50, "keys written during the call are not visited")
        XCTAssertEqual(store.count, 100)
        try store.close()
    }

    /// A close during the call stops it before the next entry; a closed store refuses to start one.
    func testCloseStopsTheIteration() throws {
        let dir = TemporaryDirectory("cask-iteration-close")
        defer { dir.remove() }
        let store = try CaskStore.open(at: dir.path)
        for i in 0..<20 { try store.put("key-\(i)", [UInt8(i)]) }
        var visited = 0
        XCTAssertThrowsError(try store.forEach { _, _ in
            visited += 1
            if visited == 5 { try store.close() }
        }) { XCTAssertEqual($0 as? CaskError, .closed(path: store.directory)) }
        XCTAssertEqual(visited, 5)
        XCTAssertThrowsError(try store.forEach { _, _ in XCTFail("visited a closed store") }) { XCTAssertEqual($0 as? CaskError, .closed(path: store.directory)) }
        do {
            _ = try store.entries()
            XCTFail("entries() on a closed store")
        } catch {
            XCTAssertEqual(error, .closed(path: store.directory))
        }
    }

    /// A key whose record expires between the snapshot and its turn is skipped.
    func testKeyExpiringDuringTheIterationIsSkipped() throws {
        let dir = TemporaryDirectory("cask-iteration-expiry")
        defer { dir.remove() }
        let store = try CaskStore.open(at: dir.path)
        try store.put("stays", [1])
        try store.put("goes", [2], expiresAfter: .milliseconds(500))
        var entries = try store.entries()
        usleep(700_000)
        var keys: [String] = []
        while let entry = try entries.next() { keys.append(name(entry.key)) }
        XCTAssertEqual(keys, ["stays"])
        try store.close()
    }
}
