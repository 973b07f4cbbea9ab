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
        try verify(store, run.model, "end of run")
        try store.close()
        let final = try CaskStore.open(at: dir.path, options: options)
        XCTAssertTrue(final.recoveryReport.isClean, "\(final.recoveryReport)")
        XCTAssertTrue(final.recoveryReport.invalidHints.isEmpty, "\(final.recoveryReport)")
        try verify(final, run.model, "final reopen")
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
            try verify(reader, run.model, "read-only alongside the writer")
            XCTAssertThrowsError(try reader.put("x", [1])) { XCTAssertEqual($0 as? CaskError, .readOnly) }
            try reader.close()
            run.readOnlyChecks += 1
        }
        let before = try store.statistics()
        try store.close()
        XCTAssertThrowsError(try store.get("x")) { XCTAssertEqual($0 as? CaskError, .closed) }
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
            try verify(hinted, run.model, "read-only with hints")
            try verify(scanned, run.model, "read-only without hints")
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
        try verify(reopened, run.model, "after reopen \(run.reopens)")
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

    private func verify(_ store: CaskStore, _ model: [[UInt8]: [UInt8]], _ context: String, file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(store.count, model.count, "count, \(context)", file: file, line: line)
        let keys = try store.keys()
        XCTAssertEqual(keys, model.keys.sorted { $0.lexicographicallyPrecedes($1) }, "keys(), \(context)", file: file, line: line)
        var wrong: [String] = []
        for (key, value) in model {
            let stored = try store.get(key)
            if stored != value { wrong.append("\(String(decoding: key.prefix(20), as: UTF8.self)): \(stored?.count ?? -1) bytes, expected \(value.count)") }
            if try !store.contains(key) { wrong.append("contains(\(key.prefix(20)))") }
        }
        XCTAssertTrue(wrong.isEmpty, "\(context): \(wrong.prefix(10))", file: file, line: line)
        for absent in [Array("user/absent".utf8), Array("zzz".utf8)] where model[absent] == nil {
            XCTAssertNil(try store.get(absent), file: file, line: line)
            XCTAssertFalse(try store.contains(absent), file: file, line: line)
        }
    }
}

// MARK: Helpers shared by the file-level tests

/// Real file manipulation for the model, torn-write and corruption tests.
enum StoreFiles {
    /// One record of a segment file as the tests see it.
    struct Record {
        var offset: Int
        var length: Int
        var type: RecordType
        var seq: UInt64
        var key: [UInt8]
        /// The value of a put (decompressed), nil for a delete.
        var value: [UInt8]?
        /// Whether the record is a member of an atomic batch.
        var isBatchMember = false
        var end: Int { offset + length }
    }

    static func segmentPath(_ directory: String, _ id: UInt64) -> String { directory + "/" + SegmentName.segment(id) }
    static func hintPath(_ directory: String, _ id: UInt64) -> String { directory + "/" + SegmentName.hint(id) }

    /// The segment ids in a store directory, ascending.
    static func segmentIDs(in directory: String) throws -> [UInt64] {
        try FileManager.default.contentsOfDirectory(atPath: directory).compactMap(SegmentName.segmentID(fromFileName:)).sorted()
    }

    /// Copies the files of a store directory (flat) into `destination`, which must exist.
    static func copy(from source: String, to destination: String) throws {
        for name in try FileManager.default.contentsOfDirectory(atPath: source) {
            try write(destination + "/" + name, read(source + "/" + name))
        }
    }

    /// Deletes every hint file in a store directory.
    static func removeHints(in directory: String) throws {
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) where name.hasSuffix(".hint") {
            try FileManager.default.removeItem(atPath: directory + "/" + name)
        }
    }

    static func read(_ path: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    static func write(_ path: String, _ bytes: [UInt8]) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    /// Every file of a directory with its bytes (to prove that nothing changed).
    static func snapshot(_ directory: String) throws -> [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) { files[name] = try read(directory + "/" + name) }
        return files
    }

    /// XORs one byte of a file in place, through a file handle.
    static func flip(_ path: String, at offset: Int, mask: UInt8 = 0xFF) throws {
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(offset))
        guard let byte = try handle.read(upToCount: 1)?.first else { throw CocoaError(.fileReadUnknown) }
        try handle.seek(toOffset: UInt64(offset))
        try handle.write(contentsOf: [byte ^ mask])
    }

    static func truncate(_ path: String, to length: Int) throws {
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.truncate(atOffset: UInt64(length))
    }

    static func append(_ path: String, _ bytes: [UInt8]) throws {
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: bytes)
    }

    static func fileSize(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? -1
    }

    /// Parses a clean segment file record by record (failing the test at the first invalid byte).
    static func records(ofSegment path: String, file: StaticString = #filePath, line: UInt = #line) throws -> [Record] {
        let bytes = try read(path)
        var records: [Record] = []
        var offset = SegmentHeader.length
        // Zero bytes to the end of the file are space a writer reserved (FORMAT.md, "Reserved space").
        while offset < bytes.count && !bytes[offset...].allSatisfy({ $0 == 0 }) {
            let result = bytes.withUnsafeBytes { RecordHeader.validate(UnsafeRawBufferPointer(rebasing: $0[offset...])) }
            guard case .success(let header) = result else {
                XCTFail("\(path): no valid record at \(offset): \(result)", file: file, line: line)
                break
            }
            let keyStart = offset + header.headerLength
            let key = Array(bytes[keyStart..<(keyStart + header.keyLength)])
            var value: [UInt8]?
            if header.type == .put {
                let payload = Array(bytes[(keyStart + header.keyLength)..<(keyStart + header.keyLength + header.storedLength)])
                if header.isCompressed {
                    var out = [UInt8](repeating: 0, count: header.valueLength)
                    let ok = payload.withUnsafeBytes { source in out.withUnsafeMutableBytes { LZ4Decompressor.decompress(source, into: $0) } }
                    XCTAssertTrue(ok, "lz4 payload at \(offset)", file: file, line: line)
                    value = out
                } else {
                    value = payload
                }
            }
            records.append(Record(
                offset: offset, length: header.recordLength, type: header.type, seq: header.seq, key: key, value: value,
                isBatchMember: header.flags & RecordFlags.batchMember != 0))
            offset += header.recordLength
        }
        return records
    }

    /// The contents a set of records describes: newest seq per key wins, deletes remove.
    static func replay(_ records: [Record]) -> [[UInt8]: [UInt8]] {
        var newest: [[UInt8]: Record] = [:]
        for record in records where (newest[record.key]?.seq ?? 0) < record.seq || newest[record.key] == nil {
            newest[record.key] = record
        }
        return newest.compactMapValues(\.value)
    }
}
