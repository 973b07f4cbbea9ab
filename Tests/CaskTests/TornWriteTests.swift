import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// A crash can leave the last segment cut anywhere, or followed by garbage. Opening must cut the
/// torn tail, report it, and keep every record written before it.
final class TornWriteTests: XCTestCase {
    /// A closed store of a few 8 KiB segments whose last segment ends with a known mix of records.
    private struct Fixture {
        let dir: TemporaryDirectory
        /// What was written, by the test's own bookkeeping.
        let model: [[UInt8]: [UInt8]]
        /// Every record of every segment but the last.
        let earlier: [StoreFiles.Record]
        /// The records of the last segment.
        let last: [StoreFiles.Record]
        let lastID: UInt64
        var lastPath: String { StoreFiles.segmentPath(dir.path, lastID) }
        var all: [StoreFiles.Record] { earlier + last }
    }

    private func makeFixture(seed: UInt64) throws -> Fixture {
        var rng = SeededGenerator.fromEnvironment(fallback: seed)
        print("TornWriteTests: seed \(rng.seed)")
        let dir = TemporaryDirectory("cask-torn")
        var options = CaskStore.Options(durability: .os)
        options.maxSegmentSize = 8 << 10
        let store = try CaskStore.open(at: dir.path, options: options)
        var model: [[UInt8]: [UInt8]] = [:]
        func put(_ key: String, _ value: [UInt8], expiresAt: UInt64? = nil) throws {
            let key = Array(key.utf8)
            if let expiresAt {
                try key.withUnsafeBytes { k in try value.withUnsafeBytes { v in _ = try store.write(.put, key: k, value: v, expiresAt: expiresAt) } }
            } else {
                try store.put(key, value)
            }
            model[key] = value
        }
        func delete(_ key: String) throws {
            XCTAssertTrue(try store.delete(key))
            model[Array(key.utf8)] = nil
        }
        for i in 0..<60 {
            let value = i % 2 == 0 ? rng.bytes(Int.random(in: 10...300, using: &rng)) : [UInt8](repeating: UInt8(i), count: 150)
            try put("k\(i)", value)
        }
        for i in stride(from: 0, to: 60, by: 7) { try delete("k\(i)") }
        // Start a fresh segment for the records under test if the current one is nearly full.
        let used = try store.statistics().segments.last!.fileBytes
        if used > 5_000 {
            for i in 0..<20 { try put("filler\(i)", rng.bytes(200)) }
        }
        // The records the cuts go through: overwrites, a delete, a new key, compressed and raw
        // values, an expiry time, and a key deleted right after being created.
        try put("k1", rng.bytes(90))
        try delete("k2")
        try put("fresh", [UInt8](repeating: 0x66, count: 200))
        // A fixed far-future expiry (2100-01-01), not now + 1 h: the record's bytes (its checksum
        // among them) must be the same in every run, or a cut a byte past a record boundary meets a
        // zero first byte about once in 256 runs and reads as reserved space, not a torn record.
        try put("k3", rng.bytes(50), expiresAt: 4_102_444_800_000)
        try put("k1", Array("the newest k1".utf8))
        try delete("fresh")
        try put("k4", [])
        try store.close()

        let ids = try StoreFiles.segmentIDs(in: dir.path)
        XCTAssertGreaterThanOrEqual(ids.count, 2, "expected several segments")
        var earlier: [StoreFiles.Record] = []
        for id in ids.dropLast() { earlier += try StoreFiles.records(ofSegment: StoreFiles.segmentPath(dir.path, id)) }
        let last = try StoreFiles.records(ofSegment: StoreFiles.segmentPath(dir.path, ids.last!))
        XCTAssertGreaterThanOrEqual(last.count, 7)
        let fixture = Fixture(dir: dir, model: model, earlier: earlier, last: last, lastID: ids.last!)
        // The records on disk say exactly what the test wrote: they can serve as the oracle.
        XCTAssertTrue(StoreFiles.replay(fixture.all) == model, "replaying the segments does not give the written contents")
        return fixture
    }

