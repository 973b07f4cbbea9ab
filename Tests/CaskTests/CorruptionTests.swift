import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// Damage inside sealed segments and hint files: reported with file and offset, skipped, and
/// never turned into wrong bytes.
final class CorruptionTests: XCTestCase {
    private struct Fixture {
        let dir: TemporaryDirectory
        let ids: [UInt64]
        /// Records per segment id.
        let records: [UInt64: [StoreFiles.Record]]
        let model: [[UInt8]: [UInt8]]
        var all: [StoreFiles.Record] { ids.flatMap { records[$0]! } }
        var sealed: [UInt64] { Array(ids.dropLast()) }
        func path(_ id: UInt64) -> String { StoreFiles.segmentPath(dir.path, id) }
    }

    /// A closed store of several 8 KiB segments, every key written a few times, some deleted.
    private func makeFixture(seed: UInt64) throws -> Fixture {
        var rng = SeededGenerator.fromEnvironment(fallback: seed)
        print("CorruptionTests: seed \(rng.seed)")
        let dir = TemporaryDirectory("cask-corrupt")
        var options = CaskStore.Options(durability: .os)
        options.maxSegmentSize = 8 << 10
        let store = try CaskStore.open(at: dir.path, options: options)
        var model: [[UInt8]: [UInt8]] = [:]
        for round in 0..<4 {
            for i in 0..<70 {
                let key = Array("key-\(i)".utf8)
                if round > 0 && Int.random(in: 0..<6, using: &rng) == 0 {
                    _ = try store.delete(key)
                    model[key] = nil
                    continue
                }
                let value = Int.random(in: 0..<3, using: &rng) == 0
                    ? [UInt8](repeating: UInt8(truncatingIfNeeded: i &+ round), count: Int.random(in: 40...200, using: &rng))
                    : rng.bytes(Int.random(in: 1...300, using: &rng))
                try store.put(key, value)
                model[key] = value
            }
        }
        try store.close()
        let ids = try StoreFiles.segmentIDs(in: dir.path)
        guard ids.count >= 4 else { throw XCTSkip("fixture too small: \(ids.count) segments") }
        var records: [UInt64: [StoreFiles.Record]] = [:]
        for id in ids { records[id] = try StoreFiles.records(ofSegment: StoreFiles.segmentPath(dir.path, id)) }
        let fixture = Fixture(dir: dir, ids: ids, records: records, model: model)
        XCTAssertTrue(StoreFiles.replay(fixture.all) == model, "replaying the segments does not give the written contents")
        for id in ids { XCTAssertTrue(FileManager.default.fileExists(atPath: StoreFiles.hintPath(dir.path, id)), "hint \(id)") }
        return fixture
    }

    private func options(readOnly: Bool = false) -> CaskStore.Options { .smallSegmentsWithoutHints(readOnly: readOnly) }

    private func name(_ key: [UInt8]) -> String { String(decoding: key, as: UTF8.self) }

    /// Byte positions inside a record worth damaging: checksum, type, flags, varints, key, payload.
    private func positions(in record: StoreFiles.Record, rng: inout SeededGenerator) -> [Int] {
        var inside = [0, 3, 4, 5, 6, 7, 8, record.length - 1, record.length / 2]
        for _ in 0..<3 { inside.append(Int.random(in: 0..<record.length, using: &rng)) }
        return Array(Set(inside.filter { $0 >= 0 && $0 < record.length })).sorted()
    }

    // MARK: Records of a sealed segment

    func testFlippedBytesInSealedRecordsAreReportedAndSkipped() throws {
        let fixture = try makeFixture(seed: 0xC0DE)
        defer { fixture.dir.remove() }
        var rng = SeededGenerator(seed: 0xF11B)
        var cases = 0
        for id in fixture.sealed {
            let records = fixture.records[id]!
            // The first and last record of each sealed segment, and a few in between.
            var chosen = [records.first!, records.last!]
            for _ in 0..<4 { chosen.append(records[Int.random(in: 0..<records.count, using: &rng)]) }
            for record in chosen {
                for position in positions(in: record, rng: &rng) {
                    let scratch = TemporaryDirectory("cask-corrupt-case")
                    defer { scratch.remove() }
                    try StoreFiles.copy(from: fixture.dir.path, to: scratch.path)
                    // Without its hint the segment is scanned, so open finds the damage.
                    try FileManager.default.removeItem(atPath: StoreFiles.hintPath(scratch.path, id))
                    let segmentPath = StoreFiles.segmentPath(scratch.path, id)
                    let mask = UInt8.random(in: 1...255, using: &rng)
                    try StoreFiles.flip(segmentPath, at: record.offset + position, mask: mask)
                    try checkDamagedRecord(record, in: segmentPath, scratch: scratch, fixture: fixture,
                                           context: "segment \(id) record at \(record.offset) (\(record.type) \(name(record.key))), byte \(position) ^ 0x\(String(mask, radix: 16))")
                    cases += 1
                }
            }
        }
        print("CorruptionTests: \(cases) damaged records checked")
    }

