import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// Thousands of random operations on a real store, checked after every step against a dictionary,
/// with reopens (hints kept, hints deleted, read-only) and small segments so they rotate often.
final class ModelTests: XCTestCase {
    func testModelBuffered() throws {
        try runModel(durability: .buffered, fallbackSeed: 0xB0F, operations: 4_000)
    }

    func testModelOS() throws {
        try runModel(durability: .os, fallbackSeed: 0x05, operations: 4_000)
    }

    func testModelFsync() throws {
        // Every write waits for fdatasync (milliseconds on a real disk): fewer operations.
        try runModel(durability: .fsync, fallbackSeed: 0xF5, operations: 1_200)
    }

    // MARK: The model run

    private struct Run {
        var rng: SeededGenerator
        var model: [[UInt8]: [UInt8]] = [:]
        var keys: [[UInt8]]
        var reopens = 0, hintlessReopens = 0, readOnlyChecks = 0

        mutating func key() -> [UInt8] { keys[Int.random(in: 0..<keys.count, using: &rng)] }

        mutating func value() -> [UInt8] {
            let roll = Int.random(in: 0..<100, using: &rng)
            let length: Int
            switch roll {
            case 0..<5: length = 0
            case 5..<90: length = Int.random(in: 1...700, using: &rng)
            case 90..<98: length = Int.random(in: 700...3_000, using: &rng)
            default: length = Int.random(in: 9_000...20_000, using: &rng)  // larger than a whole segment
            }
            if Bool.random(using: &rng) {
                // Compressible: a short random pattern repeated.
                let pattern = rng.bytes(Int.random(in: 1...16, using: &rng))
                return (0..<length).map { pattern[$0 % pattern.count] }
            }
            return rng.bytes(length)
        }
    }

    private func runModel(durability: Durability, fallbackSeed: UInt64, operations: Int) throws {
        let rng = SeededGenerator.fromEnvironment(fallback: fallbackSeed)
        print("ModelTests \(durability): seed \(rng.seed) (replay with CASK_TEST_SEED=\(rng.seed))")
        var run = Run(rng: rng, keys: [])
        // Text keys, binary keys, a shared prefix for keys(prefix:), and a few long keys.
        run.keys = (0..<150).map { Array("user/\($0)".utf8) } + (0..<150).map { Array("item/\($0 * 7919)".utf8) }
        for _ in 0..<60 { run.keys.append(run.rng.bytes(Int.random(in: 1...40, using: &run.rng))) }
        for _ in 0..<4 { run.keys.append(run.rng.bytes(Int.random(in: 1_000...5_000, using: &run.rng))) }
        run.keys = Array(Set(run.keys))

        let dir = TemporaryDirectory("cask-model")
        defer { dir.remove() }
        var options = CaskStore.Options(durability: durability)
        options.maxSegmentSize = Int64([8, 12, 16, 32][Int.random(in: 0..<4, using: &run.rng)] << 10)
        options.bufferSize = Int.random(in: 512...8_192, using: &run.rng)
        options.flushInterval = 0.05
        print("ModelTests \(durability): maxSegmentSize \(options.maxSegmentSize), bufferSize \(options.bufferSize)")

        var store = try CaskStore.open(at: dir.path, options: options)
        var done = 0
        var untilReopen = 1
        while done < operations {
            try step(store, &run)
            done += 1
            untilReopen -= 1
            if untilReopen == 0 {
                store = try reopen(store, dir: dir, options: options, &run)
                untilReopen = [1, 3, 20, 150, 400, 700][Int.random(in: 0..<6, using: &run.rng)]
            }
        }
        assertStore(store, matches: run.model, "end of run")
        try store.close()
        let final = try CaskStore.open(at: dir.path, options: options)
        XCTAssertTrue(final.recoveryReport.isClean, "\(final.recoveryReport)")
        XCTAssertTrue(final.recoveryReport.invalidHints.isEmpty, "\(final.recoveryReport)")
        assertStore(final, matches: run.model, "final reopen")
        let segments = try final.statistics().segments
        XCTAssertGreaterThan(segments.count, 5, "segments should rotate")
        try final.close()
        print("ModelTests \(durability): \(operations) operations, \(run.reopens) reopens (\(run.hintlessReopens) without hints, \(run.readOnlyChecks) read-only checks), \(segments.count) segments, \(run.model.count) keys")
    }