    // MARK: Cuts

    func testCutAtEveryByteOfTheLastRecords() throws {
        let fixture = try makeFixture(seed: 0x7042)
        defer { fixture.dir.remove() }
        let original = try StoreFiles.snapshot(fixture.dir.path)
        let lastName = SegmentName.segment(fixture.lastID)
        let hintName = SegmentName.hint(fixture.lastID)
        let underTest = fixture.last.suffix(7)
        let boundaries = Set(underTest.map(\.offset) + underTest.map(\.end))
        let fullLength = fixture.last.last!.end
        XCTAssertEqual(original[lastName]?.count, fullLength)
        var cuts = 0, reported = 0
        for cut in underTest.first!.offset...fullLength {
            let scratch = TemporaryDirectory("cask-torn-cut")
            defer { scratch.remove() }
            // Every 10th cut keeps the last segment's hint, which then covers more than the file: the
            // segment lost records that were synced (a hint is written only then), which is damage.
            let keepHint = cut % 10 == 0
            let lostTail = keepHint && cut < fullLength
            for (name, bytes) in original where !name.hasSuffix(".hint") || (keepHint && name == hintName) {
                try StoreFiles.write(scratch.appending(name), name == lastName ? Array(bytes.prefix(cut)) : bytes)
            }
            let keptOfLast = fixture.last.filter { $0.end <= cut }
            let boundary = keptOfLast.last?.end ?? SegmentHeader.length
            let expected = StoreFiles.replay(fixture.earlier + keptOfLast)
            let context = "cut at \(cut) of \(fullLength)"

            let store = try CaskStore.open(at: scratch.path, options: .smallSegmentsWithoutHints())
            let report = store.recoveryReport
            XCTAssertEqual(report.damagedRanges.map(\.offset), lostTail ? [Int64(cut)] : [], "\(context): \(report)")
            if boundaries.contains(cut) {
                XCTAssertTrue(report.truncations.isEmpty, "\(context) is a record boundary: \(report)")
            } else {
                XCTAssertEqual(report.truncations.count, 1, "\(context): \(report)")
                if let truncation = report.truncations.first {
                    XCTAssertEqual(truncation.file, scratch.appending(lastName), context)
                    XCTAssertEqual(truncation.offset, Int64(boundary), context)
                    XCTAssertEqual(truncation.bytesRemoved, Int64(cut - boundary), context)
                    XCTAssertFalse(truncation.reason.isEmpty)
                    reported += 1
                }
            }
            if keepHint && cut < fullLength {
                XCTAssertEqual(report.invalidHints.map(\.file), [scratch.appending(hintName)], "\(context): a hint covering more than the file")
            }
            XCTAssertEqual(try StoreFiles.fileSize(scratch.appending(lastName)), boundary, "\(context): file length after the cut")
            assertStore(store, matches: expected, context)
            // The store keeps working from the cut: a write lands after the last good record.
            if cut % 4 == 0 {
                try store.put("after-cut", [1, 2, 3])
                try store.close()
                let again = try CaskStore.open(at: scratch.path, options: .smallSegmentsWithoutHints())
                XCTAssertEqual(again.recoveryReport.damagedRanges.map(\.offset), lostTail ? [Int64(boundary)] : [], "\(context), reopened: \(again.recoveryReport)")
                XCTAssertTrue(again.recoveryReport.truncations.isEmpty, "\(context), reopened: \(again.recoveryReport)")
                var expectedAfter = expected
                expectedAfter[Array("after-cut".utf8)] = [1, 2, 3]
                assertStore(again, matches: expectedAfter, context + ", after a write and a reopen")
                try again.close()
            } else {
                try store.close()
            }
            cuts += 1
        }
        XCTAssertGreaterThan(reported, 100)
        print("TornWriteTests: \(cuts) cuts, \(reported) truncations reported")
    }