    private func checkDamagedRecord(
        _ record: StoreFiles.Record, in segmentPath: String, scratch: TemporaryDirectory, fixture: Fixture, context: String
    ) throws {
        let store = try CaskStore.open(at: scratch.path, options: options())
        let report = store.recoveryReport
        XCTAssertTrue(report.truncations.isEmpty, "\(context): \(report)")
        XCTAssertEqual(report.damagedRanges.count, 1, "\(context): \(report)")
        if let range = report.damagedRanges.first {
            XCTAssertEqual(range.file, segmentPath, context)
            XCTAssertEqual(range.offset, Int64(record.offset), context)
            XCTAssertEqual(range.length, Int64(record.length), "\(context): the next record must be found again")
            XCTAssertFalse(range.reason.isEmpty)
        }
        let full = StoreFiles.replay(fixture.all)
        let without = StoreFiles.replay(fixture.all.filter { $0.offset != record.offset || $0.seq != record.seq })
        for key in Set(full.keys).union(without.keys) {
            if key != record.key {
                XCTAssertEqual(try store.get(key), full[key], "\(context): other key \(name(key))")
                continue
            }
            // The damaged key: an error, or the version it had without the damaged record.
            do {
                let value = try store.get(key)
                XCTAssertEqual(value, without[key], "\(context): the damaged key")
            } catch {
                guard case .corruptRecord = error else { return XCTFail("\(context): \(error)") }
            }
        }
        XCTAssertEqual(Set(try store.keys()), Set(without.keys), context)
        // The store stays writable, and the damage stays reported (the segment keeps no hint).
        try store.put("after-damage", [7])
        try store.close()
        let again = try CaskStore.open(at: scratch.path, options: options(readOnly: true))
        XCTAssertEqual(again.recoveryReport.damagedRanges.map(\.offset), [Int64(record.offset)], context)
        XCTAssertEqual(try again.get("after-damage"), [7])
        try again.close()
    }

    /// With the segment's hint intact, open does not read the records: the damage is found by `get`,
    /// which must throw rather than return the damaged bytes.
    func testFlippedBytesBehindAValidHintFailTheRead() throws {
        let fixture = try makeFixture(seed: 0xC0DF)
        defer { fixture.dir.remove() }
        var rng = SeededGenerator(seed: 0xF11C)
        let full = StoreFiles.replay(fixture.all)
        var newest: [[UInt8]: StoreFiles.Record] = [:]
        for record in fixture.all where (newest[record.key]?.seq ?? 0) < record.seq { newest[record.key] = record }
        let store = try CaskStore.open(at: fixture.dir.path, options: options(readOnly: true))
        XCTAssertEqual(store.recoveryReport.segmentsFromHints, fixture.ids.count)
        var failedReads = 0
        for id in fixture.sealed {
            let path = fixture.path(id)
            for record in fixture.records[id]! {
                let isLive = newest[record.key]?.seq == record.seq && record.type == .put
                let position = Int.random(in: 0..<record.length, using: &rng)
                let mask = UInt8.random(in: 1...255, using: &rng)
                // The store is read-only and reads with pread: damage the file under it, then repair it.
                try StoreFiles.flip(path, at: record.offset + position, mask: mask)
                defer { try? StoreFiles.flip(path, at: record.offset + position, mask: mask) }
                let context = "segment \(id) record at \(record.offset) (\(name(record.key))), byte \(position)"
                if isLive {
                    XCTAssertThrowsError(try store.get(record.key), context) { error in
                        guard case CaskError.corruptRecord(let file, let offset, _) = error else { return XCTFail("\(context): \(error)") }
                        XCTAssertEqual(file, path, context)
                        XCTAssertEqual(offset, Int64(record.offset), context)
                    }
                    failedReads += 1
                } else {
                    XCTAssertEqual(try store.get(record.key), full[record.key], "\(context): not the live record")
                }
            }
        }
        XCTAssertGreaterThan(failedReads, 0, "no live record in a sealed segment was damaged")
        // Repaired: every key reads back again.
        for (key, value) in full { XCTAssertEqual(try store.get(key), value, name(key)) }
        try store.close()
    }

