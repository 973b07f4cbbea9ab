import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// Every reader of a store — the open (read-only and writable), `verify`, `inspect` and repair —
/// reads it through one ``StoreDirectory`` and one ``SegmentReader``, so on the same bytes they
/// agree: the same damaged ranges with the same kinds, the same ignored files, the same live keys.
/// One corpus of damaged and odd stores (issue 22's findings), each read by all of them.
final class ReaderAgreementTests: XCTestCase {
    /// What every reader made of one store.
    private struct Readings {
        /// Damaged ranges the read-only open reported, as `kind file@offset+length`.
        var open: Set<String>
        /// `verify`'s problems, as `kind file@offset+length`.
        var verify: [String]
        /// `inspect`'s damage items, the same way.
        var inspect: [String]
        var verifyClean: Bool
        var repairClean: Bool
        var repair: RepairReport
        /// The keys (with values) a read-only open reads.
        var contents: [String: String]
        var openIgnored: [String]
        var verifyIgnored: [String]

        /// The ranges the dry-run repair would drop, adjacent ones of a kind merged, the same way.
        var repairDropped: [String]
        /// `verify`'s ranges as a repair drops them: inside the file (a lost tail is past its end),
        /// the manifest apart (a repair removes the file), adjacent ones of a kind merged.
        var verifyDropped: [String]
        /// What the `cask` tool made of the store, command by command.
        var tool: ToolReadings
    }

    /// The `cask` commands' readings, in the library's terms, with their exit statuses.
    private struct ToolReadings {
        var verify: (status: Int32, ranges: [String])
        var dump: [String]
        var statDamagedRanges: Int?
        var export: (status: Int32, contents: [String: String])
        var list: (status: Int32, keys: [String])
        var recoverDryRunStatus: Int32
        /// `cask compact` on a copy (it writes): its status, and whether the copy then verifies clean
        /// of everything but the damage it must leave alone.
        var compactStatus: Int32
    }

    private func name(_ file: String) -> String { String(file.split(separator: "/").last ?? "") }

    private func read(_ directory: String, line: UInt = #line) throws -> Readings {
        let store = try CaskStore.open(at: directory, options: .readOnly)
        var contents: [String: String] = [:]
        for key in try store.keys() {
            if let value = try store.get(key) { contents[String(decoding: key, as: UTF8.self)] = String(decoding: value, as: UTF8.self) }
        }
        let recovery = store.recoveryReport
        try store.close()
        let verification = try CaskStore.verify(at: directory)
        var inspected: [String] = []
        try CaskStore.inspect(at: directory) { item in
            if case .damage(let problem) = item { inspected.append("\(problem.kind.rawValue) \(name(problem.file))@\(problem.offset)+\(problem.length)") }
        }
        let repair = try CaskStore.repair(at: directory, dryRun: true)
        let tool = try readWithTheTool(directory)
        // And the reader written from FORMAT.md alone agrees on what is live, with hints and without.
        _ = try SecondReaderTests.compareReaders(directory, label: name(directory), line: line)
        return Readings(
            open: Set(recovery.damagedRanges.map { "\($0.kind.rawValue) \(name($0.file))@\($0.offset)+\($0.length)" }),
            verify: verification.damagedRanges.map { "\($0.kind.rawValue) \(name($0.file))@\($0.offset)+\($0.length)" },
            inspect: inspected.sorted(), verifyClean: verification.isClean, repairClean: repair.isClean, repair: repair,
            contents: contents, openIgnored: recovery.ignoredFiles.map(name), verifyIgnored: verification.ignoredFiles.map(name),
            repairDropped: merged(repair.changes.flatMap(\.droppedRanges)),
            verifyDropped: merged(verification.damagedRanges.filter { range in
                range.kind != .compactionManifest && range.offset < Int64((try? StoreFiles.fileSize(range.file)) ?? 0)
            }),
            tool: tool)
    }