    func testReadOnlyOpenOfATornStoreChangesNothing() throws {
        let fixture = try makeFixture(seed: 0x7043)
        defer { fixture.dir.remove() }
        try StoreFiles.removeHints(in: fixture.dir.path)
        for record in fixture.last.suffix(3) {
            let cut = record.offset + record.length / 2
            let scratch = TemporaryDirectory("cask-torn-ro")
            defer { scratch.remove() }
            try StoreFiles.copy(from: fixture.dir.path, to: scratch.path)
            try StoreFiles.truncate(scratch.appending(SegmentName.segment(fixture.lastID)), to: cut)
            let before = try StoreFiles.snapshot(scratch.path)
            let store = try CaskStore.open(at: scratch.path, options: .readOnly)
            XCTAssertTrue(store.recoveryReport.truncations.isEmpty, "read-only must not cut: \(store.recoveryReport)")
            XCTAssertFalse(store.recoveryReport.isClean, "the torn tail is still reported: \(store.recoveryReport)")
            assertStore(store, matches: StoreFiles.replay(fixture.earlier + fixture.last.filter { $0.end <= cut }), "read-only, cut at \(cut)")
            XCTAssertThrowsError(try store.put("x", [1])) { XCTAssertEqual($0 as? CaskError, .readOnly(path: store.directory)) }
            try store.close()
            XCTAssertTrue(try StoreFiles.snapshot(scratch.path) == before, "a read-only open modified the store")
        }
    }

    // MARK: Garbage after the last record

    func testGarbageAfterTheLastRecordIsCut() throws {
        let fixture = try makeFixture(seed: 0x7044)
        defer { fixture.dir.remove() }
        var rng = SeededGenerator(seed: 0x6A7B)
        let fullLength = fixture.last.last!.end
        let segment = try StoreFiles.read(fixture.lastPath)
        let lastRecord = Array(segment[fixture.last.last!.offset...])
        var hugeHeader: [UInt8] = [0, 0, 0, 0, 1, 0, 5]
        var buffer = ByteBuffer(capacity: 16)
        buffer.append(varint: UInt64(Limits.maxKeyLength))
        buffer.append(varint: UInt64(Limits.maxValueLength))
        hugeHeader += buffer.copyBytes()
        let tails: [(String, [UInt8])] = [
            ("1 zero byte", [0]),
            ("7 zero bytes", [UInt8](repeating: 0, count: 7)),
            ("4 KiB of zeros", [UInt8](repeating: 0, count: 4096)),
            ("1 MiB of zeros", [UInt8](repeating: 0, count: 1 << 20)),
            ("2 MiB of zeros", [UInt8](repeating: 0, count: 2 << 20)),
            ("more zeros than a writer reserves", [UInt8](repeating: 0, count: (2 << 20) + 1)),
            ("1 random byte", rng.bytes(1)),
            ("300 random bytes", rng.bytes(300)),
            ("5000 random bytes", rng.bytes(5000)),
            ("a record with a bad checksum", [lastRecord[0] ^ 1] + lastRecord.dropFirst()),
            ("the first half of a record", Array(lastRecord.prefix(lastRecord.count / 2))),
            ("a header claiming the largest key and value", hugeHeader + rng.bytes(100)),
            ("0xFF bytes", [UInt8](repeating: 0xFF, count: 64)),
        ]
        for (name, tail) in tails {
            for keepHints in [false, true] {
                let scratch = TemporaryDirectory("cask-torn-garbage")
                defer { scratch.remove() }
                try StoreFiles.copy(from: fixture.dir.path, to: scratch.path)
                if !keepHints { try StoreFiles.removeHints(in: scratch.path) }
                let path = scratch.appending(SegmentName.segment(fixture.lastID))
                try StoreFiles.append(path, tail)
                let context = "\(name), hints \(keepHints)"

                // Zeros are space a writer reserved (FORMAT.md, "Reserved space"): the same checks
                // as any other garbage, and they are cut too, but they are no damage and no report.
                let reserved = tail.count <= StoreWriter.maxReservedSpace && tail.allSatisfy { $0 == 0 }
                let readOnly = try CaskStore.open(at: scratch.path, options: .readOnly)
                XCTAssertEqual(readOnly.recoveryReport.isClean, reserved, "\(context), read-only: \(readOnly.recoveryReport)")
                assertStore(readOnly, matches: fixture.model, "\(context), read-only")
                try readOnly.close()
                XCTAssertEqual(try CaskStore.verify(at: scratch.path).isClean, reserved, "\(context), verify")

                let store = try CaskStore.open(at: scratch.path, options: .smallSegmentsWithoutHints())
                let report = store.recoveryReport
                XCTAssertTrue(report.damagedRanges.isEmpty, "\(context): \(report)")
                if reserved {
                    XCTAssertTrue(report.isClean, "\(context): \(report)")
                } else {
                    XCTAssertEqual(report.truncations.map(\.file), [path], "\(context): \(report)")
                    XCTAssertEqual(report.truncations.first?.offset, Int64(fullLength), context)
                    XCTAssertEqual(report.truncations.first?.bytesRemoved, Int64(tail.count), context)
                    XCTAssertEqual(report.bytesTruncated, Int64(tail.count), context)
                }
                XCTAssertTrue(report.invalidHints.isEmpty, "\(context): \(report)")
                XCTAssertEqual(try StoreFiles.fileSize(path), fullLength, context)
                assertStore(store, matches: fixture.model, context)
                try store.put("after-garbage", [9])
                try store.close()
                let again = try CaskStore.open(at: scratch.path, options: .smallSegmentsWithoutHints())
                XCTAssertTrue(again.recoveryReport.isClean, "\(context), reopened: \(again.recoveryReport)")
                XCTAssertEqual(try again.get("after-garbage"), [9], context)
                try again.close()
            }
        }
    }