    private func step(_ store: CaskStore, _ run: inout Run) throws {
        let roll = Int.random(in: 0..<100, using: &run.rng)
        let key = run.key()
        switch roll {
        case 0..<45:
            let value = run.value()
            try store.put(key, value)
            run.model[key] = value
        case 45..<60:
            let existed = try store.delete(key)
            XCTAssertEqual(existed, run.model.removeValue(forKey: key) != nil, "delete's result")
        case 60..<88:
            XCTAssertEqual(try store.get(key), run.model[key], "get")
        case 88..<95:
            XCTAssertEqual(try store.contains(key), run.model[key] != nil, "contains")
            XCTAssertEqual(store.count, run.model.count, "count")
        case 95..<98:
            let prefix = [Array("user/1".utf8), Array("item/".utf8), [], Array(key.prefix(1))][Int.random(in: 0..<4, using: &run.rng)]
            let expected = run.model.keys.filter { $0.starts(with: prefix) }.sorted { $0.lexicographicallyPrecedes($1) }
            XCTAssertEqual(try store.keys(prefix: prefix), expected, "keys(prefix: \(prefix))")
        default:
            try store.sync()
        }
    }

    /// Closes `store` and opens it again, checking it in between in one of several ways.
    private func reopen(_ store: CaskStore, dir: TemporaryDirectory, options: CaskStore.Options, _ run: inout Run) throws -> CaskStore {
        run.reopens += 1
        let mode = Int.random(in: 0..<4, using: &run.rng)
        if mode == 3 {
            // A read-only open alongside the writer sees everything written (after a sync in buffered mode).
            try store.sync()
            var readOnly = options
            readOnly.readOnly = true
            let reader = try CaskStore.open(at: dir.path, options: readOnly)
            XCTAssertTrue(reader.recoveryReport.isClean, "\(reader.recoveryReport)")
            assertStore(reader, matches: run.model, "read-only alongside the writer")
            XCTAssertThrowsError(try reader.put("x", [1])) { XCTAssertEqual($0 as? CaskError, .readOnly(path: reader.directory)) }
            try reader.close()
            run.readOnlyChecks += 1
        }
        let before = try store.statistics()
        try store.close()
        XCTAssertThrowsError(try store.get("x")) { XCTAssertEqual($0 as? CaskError, .closed(path: store.directory)) }
        XCTAssertNoThrow(try store.close(), "closing twice")
        if mode == 2 {
            // The same store with and without its hint files, both read-only: identical contents and accounting.
            let copy = TemporaryDirectory("cask-model-nohints")
            defer { copy.remove() }
            try StoreFiles.copy(from: dir.path, to: copy.path)
            try StoreFiles.removeHints(in: copy.path)
            var readOnly = options
            readOnly.readOnly = true
            let hinted = try CaskStore.open(at: dir.path, options: readOnly)
            let scanned = try CaskStore.open(at: copy.path, options: readOnly)
            XCTAssertGreaterThan(hinted.recoveryReport.segmentsFromHints, 0, "\(hinted.recoveryReport)")
            XCTAssertEqual(scanned.recoveryReport.segmentsFromHints, 0)
            XCTAssertTrue(hinted.recoveryReport.isClean && hinted.recoveryReport.invalidHints.isEmpty, "\(hinted.recoveryReport)")
            XCTAssertTrue(scanned.recoveryReport.isClean, "\(scanned.recoveryReport)")
            XCTAssertEqual(hinted.recoveryReport.recordsScanned, scanned.recoveryReport.recordsScanned)
            assertStore(hinted, matches: run.model, "read-only with hints")
            assertStore(scanned, matches: run.model, "read-only without hints")
            let a = try hinted.statistics(), b = try scanned.statistics()
            XCTAssertEqual(a.segments, b.segments, "per-segment accounting from hints and from scans")
            XCTAssertEqual(a.liveBytes, b.liveBytes)
            try hinted.close()
            try scanned.close()
            run.readOnlyChecks += 1
        }
        if mode == 1 {
            try StoreFiles.removeHints(in: dir.path)
            run.hintlessReopens += 1
        }
        let reopened = try CaskStore.open(at: dir.path, options: options)
        let report = reopened.recoveryReport
        XCTAssertTrue(report.isClean, "\(report)")
        XCTAssertTrue(report.invalidHints.isEmpty, "\(report)")
        if mode == 1 { XCTAssertEqual(report.segmentsFromHints, 0) }
        assertStore(reopened, matches: run.model, "after reopen \(run.reopens)")
        // What the store counted while writing matches what recovery rebuilds.
        let after = try reopened.statistics()
        XCTAssertEqual(after.liveBytes, before.liveBytes, "live bytes across reopen")
        XCTAssertEqual(after.keys, before.keys)
        let written = before.segments.filter { $0.records > 0 }, recovered = after.segments.filter { $0.records > 0 }
        XCTAssertEqual(written.map(\.id), recovered.map(\.id))
        for (w, r) in zip(written, recovered) {
            XCTAssertEqual([w.records, w.liveRecords], [r.records, r.liveRecords], "segment \(w.id) records")
            XCTAssertEqual([w.fileBytes, w.liveBytes, w.valueBytes], [r.fileBytes, r.liveBytes, r.valueBytes], "segment \(w.id) bytes")
            XCTAssertEqual(w.minSeq, r.minSeq)
            XCTAssertEqual(w.maxSeq, r.maxSeq)
        }
        return reopened
    }
}