    /// `cask compact` on a copy of `directory`: its exit status.
    private func compactACopy(of directory: String) throws -> Int32 {
        let copy = TemporaryDirectory("cask-agreement-compact")
        defer { copy.remove() }
        try StoreFiles.copy(from: directory, to: copy.path)
        return try ToolTests.cask(["compact", copy.path]).status
    }

    /// Runs every reading command of the tool on `directory` (none changes it).
    private func readWithTheTool(_ directory: String) throws -> ToolReadings {
        func objects(_ text: String) -> [[String: Any]] {  // JSON Lines
            text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        }
        func object(_ text: String) -> [String: Any]? { try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] }
        func range(_ object: [String: Any], kind: String) -> String {
            "\(object[kind] as? String ?? "?") \(name(object["file"] as? String ?? ""))@\(object["offset"] as? Int ?? -1)+\(object["length"] as? Int ?? object["bytes"] as? Int ?? -1)"
        }
        let verify = try ToolTests.cask(["verify", directory, "--json"])
        let verifyRanges = (object(verify.out)?["problems"] as? [[String: Any]] ?? []).map { range($0, kind: "kind") }
        let dump = try ToolTests.cask(["dump", directory, "--json"])
        let dumped = objects(dump.out).filter { $0["kind"] as? String == "damage" }.map { range($0, kind: "damage") }
        let stat = try ToolTests.cask(["stat", directory, "--json"])
        let export = try ToolTests.cask(["export", directory])
        var exported: [String: String] = [:]
        for line in objects(export.out) {
            let value = (line["value"] as? String) ?? (line["valueBase64"] as? String).flatMap { Data(base64Encoded: $0) }.map { String(decoding: $0, as: UTF8.self) }
            if let key = line["key"] as? String, let value { exported[key] = value }
        }
        let list = try ToolTests.cask(["list", directory])
        let recover = try ToolTests.cask(["recover", directory, "--dry-run"])
        return ToolReadings(
            verify: (verify.status, verifyRanges), dump: dumped.sorted(),
            statDamagedRanges: object(stat.out)?["damagedRanges"] as? Int,
            export: (export.status, exported), list: (list.status, list.out.split(separator: "\n").map(String.init)),
            recoverDryRunStatus: recover.status, compactStatus: try compactACopy(of: directory))
    }

    /// `ranges` as `kind file@offset+length`, in order, each run of adjacent ranges of one kind as one.
    private func merged(_ ranges: [DamagedRange]) -> [String] {
        var runs: [DamagedRange] = []
        for range in ranges.sorted(by: { ($0.file, $0.offset) < ($1.file, $1.offset) }) {
            if let last = runs.last, last.file == range.file, last.kind == range.kind, last.end == range.offset {
                runs[runs.count - 1].length += range.length
            } else {
                runs.append(range)
            }
        }
        return runs.map { "\($0.kind.rawValue) \(name($0.file))@\($0.offset)+\($0.length)" }
    }

    /// The readers agree with each other, and on `expected` (verify's `kind file@offset+length` list).
    private func assertAgree(_ readings: Readings, _ expected: [String], _ context: String, line: UInt = #line) {
        XCTAssertEqual(readings.verify.sorted(), expected.sorted(), "\(context): verify", line: line)
        XCTAssertEqual(readings.inspect, readings.verify.filter { !$0.hasPrefix("compaction-manifest") }.sorted(), "\(context): inspect", line: line)
        XCTAssertEqual(readings.open, Set(readings.verify), "\(context): the open's report", line: line)
        XCTAssertEqual(readings.repairDropped, readings.verifyDropped, "\(context): what the repair drops", line: line)
        // The tool: the same ranges, the same live keys, the documented exit statuses.
        let damaged = !expected.isEmpty, skipped = readings.open.contains { !$0.hasPrefix("torn-tail ") }
        // Records missing from what list and export read (a damaged manifest hides none: both sides of its compaction are read).
        let missing = readings.open.contains { !$0.hasPrefix("torn-tail ") && !$0.hasPrefix("compaction-manifest ") }
        XCTAssertEqual(readings.tool.verify.status, damaged ? 65 : 0, "\(context): cask verify's status", line: line)
        XCTAssertEqual(readings.tool.verify.ranges.sorted(), readings.verify.sorted(), "\(context): cask verify", line: line)
        XCTAssertEqual(readings.tool.dump, readings.inspect, "\(context): cask dump", line: line)
        XCTAssertEqual(readings.tool.statDamagedRanges, readings.open.count, "\(context): cask stat", line: line)
        XCTAssertEqual(readings.tool.export.status, missing ? 65 : 0, "\(context): cask export's status", line: line)
        XCTAssertEqual(readings.tool.export.contents, readings.contents, "\(context): cask export", line: line)
        XCTAssertEqual(readings.tool.list.status, missing ? 65 : 0, "\(context): cask list's status", line: line)
        XCTAssertEqual(readings.tool.list.keys, readings.contents.keys.sorted(), "\(context): cask list", line: line)
        XCTAssertEqual(readings.tool.recoverDryRunStatus, damaged ? 65 : 0, "\(context): cask recover --dry-run's status", line: line)
        // A writable open cuts a torn tail; any other damage is left alone and reported.
        XCTAssertEqual(readings.tool.compactStatus, skipped ? 65 : 0, "\(context): cask compact's status", line: line)
        XCTAssertEqual(readings.verifyClean, expected.isEmpty, "\(context): verify clean", line: line)
        XCTAssertEqual(readings.repairClean, expected.isEmpty, "\(context): repair dry run clean\n\(readings.repair)", line: line)
        XCTAssertEqual(readings.openIgnored.sorted(), readings.verifyIgnored.filter { !$0.contains("replaced by a compaction") }.sorted(), "\(context): ignored files", line: line)
    }

    private func makeStore(_ body: (CaskStore) throws -> Void, options: CaskStore.Options = .init()) throws -> TemporaryDirectory {
        let directory = TemporaryDirectory("cask-agreement")
        var options = options
        options.automaticCompaction = false
        let store = try CaskStore.open(at: directory.path, options: options)
        try body(store)
        try store.close()
        return directory
    }

    /// Keys k1…k3, k1 overwritten, compacted, then k2 written again: the compaction's output has a
    /// higher id than the active segment. Reads k1 "new", k2 "after", k3 "v3".
    private func compactedStore() throws -> TemporaryDirectory {
        try makeStore { store in
            for i in 1...3 { try store.put("k\(i)", Array("v\(i)".utf8)) }
            try store.put("k1", Array("new".utf8))
            _ = try store.compact()
            try store.put("k2", Array("after".utf8))
        }
    }

    /// A writable open of a copy of `directory`, returning its report and what it reads.
    private func openWritable(_ directory: String) throws -> (RecoveryReport, [String: String]) {
        var options = CaskStore.Options()
        options.createIfMissing = false
        options.automaticCompaction = false
        let store = try CaskStore.open(at: directory, options: options)
        var contents: [String: String] = [:]
        for key in try store.keys() {
            if let value = try store.get(key) { contents[String(decoding: key, as: UTF8.self)] = String(decoding: value, as: UTF8.self) }
        }
        let report = store.recoveryReport
        try store.close()
        return (report, contents)
    }

    // MARK: The corpus

    /// Item 1: after a compaction the active segment has a lower id than the outputs. Garbage after
    /// its last record is its torn tail to every reader (and cut by a writer); the same garbage
    /// after the output's last record is damage to every reader (and left in place).
    func testTheActiveSegmentIsTheSameForEveryReader() throws {
        let directory = try compactedStore()
        let listing = try StoreDirectory(listing: directory.path, encryption: nil, fileSystem: PosixFileSystem())
        let active = try XCTUnwrap(listing.activeSegmentID)
        let sealed = try XCTUnwrap(listing.segmentIDs.last)
        XCTAssertLessThan(active, sealed, "the compaction output has the higher id")
        let expected = ["k1": "new", "k2": "after", "k3": "v3"]
        for (id, kind) in [(active, "torn-tail"), (sealed, "record")] {
            let copy = TemporaryDirectory("cask-agreement-copy")
            try StoreFiles.copy(from: directory.path, to: copy.path)
            let segment = StoreFiles.segmentPath(copy.path, id)
            let end = try StoreFiles.fileSize(segment)
            try StoreFiles.append(segment, Array("garbage".utf8))
            let readings = try read(copy.path)
            assertAgree(readings, ["\(kind) \(SegmentName.segment(id))@\(end)+7"], "garbage after segment \(id)")
            XCTAssertEqual(readings.contents, expected)
            let (report, contents) = try openWritable(copy.path)
            XCTAssertEqual(contents, expected)
            XCTAssertEqual(report.truncations.count, kind == "torn-tail" ? 1 : 0, "\(report)")
            XCTAssertEqual(try StoreFiles.fileSize(segment), kind == "torn-tail" ? end : end + 7)
        }
    }

    /// A compaction's output, the newest segment, cut short inside its header: it has a hint file,
    /// so it was sealed, and every reader reports the loss (found by trying the tool: the open took
    /// it for a torn creation, and `get`, `list` and `export` read a store without its keys, silently).
    func testACutHeaderOfASealedNewestSegmentIsDamageToEveryReader() throws {
        let directory = try compactedStore()
        let listing = try StoreDirectory(listing: directory.path, encryption: nil, fileSystem: PosixFileSystem())
        let output = try XCTUnwrap(listing.segmentIDs.last)
        XCTAssertNotEqual(listing.activeSegmentID, output)
        XCTAssertTrue(listing.hintedIDs.contains(output))
        let segment = StoreFiles.segmentPath(directory.path, output)
        let length = try StoreFiles.fileSize(segment)
        try StoreFiles.truncate(segment, to: 10)
        let readings = try read(directory.path)  // the reader written from FORMAT.md agrees, with and without hints
        let name = SegmentName.segment(output)
        let expected = ["record \(name)@10+\(length - 10)", "segment-header \(name)@0+10"]
        XCTAssertEqual(readings.verify.sorted(), expected)
        XCTAssertEqual(readings.inspect, expected)
        XCTAssertEqual(readings.open, Set(expected))
        XCTAssertEqual(readings.tool.verify.status, 65)
        XCTAssertEqual(readings.tool.verify.ranges.sorted(), expected)
        XCTAssertEqual(readings.tool.list.status, 65, "list warns of what it could not read")
        XCTAssertEqual(readings.tool.export.status, 65, "export warns of what it could not read")
        XCTAssertFalse(readings.repairClean)
        XCTAssertEqual(readings.contents, ["k2": "after"])
        XCTAssertEqual(readings.tool.list.keys, ["k2"])
        let (report, contents) = try openWritable(directory.path)
        XCTAssertEqual(contents, ["k2": "after"])
        XCTAssertTrue(report.truncations.isEmpty, "\(report)")
        XCTAssertEqual(try StoreFiles.fileSize(segment), 10, "the damaged output is left as it is")
    }

    /// Item 2: zeros after the last record (at most 2 MiB) are reserved space to every reader; a
    /// leftover temporary file is housekeeping, not damage.
    func testReservedZerosAndLeftoversAreNotDamageToAnyReader() throws {
        let directory = try makeStore { store in try store.put("k", Array("v".utf8)) }
        let segment = StoreFiles.segmentPath(directory.path, 1)
        try StoreFiles.append(segment, [UInt8](repeating: 0, count: 100_000))
        try StoreFiles.write(directory.appending("0000000001.cask.tmp"), Array("half a repair".utf8))
        let readings = try read(directory.path)
        assertAgree(readings, [], "reserved zeros")
        XCTAssertEqual(readings.contents, ["k": "v"])
        XCTAssertEqual(readings.repair.changes.map(\.kind), [.removeLeftover])
        // More zeros than a writer reserves are lost records: damage to every reader.
        try StoreFiles.append(segment, [UInt8](repeating: 0, count: Int(StoreWriter.maxReservedSpace)))
        let end = try StoreFiles.fileSize(segment)
        let records = try StoreFiles.records(ofSegment: segment).last.map(\.end) ?? 0
        assertAgree(try read(directory.path), ["torn-tail 0000000001.cask@\(records)+\(end - records)"], "too many zeros")
    }

    /// Item 3: batch members whose commit record is gone. At the end of the active segment they are
    /// its torn tail; inside it, damage that no reader applies.
    func testUncommittedBatchMembersAreTheSameToEveryReader() throws {
        let directory = try makeStore { store in
            for pair in [["a", "b"], ["c", "d"]] {
                var batch = WriteBatch()
                for key in pair { batch.put(key, Array(key.utf8)) }
                try store.write(batch)
            }
        }
        let segment = StoreFiles.segmentPath(directory.path, 1)
        let records = try StoreFiles.records(ofSegment: segment)
        XCTAssertEqual(records.map(\.type), [.put, .put, .batch, .put, .put, .batch])

        // The second commit cut off: c and d end the active segment.
        let cut = TemporaryDirectory("cask-agreement-cut")
        try StoreFiles.copy(from: directory.path, to: cut.path)
        try StoreFiles.truncate(StoreFiles.segmentPath(cut.path, 1), to: records[5].offset)
        try StoreFiles.removeHints(in: cut.path)
        let tail = records[5].offset - records[3].offset
        let readings = try read(cut.path)
        assertAgree(readings, ["torn-tail 0000000001.cask@\(records[3].offset)+\(tail)"], "second commit cut")
        XCTAssertEqual(readings.contents, ["a": "a", "b": "b"])
        let (report, contents) = try openWritable(cut.path)
        XCTAssertEqual(contents, ["a": "a", "b": "b"])
        XCTAssertEqual(report.truncations.map(\.offset), [Int64(records[3].offset)])

        // The first commit spliced out: a and b are inside the segment, never applied.
        let spliced = TemporaryDirectory("cask-agreement-splice")
        try StoreFiles.copy(from: directory.path, to: spliced.path)
        var bytes = try StoreFiles.read(segment)
        bytes.removeSubrange(records[2].offset..<records[2].end)
        try StoreFiles.write(StoreFiles.segmentPath(spliced.path, 1), bytes)
        try StoreFiles.removeHints(in: spliced.path)
        let members = records[2].offset - records[0].offset
        let splicedReadings = try read(spliced.path)
        assertAgree(splicedReadings, ["uncommitted-batch 0000000001.cask@\(records[0].offset)+\(members)"], "first commit spliced out")
        XCTAssertEqual(splicedReadings.contents, ["c": "c", "d": "d"])
    }

    /// A batch whose commit record survives but one of whose members is damaged is not applied in part.
    func testABatchWithADamagedMemberIsAppliedByNoReader() throws {
        let directory = try makeStore { store in
            try store.put("b", Array("old".utf8))
            var batch = WriteBatch()
            for key in ["a", "b", "c"] { batch.put(key, Array("new-\(key)".utf8)) }
            try store.write(batch)
            try store.put("z", Array("z".utf8))
        }
        let segment = StoreFiles.segmentPath(directory.path, 1)
        let records = try StoreFiles.records(ofSegment: segment)
        try StoreFiles.removeHints(in: directory.path)
        try StoreFiles.flip(segment, at: records[2].offset + records[2].length - 1)  // the value of member "b"
        let readings = try read(directory.path)
        assertAgree(readings, [
            "record 0000000001.cask@\(records[2].offset)+\(records[2].length)",
            "uncommitted-batch 0000000001.cask@\(records[1].offset)+\(records[1].length)",
            "uncommitted-batch 0000000001.cask@\(records[3].offset)+\(records[4].end - records[3].offset)",
        ], "a member damaged")
        XCTAssertEqual(readings.contents, ["b": "old", "z": "z"])
    }

    /// Item 6: a valid manifest retires its segments for every reader; an invalid one is damage to
    /// every reader and nothing is removed on its word.
    func testTheCompactionManifestIsReadTheSameByEveryReader() throws {
        let directory = try makeStore({ store in
            for i in 0..<200 { try store.put("k\(i % 20)", (0..<300).map { _ in UInt8.random(in: 0...255) }) }
        }, options: { var o = CaskStore.Options(); o.maxSegmentSize = 4 << 10; return o }())
        let ids = try StoreFiles.segmentIDs(in: directory.path)
        XCTAssertGreaterThan(ids.count, 3)
        // A crash after the manifest was written: the first segment should be gone.
        let manifest = directory.appending(CompactionManifest.fileName)
        try StoreFiles.write(manifest, CompactionManifest.encode(inputs: [ids[0]]))
        let valid = try read(directory.path)
        XCTAssertTrue(valid.verify.isEmpty, "\(valid.verify)")
        XCTAssertEqual(valid.verifyIgnored.count, 1)
        XCTAssertTrue(valid.verifyIgnored[0].hasPrefix(SegmentName.segment(ids[0])), "\(valid.verifyIgnored)")

        var invalid = CompactionManifest.encode(inputs: [ids[0]])
        invalid[invalid.count - 1] ^= 1
        try StoreFiles.write(manifest, invalid)
        let readings = try read(directory.path)
        assertAgree(readings, ["compaction-manifest COMPACTION@0+\(invalid.count)"], "invalid manifest")
        XCTAssertTrue(FileManager.default.fileExists(atPath: StoreFiles.segmentPath(directory.path, ids[0])))
    }

    /// Item 7: files named like a store's but not one of its files are ignored, and reported, by every
    /// reader; the store stays usable; `recover` leaves them alone.
    func testStrayFilesAreIgnoredByEveryReader() throws {
        let directory = try makeStore { store in try store.put("k", Array("v".utf8)) }
        let strays = ["0000000000.cask", "4294967295.cask", "9999999999.cask", "4.cask", "0000000001.cask.bak", "12.hint", "x.hint.old", "notes.dict.txt"]
        for stray in strays { try StoreFiles.write(directory.appending(stray), Array("not a segment".utf8)) }
        let readings = try read(directory.path)
        assertAgree(readings, [], "strays")
        XCTAssertEqual(readings.contents, ["k": "v"])
        XCTAssertEqual(Set(readings.openIgnored.map { String($0.prefix { $0 != ":" }) }), Set(strays))
        // The reader written from FORMAT.md names the same ones (it only reads the directory).
        let python = try SecondReaderTests.runPython(directory.path, hints: true, key: nil)
        XCTAssertEqual(Set(python.summary["ignored"] as? [String] ?? []), Set(strays), "\(python.summary)")
        let (_, contents) = try openWritable(directory.path)
        XCTAssertEqual(contents, ["k": "v"])
        var options = CaskStore.Options()
        options.automaticCompaction = false
        let store = try CaskStore.open(at: directory.path, options: options)
        try store.put("k2", Array("v2".utf8))
        _ = try store.compact()
        try store.close()
        _ = try CaskStore.repair(at: directory.path)
        for stray in strays { XCTAssertTrue(FileManager.default.fileExists(atPath: directory.appending(stray)), stray) }
    }

    /// Item 10: a sealed segment that lost its tail (a copy cut short). Every reader reports the
    /// loss; a writer's open keeps the hint file that records what was lost; the repair names it.
    func testASealedSegmentThatLostItsTailIsReportedAndItsHintKept() throws {
        var options = CaskStore.Options()
        options.maxSegmentSize = 4 << 10
        let directory = try makeStore({ store in
            for i in 0..<60 { try store.put(String(format: "key%03d", i), Array(repeating: UInt8(i), count: 200)) }
        }, options: options)
        let ids = try StoreFiles.segmentIDs(in: directory.path)
        let victim = ids[0]
        let segment = StoreFiles.segmentPath(directory.path, victim)
        let hint = StoreFiles.hintPath(directory.path, victim)
        XCTAssertTrue(FileManager.default.fileExists(atPath: hint))
        let records = try StoreFiles.records(ofSegment: segment)
        let covered = try StoreFiles.fileSize(segment)
        let kept = records[records.count / 2].offset
        try StoreFiles.truncate(segment, to: kept)
        let readings = try read(directory.path)
        assertAgree(readings, ["record \(SegmentName.segment(victim))@\(kept)+\(covered - kept)"], "lost tail")
        let lost = readings.repair.lostRecords.map { String(decoding: $0.key, as: UTF8.self) }
        XCTAssertEqual(lost, records[(records.count / 2)...].map { String(decoding: $0.key, as: UTF8.self) })
        XCTAssertTrue(readings.repair.lostRecords.allSatisfy(\.verified))
        let (report, _) = try openWritable(directory.path)
        XCTAssertFalse(report.isClean)
        XCTAssertTrue(FileManager.default.fileExists(atPath: hint), "the writer's open kept the hint")
    }

    /// Item 9: `cask compact` on a store with a damaged segment header leaves that segment alone,
    /// says so, and exits 65 (it exited 0 and printed nothing).
    func testCompactReportsTheDamageItLeavesAlone() throws {
        var options = CaskStore.Options()
        options.maxSegmentSize = 4 << 10
        let directory = try makeStore({ store in
            for i in 0..<60 { try store.put("k\(i % 10)", (0..<200).map { _ in UInt8.random(in: 0...255) }) }
        }, options: options)
        let segment = StoreFiles.segmentPath(directory.path, 1)
        try StoreFiles.flip(segment, at: 20)
        let run = try ToolTests.cask(["compact", directory.path])
        XCTAssertEqual(run.status, 65, run.out + run.err)
        XCTAssertTrue(run.out.contains("damaged, left as it is: \(segment) bytes 0..<40 (40 bytes, segment-header): invalid segment header (header checksum mismatch); run 'cask recover \(directory.path)'"), run.out)
        XCTAssertTrue(FileManager.default.fileExists(atPath: segment))
        XCTAssertFalse(try CaskStore.verify(at: directory.path).isClean)
    }

    /// Item 5: a segment's valid hint is used whether or not its header is damaged, so a damaged
    /// record it lists reads as damage either way — never as the older value behind it.
    func testAValidHintIsUsedBehindADamagedHeader() throws {
        var options = CaskStore.Options()
        options.maxSegmentSize = 4 << 10
        func filler(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255) } }
        let directory = try makeStore({ store in
            try store.put("k", Array("old".utf8))
            for i in 0..<20 { try store.put("a\(i)", filler(300)) }
            try store.put("k", Array("new value of k".utf8))
            for i in 0..<20 { try store.put("b\(i)", filler(300)) }
        }, options: options)
        let ids = try StoreFiles.segmentIDs(in: directory.path)
        let (id, record) = try XCTUnwrap(ids.lazy.compactMap { id in
            try? StoreFiles.records(ofSegment: StoreFiles.segmentPath(directory.path, id)).first { $0.value == Array("new value of k".utf8) }.map { (id, $0) }
        }.first)
        XCTAssertNotEqual(id, ids.last, "the new value is in a sealed segment")
        XCTAssertTrue(FileManager.default.fileExists(atPath: StoreFiles.hintPath(directory.path, id)))
        let segment = StoreFiles.segmentPath(directory.path, id)
        try StoreFiles.flip(segment, at: record.end - 1)
        let hinted = ids.filter { FileManager.default.fileExists(atPath: StoreFiles.hintPath(directory.path, $0)) }.count
        for damagedHeader in [false, true] {
            if damagedHeader { try StoreFiles.flip(segment, at: 20) }
            let store = try CaskStore.open(at: directory.path, options: .readOnly)
            XCTAssertEqual(store.recoveryReport.segmentsFromHints, hinted, "header damaged: \(damagedHeader)")
            XCTAssertThrowsError(try store.get("k"), "header damaged: \(damagedHeader)") { error in
                guard case CaskError.corruptRecord(let path, let offset, _) = error else { return XCTFail("\(error)") }
                XCTAssertEqual(path, segment)
                XCTAssertEqual(offset, Int64(record.offset))
            }
            try store.close()
        }
    }

    /// Item 4: a key whose expiry has passed is absent to every read, its record damaged or not
    /// (`get` threw the damage while `keys()` and `export` left the key out).
    func testAnExpiredKeyWithADamagedRecordIsAbsentToEveryRead() throws {
        let directory = try makeStore { store in
            try store.put(Array("gone".utf8), Array("an expired value".utf8), expiresAtMilliseconds: 1)
            try store.put("kept", Array("v".utf8))
        }
        let segment = StoreFiles.segmentPath(directory.path, 1)
        let record = try XCTUnwrap(StoreFiles.records(ofSegment: segment).first { $0.key == Array("gone".utf8) })
        try StoreFiles.flip(segment, at: record.end - 1)
        for useHint in [true, false] {
            if !useHint { try StoreFiles.removeHints(in: directory.path) }
            let store = try CaskStore.open(at: directory.path, options: .readOnly)
            XCTAssertNil(try store.get("gone"), "hint: \(useHint)")
            XCTAssertFalse(try store.contains("gone"))
            XCTAssertEqual(try store.keys(), [Array("kept".utf8)])
            XCTAssertEqual(try store.get("kept"), Array("v".utf8))
            try store.close()
        }
    }

    /// A batch that ends the active segment with a damaged member: its valid commit record is part
    /// of an incomplete batch, not a torn tail, and no writer's open cuts it.
    func testAnIncompleteBatchEndingTheActiveSegmentIsNotCut() throws {
        let directory = try makeStore { store in
            try store.put("before", Array("b".utf8))
            var batch = WriteBatch()
            for key in ["x", "y"] { batch.put(key, Array("value of \(key)".utf8)) }
            try store.write(batch)
        }
        try StoreFiles.removeHints(in: directory.path)
        let segment = StoreFiles.segmentPath(directory.path, 1)
        let records = try StoreFiles.records(ofSegment: segment)
        XCTAssertEqual(records.map(\.type), [.put, .put, .put, .batch])
        try StoreFiles.flip(segment, at: records[2].end - 1)
        let size = try StoreFiles.fileSize(segment)
        let readings = try read(directory.path)
        assertAgree(readings, [
            "uncommitted-batch 0000000001.cask@\(records[1].offset)+\(records[1].length)",
            "record 0000000001.cask@\(records[2].offset)+\(records[2].length)",
            "uncommitted-batch 0000000001.cask@\(records[3].offset)+\(records[3].length)",
        ], "a member damaged at the end")
        XCTAssertEqual(readings.contents, ["before": "b"])
        let (report, contents) = try openWritable(directory.path)
        XCTAssertEqual(contents, ["before": "b"])
        XCTAssertTrue(report.truncations.isEmpty, "\(report)")
        XCTAssertEqual(try StoreFiles.fileSize(segment), size, "nothing cut")
    }
}