    // MARK: A torn segment header

    /// A crash right after a new segment file was created: its 40-byte header is incomplete
    /// (cut short, or of the right length but not all written).
    func testTornHeaderOfAFreshLastSegment() throws {
        let fixture = try makeFixture(seed: 0x7045)
        defer { fixture.dir.remove() }
        let newID = fixture.lastID + 1
        let header = SegmentHeader(segmentID: newID, baseSeq: fixture.all.map(\.seq).max()! + 1).encoded()
        var variants: [(String, [UInt8])] = []
        for length in 0...SegmentHeader.length { variants.append(("\(length) header bytes", Array(header.prefix(length)))) }
        for length in [0, 8, 20, 39] {
            variants.append(("\(length) header bytes then zeros", Array(header.prefix(length)) + [UInt8](repeating: 0, count: SegmentHeader.length - length)))
        }
        for (name, bytes) in variants {
            let scratch = TemporaryDirectory("cask-torn-header")
            defer { scratch.remove() }
            try StoreFiles.copy(from: fixture.dir.path, to: scratch.path)
            let path = scratch.appending(SegmentName.segment(newID))
            try StoreFiles.write(path, bytes)
            let complete = bytes == header

            // Read-only: opens, sees everything, changes nothing.
            let before = try StoreFiles.snapshot(scratch.path)
            let reader = try CaskStore.open(at: scratch.path, options: .readOnly)
            assertStore(reader, matches: fixture.model, "\(name), read-only")
            try reader.close()
            XCTAssertTrue(try StoreFiles.snapshot(scratch.path) == before, "\(name): a read-only open modified the store")

            // Writable: opens, repairs the header, and the store keeps working.
            let store = try CaskStore.open(at: scratch.path, options: .smallSegmentsWithoutHints())
            let report = store.recoveryReport
            if complete {
                XCTAssertTrue(report.isClean, "\(name): \(report)")
            } else {
                XCTAssertTrue(report.damagedRanges.isEmpty, "\(name): \(report)")
                XCTAssertEqual(report.truncations.map(\.file), [path], "\(name): \(report)")
            }
            assertStore(store, matches: fixture.model, name)
            try store.put("after-header", [4, 2])
            try store.close()
            let repaired = try StoreFiles.read(path)
            XCTAssertEqual(repaired.prefix(8), header.prefix(8), "\(name): magic")
            XCTAssertEqual(Array(repaired.prefix(SegmentHeader.length)).withUnsafeBytes { SegmentHeader.decode($0, encryption: nil) }.map(\.0.segmentID), .success(newID), name)

            let again = try CaskStore.open(at: scratch.path, options: .smallSegmentsWithoutHints())
            XCTAssertTrue(again.recoveryReport.isClean, "\(name), reopened: \(again.recoveryReport)")
            var expected = fixture.model
            expected[Array("after-header".utf8)] = [4, 2]
            assertStore(again, matches: expected, "\(name), reopened")
            try again.close()
        }
    }