    func testDamagedHeaderOfASealedSegmentKeepsItsRecords() throws {
        let fixture = try makeFixture(seed: 0xC0E0)
        defer { fixture.dir.remove() }
        let id = fixture.sealed[1]
        for position in [0, 8, 12, 16, 24, 36] {
            for keepHint in [false, true] {
                let scratch = TemporaryDirectory("cask-corrupt-header")
                defer { scratch.remove() }
                try StoreFiles.copy(from: fixture.dir.path, to: scratch.path)
                if !keepHint { try FileManager.default.removeItem(atPath: StoreFiles.hintPath(scratch.path, id)) }
                let path = StoreFiles.segmentPath(scratch.path, id)
                try StoreFiles.flip(path, at: position, mask: 0x40)
                let store = try CaskStore.open(at: scratch.path, options: options())
                let context = "header byte \(position), hint kept \(keepHint)"
                XCTAssertEqual(store.recoveryReport.damagedRanges.map(\.file), [path], "\(context): \(store.recoveryReport)")
                XCTAssertEqual(store.recoveryReport.damagedRanges.first?.offset, 0, context)
                assertStore(store, matches: fixture.model, context)
                try store.close()
            }
        }
    }

    func testDamagedHeaderOfTheLastSegmentStopsAppendsToIt() throws {
        let dir = TemporaryDirectory("cask-corrupt-last-header")
        defer { dir.remove() }
        var model: [[UInt8]: [UInt8]] = [:]
        let store = try CaskStore.open(at: dir.path)
        for i in 0..<50 {
            let key = Array("key-\(i)".utf8)
            model[key] = Array("value-\(i)".utf8)
            try store.put(key, model[key]!)
        }
        try store.close()
        let first = StoreFiles.segmentPath(dir.path, 1)
        try FileManager.default.removeItem(atPath: StoreFiles.hintPath(dir.path, 1))
        try StoreFiles.flip(first, at: 3, mask: 0x01)  // the magic number: the header is damage now
        // Bytes after the last record that are no record: at the end of the segment appended to
        // they would be its torn tail, to be cut. This one is not appended to: they are damage, and stay.
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: first))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(repeating: 0x5A, count: 100))
        try handle.close()
        let damaged = try Data(contentsOf: URL(fileURLWithPath: first))
        _ = try SecondReaderTests.compareReaders(dir.path, label: "the last segment's header damaged, no hint")

        for round in 0..<3 {
            let reopened = try CaskStore.open(at: dir.path)
            XCTAssertEqual(reopened.recoveryReport.damagedRanges.map(\.file), [first, first], "round \(round): \(reopened.recoveryReport)")
            XCTAssertEqual(reopened.recoveryReport.damagedRanges.map(\.kind), [.segmentHeader, .record], "round \(round)")
            XCTAssertEqual(reopened.recoveryReport.truncations, [], "round \(round)")
            for (key, value) in model { XCTAssertEqual(try reopened.get(key), value) }
            let key = Array("after-\(round)".utf8)
            model[key] = [UInt8(round)]
            try reopened.put(key, [UInt8(round)])
            try reopened.close()
            // New writes went to a new segment: the damaged one is never appended to again.
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: first)), damaged, "round \(round)")
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".cask") }.sorted()
        XCTAssertEqual(names, ["0000000001.cask", "0000000002.cask"])
    }

    /// A header whose checksum holds but that every reader rejects (here a version 2 header naming
    /// dictionary 0) is damage to the choice of the active segment too, as FORMAT.md says. The
    /// choice took the header's base seq by a looser check of its own: as the newest segment with
    /// a higher one, its bytes after the header were cut as a torn tail; with a lower one, the
    /// segment before it, sealed and hinted, was appended to again. Now neither is touched, a new
    /// segment takes the writes, and both readers agree.
    func testAHeaderEveryReaderRejectsTakesNoPartInChoosingTheActiveSegment() throws {
        for baseSeq: UInt64 in [1_000, 0] {
            let dir = TemporaryDirectory("cask-corrupt-rejected-header")
            defer { dir.remove() }
            let store = try CaskStore.open(at: dir.path)
            for i in 0..<20 { try store.put("key-\(i)", Array("value-\(i)".utf8)) }
            try store.close()
            var header = SegmentHeader(segmentID: 2, baseSeq: baseSeq, dictionaryID: 1, dictionaryChecksum: 7).encoded()
            for offset in 32..<36 { header[offset] = 0 }  // dictionary id 0: not a valid version 2 header
            StoreFiles.rechecksumSegmentHeader(&header)
            let second = StoreFiles.segmentPath(dir.path, 2)
            try StoreFiles.write(second, header + [UInt8](repeating: 0x5A, count: 30))
            let before = try StoreFiles.snapshot(dir.path)
            _ = try SecondReaderTests.compareReaders(dir.path, label: "a rejected header with base seq \(baseSeq)")

            let reopened = try CaskStore.open(at: dir.path)
            XCTAssertEqual(reopened.recoveryReport.truncations, [], "base seq \(baseSeq): \(reopened.recoveryReport)")
            try reopened.put("after", [1])
            try reopened.close()
            let after = try StoreFiles.snapshot(dir.path)
            for name in ["0000000001.cask", "0000000002.cask"] { XCTAssertEqual(after[name], before[name], "base seq \(baseSeq): \(name) changed") }
            XCTAssertNotNil(after["0000000003.cask"], "base seq \(baseSeq): no new segment")
            let again = try CaskStore.open(at: dir.path, options: .readOnly)
            XCTAssertEqual(try again.get("after"), [1])
            XCTAssertEqual(try again.get("key-7"), Array("value-7".utf8))
            try again.close()
        }
    }

    /// A header whose checksum is valid but whose base seq is above 2^63 − 1 (found by the
    /// store-image fuzzer): if it were trusted, the writer would number new records past the
    /// last valid seq, and a compaction or reopen would drop them as malformed.
    func testBaseSeqBeyondTheLastSeqIsDamageNotANextSeq() throws {
        let dir = TemporaryDirectory("cask-corrupt-base-seq")
        defer { dir.remove() }
        let store = try CaskStore.open(at: dir.path)
        try store.put("before", Array("kept".utf8))
        try store.close()
        let first = StoreFiles.segmentPath(dir.path, 1)
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: first)))
        for i in 0..<8 { bytes[24 + i] = 0xFF }
        StoreFiles.rechecksumSegmentHeader(&bytes)
        try Data(bytes).write(to: URL(fileURLWithPath: first))
        try FileManager.default.removeItem(atPath: StoreFiles.hintPath(dir.path, 1))

        var options = CaskStore.Options()
        options.automaticCompaction = false
        let reopened = try CaskStore.open(at: dir.path, options: options)
        XCTAssertEqual(reopened.recoveryReport.damagedRanges.map(\.file), [first], "\(reopened.recoveryReport)")
        try reopened.put("after", Array("acknowledged".utf8))
        _ = try reopened.compact()
        XCTAssertEqual(try reopened.get("after"), Array("acknowledged".utf8))
        XCTAssertEqual(try reopened.get("before"), Array("kept".utf8))
        try reopened.close()
        let last = try CaskStore.open(at: dir.path, options: options)
        defer { try? last.close() }
        XCTAssertEqual(try last.get("after"), Array("acknowledged".utf8))
        XCTAssertEqual(try last.get("before"), Array("kept".utf8))
    }

    // MARK: Hint files

    func testDamagedHintFallsBackToScanningWithIdenticalResults() throws {
        let fixture = try makeFixture(seed: 0xC0E1)
        defer { fixture.dir.remove() }
        let baseline = try CaskStore.open(at: fixture.dir.path, options: options(readOnly: true))
        XCTAssertTrue(baseline.recoveryReport.isClean && baseline.recoveryReport.invalidHints.isEmpty, "\(baseline.recoveryReport)")
        XCTAssertEqual(baseline.recoveryReport.segmentsFromHints, fixture.ids.count)
        let baselineStats = try baseline.statistics()
        let baselineRecords = baseline.recoveryReport.recordsScanned
        try baseline.close()

        let id = fixture.sealed[fixture.sealed.count / 2]
        let hintPath = StoreFiles.hintPath(fixture.dir.path, id)
        let hint = try StoreFiles.read(hintPath)
        var rng = SeededGenerator(seed: 0x41A7)
        // The whole header, every block header byte, and a spread of entry bytes.
        var positions = Array(0..<min(hint.count, HintFile.headerLength + HintFile.blockHeaderLength))
        positions += stride(from: positions.count, to: hint.count, by: 5)
        positions.append(hint.count - 1)
        for position in positions {
            let mask = UInt8.random(in: 1...255, using: &rng)
            try StoreFiles.flip(hintPath, at: position, mask: mask)
            defer { try? StoreFiles.flip(hintPath, at: position, mask: mask) }
            let context = "hint byte \(position) of \(hint.count) ^ 0x\(String(mask, radix: 16))"
            let store = try CaskStore.open(at: fixture.dir.path, options: options(readOnly: true))
            let report = store.recoveryReport
            XCTAssertEqual(report.invalidHints.map(\.file), [hintPath], "\(context): \(report)")
            XCTAssertEqual(report.segmentsFromHints, fixture.ids.count - 1, context)
            XCTAssertTrue(report.isClean, "\(context): \(report)")
            XCTAssertEqual(report.recordsScanned, baselineRecords, context)
            let stats = try store.statistics()
            XCTAssertEqual(stats.segments, baselineStats.segments, context)
            XCTAssertEqual(stats.keys, baselineStats.keys, context)
            assertStore(store, matches: fixture.model, context)
            try store.close()
        }
        XCTAssertEqual(try StoreFiles.read(hintPath), hint, "read-only opens must leave the hint alone")

        // Truncated and emptied hints, and the hint of another segment under this name.
        let otherHint = try StoreFiles.read(StoreFiles.hintPath(fixture.dir.path, fixture.sealed[0]))
        for (label, bytes) in [("empty", [UInt8]()), ("cut", Array(hint.prefix(hint.count / 2))), ("another segment's", otherHint)] {
            try StoreFiles.write(hintPath, bytes)
            let store = try CaskStore.open(at: fixture.dir.path, options: options(readOnly: true))
            XCTAssertEqual(store.recoveryReport.invalidHints.map(\.file), [hintPath], label)
            XCTAssertEqual(try store.statistics().segments, baselineStats.segments, label)
            assertStore(store, matches: fixture.model, label)
            try store.close()
        }

        // A writable open replaces the bad hint with a good one.
        try StoreFiles.flip(hintPath, at: hint.count / 2)
        var writable = options()
        writable.writeHints = true
        let repairing = try CaskStore.open(at: fixture.dir.path, options: writable)
        XCTAssertEqual(repairing.recoveryReport.invalidHints.map(\.file), [hintPath])
        try repairing.close()
        let repaired = try CaskStore.open(at: fixture.dir.path, options: options(readOnly: true))
        XCTAssertTrue(repaired.recoveryReport.invalidHints.isEmpty, "\(repaired.recoveryReport)")
        XCTAssertEqual(repaired.recoveryReport.segmentsFromHints, fixture.ids.count)
        assertStore(repaired, matches: fixture.model, "after the writable open replaced the hint")
        try repaired.close()
    }

    // MARK: Format version

    func testUnsupportedFormatVersionIsATypedError() throws {
        let fixture = try makeFixture(seed: 0xC0E2)
        defer { fixture.dir.remove() }
        for id in [fixture.ids.first!, fixture.ids.last!] {
            let path = fixture.path(id)
            let original = try StoreFiles.read(path)
            var newer = original
            newer[8] = 5  // format version 5, with a valid header checksum: a newer Cask wrote it
            StoreFiles.rechecksumSegmentHeader(&newer)
            try StoreFiles.write(path, newer)
            for readOnly in [false, true] {
                XCTAssertThrowsError(try CaskStore.open(at: fixture.dir.path, options: options(readOnly: readOnly)), "segment \(id)") { error in
                    XCTAssertEqual(error as? CaskError, .unsupportedFormat(path: path, version: 5))
                    XCTAssertEqual("\(error)", "\(path) has format version 5, which this Cask (formats 1 to 4) cannot read")
                }
            }
            XCTAssertEqual(try StoreFiles.read(path), newer, "a failed open must not rewrite the newer file")
            // Put back, the store opens for writing again: the failed open released its lock.
            try StoreFiles.write(path, original)
            let store = try CaskStore.open(at: fixture.dir.path, options: options())
            XCTAssertEqual(store.count, fixture.model.count)
            try store.close()
        }
    }

    // MARK: Gets past another key's entry

    /// A store of 30,000 small keys (enough for a few hundred tag collisions), and its contents.
    private func makeTagCollisionStore(at path: String, seed: UInt64) throws -> (CaskStore, [[UInt8]: [UInt8]]) {
        let store = try CaskStore.open(at: path, options: CaskStore.Options(durability: .os))
        var rng = SeededGenerator(seed: seed)
        var model: [[UInt8]: [UInt8]] = [:]
        for i in 0..<30_000 {
            let key = Array("k-\(i)".utf8), value = rng.bytes(Int.random(in: 20...60, using: &rng))
            try store.put(key, value)
            model[key] = value
        }
        return (store, model)
    }

    /// Keys whose probe path meets another key's entry with the same tag first, and where that
    /// entry points (the decoy).
    private func detours(in store: CaskStore, keys: some Collection<[UInt8]>) -> [(key: [UInt8], decoy: RecordLocation)] {
        store.state.read { shared in
            keys.compactMap { key in
                key.withUnsafeBytes { raw in
                    guard let probable = shared.index.probableLocation(raw), probable != shared.index.lookup(raw) else { return nil }
                    return (key, probable)
                }
            }
        }
    }

    /// A get reads the record at the first index entry whose 7-bit hash tag matches and checks the
    /// key in that record; when the entry is another key's, it looks the key up exactly. The value
    /// is right either way, and damage in the other key's record is that key's problem only.
    func testGetFindsItsKeyPastAnotherKeysEntryWithTheSameTag() throws {
        let dir = TemporaryDirectory("cask-tag-collision")
        defer { dir.remove() }
        let (store, model) = try makeTagCollisionStore(at: dir.path, seed: 0x7A6)
        let detours = self.detours(in: store, keys: model.keys)
        XCTAssertGreaterThan(detours.count, 20, "too few tag collisions to test the detour")
        XCTAssertLessThan(detours.count, model.count / 50)
        for (key, value) in model { XCTAssertEqual(try store.get(key), value) }

        // Damage the value of the record a detour passes first.
        let (key, decoy) = detours[0]
        let owner = try XCTUnwrap(model.keys.first { owner in
            owner.withUnsafeBytes { raw in store.state.read { $0.index.lookup(raw) } } == decoy
        })
        let path = try XCTUnwrap(store.state.read { $0.segments[decoy.segmentID]?.path })
        try StoreFiles.flip(path, at: Int(decoy.offset) + Int(decoy.length) - 1)
        XCTAssertEqual(try store.get(key), model[key], "the detour must not stop at the damaged record")
        XCTAssertThrowsError(try store.get(owner)) { error in
            guard case CaskError.corruptRecord(let damaged, let offset, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(damaged, path)
            XCTAssertEqual(offset, Int64(decoy.offset))
        }
        try store.close()
    }

    /// An entry that points where no segment is any more: a hint that disagrees with its segment
    /// can leave one (it names another key, or another record, at an offset), once a compaction
    /// drops the record and deletes the segment. That entry's key then reads as absent; every
    /// other key, including those whose probe path meets the entry first, still reads its value.
    func testGetFindsItsKeyPastAnotherKeysEntryWhoseSegmentIsGone() throws {
        let dir = TemporaryDirectory("cask-tag-collision")
        defer { dir.remove() }
        let (store, contents) = try makeTagCollisionStore(at: dir.path, seed: 0x7A7)
        var model = contents
        // Each decoy's owner points at a segment that does not exist.
        let decoys = Set(detours(in: store, keys: model.keys).map(\.decoy))
        let owners: [[UInt8]] = store.state.write { shared in
            let owners = model.keys.filter { key in key.withUnsafeBytes { decoys.contains(shared.index.lookup($0)!) } }
            for owner in owners {
                owner.withUnsafeBytes { raw in
                    let old = shared.index.lookup(raw)!
                    shared.index.upsert(raw, RecordLocation(segmentID: 4_000, offset: old.offset, length: old.length))
                }
            }
            return owners
        }
        XCTAssertGreaterThan(owners.count, 20, "too few tag collisions to test the detour")
        for owner in owners {
            XCTAssertNil(try store.get(owner))
            model[owner] = nil
        }
        for (key, value) in model {
            XCTAssertEqual(try store.get(key), value)
            XCTAssertEqual(try store.withValue(key) { Array($0) }, value)
        }
        try store.close()
    }
}