    /// A version 4 header cut short after its first 40 bytes, with no record after them: a torn
    /// creation, whose bytes every reader names as one torn tail over the whole file (verify, dump
    /// and repair also reported the bytes from 40 a second time, as a torn tail of their own, and
    /// repair counted them twice among what it drops).
    func testACutVersion4HeaderIsOneTornTail() throws {
        let fixture = try makeFixture(seed: 0x7046)
        defer { fixture.dir.remove() }
        let newID = fixture.lastID + 1
        let header = SegmentHeader(
            segmentID: newID, baseSeq: fixture.all.map(\.seq).max()! + 1, keyPrefix: Array("drafts/ada/".utf8)).encoded()
        for length in [41, 42, 48, header.count - 1] {
            let scratch = TemporaryDirectory("cask-torn-header-4")
            defer { scratch.remove() }
            try StoreFiles.copy(from: fixture.dir.path, to: scratch.path)
            let path = scratch.appending(SegmentName.segment(newID))
            try StoreFiles.write(path, Array(header.prefix(length)))
            let verification = try CaskStore.verify(at: scratch.path)
            XCTAssertEqual(verification.damagedRanges.map { [$0.offset, $0.length] }, [[0, Int64(length)]], "\(length) bytes: \(verification)")
            XCTAssertEqual(verification.damagedRanges.map(\.kind), [.tornTail], "\(length) bytes")
            let repair = try CaskStore.repair(at: scratch.path, dryRun: true)
            XCTAssertEqual(repair.bytesDropped, Int64(length), "\(length) bytes: \(repair)")
            _ = try SecondReaderTests.compareReaders(scratch.path, label: "a version 4 header cut to \(length) bytes")
        }
    }

    /// The newest segment when it has a hint file was sealed (a hint is written only then): a header
    /// of it cut short or zeroed is damage, reported by every open, never a torn creation that a
    /// writer's open rewrites. Found by trying the tool: a compaction's output (the newest id) cut
    /// to 10 bytes read as a store without its keys, with no warning, and the next `put` wrote a new
    /// header over it.
    func testACutHeaderOfASealedNewestSegmentIsDamage() throws {
        let fixture = try makeFixture(seed: 0x7048)
        defer { fixture.dir.remove() }
        XCTAssertTrue(FileManager.default.fileExists(atPath: StoreFiles.hintPath(fixture.dir.path, fixture.lastID)))
        let zeros = [UInt8](repeating: 0, count: SegmentHeader.length)
        let original = try StoreFiles.read(fixture.lastPath)
        let variants: [(String, [UInt8])] = [
            ("cut to 0 bytes", []), ("cut to 10 bytes", Array(original.prefix(10))), ("cut to 39 bytes", Array(original.prefix(39))),
            ("a zeroed header, nothing after", zeros),
        ]
        let model = StoreFiles.replay(fixture.earlier)
        for (name, bytes) in variants {
            let scratch = TemporaryDirectory("cask-sealed-header")
            defer { scratch.remove() }
            try StoreFiles.copy(from: fixture.dir.path, to: scratch.path)
            let path = scratch.appending(SegmentName.segment(fixture.lastID))
            try StoreFiles.write(path, bytes)

            let reader = try CaskStore.open(at: scratch.path, options: .readOnly)
            XCTAssertTrue(reader.recoveryReport.damagedRanges.contains { $0.file == path }, "\(name), read-only: \(reader.recoveryReport)")
            assertStore(reader, matches: model, "\(name), read-only")
            try reader.close()

            let store = try CaskStore.open(at: scratch.path, options: .smallSegmentsWithoutHints())
            XCTAssertTrue(store.recoveryReport.damagedRanges.contains { $0.file == path }, "\(name): \(store.recoveryReport)")
            XCTAssertFalse(store.recoveryReport.truncations.contains { $0.file == path }, "\(name): \(store.recoveryReport)")
            assertStore(store, matches: model, name)
            try store.put("after-damage", [4, 2])
            try store.close()
            XCTAssertEqual(try StoreFiles.read(path), bytes, "\(name): the damaged segment was written to")

            let again = try CaskStore.open(at: scratch.path, options: .smallSegmentsWithoutHints())
            XCTAssertTrue(again.recoveryReport.damagedRanges.contains { $0.file == path }, "\(name), reopened: \(again.recoveryReport)")
            var expected = model
            expected[Array("after-damage".utf8)] = [4, 2]
            assertStore(again, matches: expected, "\(name), reopened")
            try again.close()
        }
        // A store of one segment, closed (so hinted), its header cut: no segment is active, and a
        // writer starts a new one rather than take the damaged one for a torn creation.
        let single = TemporaryDirectory("cask-sealed-single")
        defer { single.remove() }
        let store = try CaskStore.open(at: single.path)
        for i in 0..<10 { try store.put("k\(i)", Array("value \(i)".utf8)) }
        try store.close()
        let segment = StoreFiles.segmentPath(single.path, 1)
        XCTAssertTrue(FileManager.default.fileExists(atPath: StoreFiles.hintPath(single.path, 1)))
        try StoreFiles.truncate(segment, to: 10)
        _ = try SecondReaderTests.compareReaders(single.path, label: "one hinted segment cut to 10 bytes")  // and the reader from FORMAT.md agrees
        let reader = try CaskStore.open(at: single.path, options: .readOnly)
        XCTAssertTrue(reader.recoveryReport.damagedRanges.contains { $0.file == segment }, "\(reader.recoveryReport)")
        try reader.close()
        let writer = try CaskStore.open(at: single.path, options: .smallSegmentsWithoutHints())
        XCTAssertTrue(writer.recoveryReport.damagedRanges.contains { $0.file == segment }, "\(writer.recoveryReport)")
        try writer.put("after", [1])
        try writer.close()
        XCTAssertEqual(try StoreFiles.fileSize(segment), 10, "the damaged segment is left as it is")
        XCTAssertEqual(try StoreFiles.segmentIDs(in: single.path), [1, 2], "a new segment takes the writes")
    }

    // MARK: Hints of a cut segment

    /// A hint that covers more than its segment (the segment lost its tail: a hint is written only
    /// once its segment is synced) is rejected, and the loss reported, not just cut: the segment is
    /// damaged, so it is never appended to again (later writes go to a new segment and cannot bring
    /// the stale hint back to life), and the hint stays as the record of what was lost.
    func testStaleHintOfACutSegmentIsNotRevivedByLaterWrites() throws {
        let fixture = try makeFixture(seed: 0x7046)
        defer { fixture.dir.remove() }
        let hintPath = StoreFiles.hintPath(fixture.dir.path, fixture.lastID)
        XCTAssertTrue(FileManager.default.fileExists(atPath: hintPath))
        let cutRecord = fixture.last[fixture.last.count - 4]
        try StoreFiles.truncate(fixture.lastPath, to: cutRecord.offset + 3)
        var options = CaskStore.Options.smallSegmentsWithoutHints()  // nothing rewrites the hint on close
        options.maxSegmentSize = 1 << 20
        let store = try CaskStore.open(at: fixture.dir.path, options: options)
        XCTAssertEqual(store.recoveryReport.invalidHints.map(\.file), [hintPath], "\(store.recoveryReport)")
        XCTAssertEqual(store.recoveryReport.truncations.map(\.offset), [Int64(cutRecord.offset)])
        let lost = DamagedRange(
            kind: .record, file: fixture.lastPath, segmentID: fixture.lastID, offset: Int64(cutRecord.offset + 3), length: Int64(fixture.last.last!.end - cutRecord.offset - 3),
            reason: "the segment ends at \(cutRecord.offset + 3) bytes but its hint file describes \(fixture.last.last!.end): records at its end were lost ('cask recover --dry-run' names them)")
        XCTAssertEqual(store.recoveryReport.damagedRanges, [lost])
        var expected = StoreFiles.replay(fixture.earlier + fixture.last.filter { $0.end <= cutRecord.offset })
        assertStore(store, matches: expected, "after the cut")
        var rng = SeededGenerator(seed: 46)
        for i in 0..<100 {
            let value = rng.bytes(40)
            try store.put("grow\(i)", value)
            expected[Array("grow\(i)".utf8)] = value
        }
        try store.close()
        XCTAssertEqual(try StoreFiles.fileSize(fixture.lastPath), cutRecord.offset, "never appended to")
        XCTAssertTrue(FileManager.default.fileExists(atPath: hintPath), "the hint is kept")
        let again = try CaskStore.open(at: fixture.dir.path, options: options)
        XCTAssertEqual(again.recoveryReport.damagedRanges.map(\.offset), [Int64(cutRecord.offset)], "\(again.recoveryReport)")
        assertStore(again, matches: expected, "after growing past the stale hint")
        try again.close()
    }
    /// The open refuses a hint that declares more than its segment from the hint's header alone: its
    /// body is never read (a crafted header could otherwise make every open read gigabytes), and the
    /// loss it shows is reported as when the body is read.
    func testTheOpenReadsOnlyTheHeaderOfAHintLongerThanItsSegment() throws {
        let fixture = try makeFixture(seed: 0x7047)
        defer { fixture.dir.remove() }
        let hintPath = StoreFiles.hintPath(fixture.dir.path, fixture.lastID)
        let cutRecord = fixture.last[fixture.last.count - 4]
        try StoreFiles.truncate(fixture.lastPath, to: cutRecord.offset + 3)
        let fileSystem = FaultInjectingFileSystem()
        var options = CaskStore.Options.smallSegmentsWithoutHints()
        options.maxSegmentSize = 1 << 20
        options.fileSystem = fileSystem
        options.readOnly = true
        let store = try CaskStore.open(at: fixture.dir.path, options: options)
        let hintReads = fileSystem.trace.filter { $0.operation == .pread && $0.path == hintPath }
        XCTAssertFalse(hintReads.isEmpty)
        // The longest header: 48 bytes and a key prefix of up to 255 (96 encrypted).
        XCTAssertTrue(hintReads.allSatisfy { ($0.offset ?? 0) + Int64($0.length ?? 0) <= Int64(HintFile.maxHeaderLength) }, "\(hintReads)")
        XCTAssertEqual(store.recoveryReport.invalidHints.map(\.reason), ["it describes \(fixture.last.last!.end) bytes of a segment of \(cutRecord.offset + 3)"])
        // Read-only, the cut record's 3 bytes stay, a torn tail; past them, the records the hint shows lost.
        XCTAssertEqual(store.recoveryReport.damagedRanges.map(\.kind), [.tornTail, .record], "\(store.recoveryReport)")
        XCTAssertEqual(store.recoveryReport.damagedRanges.map(\.offset), [Int64(cutRecord.offset), Int64(cutRecord.offset + 3)])
        XCTAssertEqual(store.recoveryReport.damagedRanges.last?.length, Int64(fixture.last.last!.end - cutRecord.offset - 3))
        try store.close()
    }
}
