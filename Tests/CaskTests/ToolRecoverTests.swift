import Foundation
#if canImport(Glibc)
import Glibc
#endif
import XCTest
@testable import Cask
import CaskTestSupport

/// `cask recover` and `cask import-defaults`, run as the built binary (through
/// ``ToolTests/cask(_:stdin:file:line:)``), on stores damaged the way the core tests damage them.
final class ToolRecoverTests: XCTestCase {
    func cask(_ arguments: [String], stdin: Data = Data(), file: StaticString = #filePath, line: UInt = #line) throws -> ToolTests.Run {
        try ToolTests.cask(arguments, stdin: stdin, file: file, line: line)
    }

    // MARK: Fixtures

    /// A closed store in `root/store` of several 8 KiB segments (every one with its hint file), every
    /// key written a few times, some deleted, one atomic batch; with its records as the oracle.
    private struct Fixture {
        let root: TemporaryDirectory
        let ids: [UInt64]
        let records: [UInt64: [StoreFiles.Record]]
        var path: String { root.appending("store") }
        var all: [StoreFiles.Record] { ids.flatMap { records[$0]! } }
        var model: [[UInt8]: [UInt8]] { StoreFiles.replay(all) }
        var sealed: [UInt64] { Array(ids.dropLast()) }
        func segment(_ id: UInt64) -> String { StoreFiles.segmentPath(path, id) }
        func hint(_ id: UInt64) -> String { StoreFiles.hintPath(path, id) }
        /// What the store holds without `dropped`.
        func model(without dropped: [StoreFiles.Record]) -> [[UInt8]: [UInt8]] {
            StoreFiles.replay(all.filter { record in !dropped.contains { $0.seq == record.seq && $0.offset == record.offset } })
        }
    }

    private func makeFixture(seed: UInt64) throws -> Fixture {
        var rng = SeededGenerator.fromEnvironment(fallback: seed)
        let root = TemporaryDirectory("cask-recover")
        var options = CaskStore.Options(durability: .os)
        options.maxSegmentSize = 8 << 10
        options.automaticCompaction = false
        let store = try CaskStore.open(at: root.appending("store"), options: options)
        for round in 0..<5 {
            for i in 0..<80 {
                let key = "key-\(i)"
                if i == 30 {
                    var batch = WriteBatch()
                    batch.put("batch-\(round)", rng.bytes(30))
                    batch.delete("key-\(round)")
                    try store.write(batch)
                }
                if round > 0 && Int.random(in: 0..<5, using: &rng) == 0 {
                    _ = try store.delete(key)
                } else if Int.random(in: 0..<3, using: &rng) == 0 {
                    try store.put(key, [UInt8](repeating: UInt8(i), count: Int.random(in: 40...200, using: &rng)))  // compressed
                } else {
                    try store.put(key, rng.bytes(Int.random(in: 1...250, using: &rng)))
                }
            }
        }
        try store.close()
        let ids = try StoreFiles.segmentIDs(in: root.appending("store"))
        guard ids.count >= 5 else { throw XCTSkip("fixture too small: \(ids.count) segments") }
        var records: [UInt64: [StoreFiles.Record]] = [:]
        for id in ids { records[id] = try StoreFiles.records(ofSegment: StoreFiles.segmentPath(root.appending("store"), id)) }
        return Fixture(root: root, ids: ids, records: records)
    }

    /// Every file of a store directory but `LOCK` (which holds only a writer's pid).
    private func files(_ directory: String) throws -> [String: [UInt8]] {
        try StoreFiles.snapshot(directory).filter { $0.key != SegmentName.lockFile }
    }

    private func json(_ run: ToolTests.Run, file: StaticString = #filePath, line: UInt = #line) throws -> [String: Any] {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: run.stdout) as? [String: Any], run.out + run.err, file: file, line: line)
    }

    /// `cask verify` finds the store clean, opening it cuts and skips nothing, and it holds exactly `expected`.
    private func assertRepaired(_ directory: String, _ expected: [[UInt8]: [UInt8]], _ context: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let verify = try cask(["verify", directory])
        XCTAssertEqual(verify.status, 0, "\(context): \(verify.out)", file: file, line: line)
        let store = try CaskStore.open(at: directory, options: .readOnly)
        defer { try? store.close() }
        XCTAssertTrue(store.recoveryReport.isClean && store.recoveryReport.invalidHints.isEmpty, "\(context): \(store.recoveryReport)", file: file, line: line)
        assertStore(store, matches: expected, context, file: file, line: line)
    }

    /// Copying the backup's files back over (a copy of) the repaired store gives `original` back, byte for byte.
    private func assertBackupRestores(_ report: [String: Any], _ directory: String, _ original: [String: [UInt8]], _ context: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let backup = try XCTUnwrap(report["backupDirectory"] as? String, context, file: file, line: line)
        let scratch = TemporaryDirectory("cask-recover-restore")
        defer { scratch.remove() }
        try StoreFiles.copy(from: directory, to: scratch.path)
        try StoreFiles.copy(from: backup, to: scratch.path)
        let restored = try files(scratch.path)
        XCTAssertEqual(Set(restored.keys), Set(original.keys), "\(context): files after restoring", file: file, line: line)
        for (name, bytes) in original {
            XCTAssertTrue(restored[name] == bytes, "\(context): \(name) differs after restoring the backup", file: file, line: line)
        }
    }

    // MARK: Help and exit statuses

    static let recoverHelp = """
        OVERVIEW: Repair a damaged store (backing up what it changes).

        Cuts torn tails, rewrites damaged segments with every intact record copied byte
        for byte (the records after a damaged range included), writes invalid hint files
        again, removes leftover temporary files, and finishes a compaction a crash
        interrupted. A delete lost in a damaged range is rebuilt from the segment's hint
        file when that file vouches for it; records that are lost are listed by key.
        Afterwards 'cask verify' finds the store clean.

        Before changing anything, copies every file it will change or remove into the
        backup directory (by default a new directory next to the store,
        <dir>.cask-backup-<UTC time>) and prints where: copying those files back into
        <dir> undoes the repair exactly. Prints each change: the file, what was done,
        and the bytes and records dropped.

        Takes the store's lock, so it refuses (exit 1) while another process has the
        store open for writing. Exits 0 when there was nothing to repair or the store
        was repaired; with --dry-run, exits 65 when there is something to repair (the
        plan is printed and nothing changes). Shows progress on standard error.

        USAGE: cask recover <dir> [--dry-run] [--backup <dir>] [--json]
                            [--key-file <file>]

        ARGUMENTS:
          <dir>                   The store directory.

        OPTIONS:
          --dry-run               Print what would be done, and change nothing (not even
                                  the lock file).
          --backup <dir>          Back up into this directory (created; if it exists it
                                  must be empty) instead of the default next to the
                                  store.
          --json                  Print JSON instead of text (object keys sorted).
          --key-file <file>       The key of an encrypted store: a file of 64 hex digits
                                  (as 'cask keygen' writes) or 32 bytes. Needed for an
                                  encrypted store, refused for one that is not.
          -h, --help              Show help information.

        """

    static let importDefaultsHelp = """
        OVERVIEW: Import the entries of a property-list file.

        Reads a property list, XML (UTF-8) or binary (bplist00), whose top level is a
        dictionary, and stores each top-level entry under the key <prefix><name> as its
        Swift value, exactly as store.set(value, forKey: key) does with the object coder
        (binary unless --coder names another; a store does not record its coder, so open
        it with objects.coder set to the same one). That value is a Bool, Int, Double,
        String, Date or Data, or an array or a [String: T] dictionary of one such type,
        nested; typed keys and store.get(T.self, forKey: key) of that type read it back:
        <true/> as a Bool, an <integer> as an Int (or a smaller integer type that holds
        it), an <array> of <string>s as a [String]. An empty array or dictionary reads
        as one of any element type.

        An entry with an array or dictionary whose values are not all of one kind (a
        string beside an integer, an integer beside a real) has no such Swift type: it
        is stored as a PropertyListValue, read with store.get(PropertyListValue.self,
        forKey: key), and listed in the output with the container that mixes kinds. A
        PropertyListValue keeps every kind exactly, a boolean never turning into a
        number.

        The reader is Cask's own and strict: a file that is not a well-formed XML or
        binary property list with a dictionary at the top exits 65 and imports nothing,
        the message naming the place (line and column, or object and byte) and the
        cause. That includes invalid base64 in <data>, a dictionary key given twice, a
        set or a keyed-archiver UID in a binary list, a reference cycle, and OpenStep
        (text) property lists, which are not read.

        Every entry is written in one atomic batch: after a crash, all of them are in
        the store or none. An entry that cannot be stored is skipped and reported with
        the reason (an integer outside Int's range, arrays and dictionaries nested more
        than 127 deep, a key over 65535 bytes, a value over the store's limit, a real
        that JSON cannot hold, and with --coder plist a bare string, number, boolean or
        date, which PropertyListEncoder stores only inside an array or a dictionary);
        the command then exits 65, having imported the others.

        <plist> may be a pipe or a FIFO, read to its end; at most 256 MiB are read.
        Creates the store if <dir> does not exist and there is something to import
        (encrypted, when --key-file is given), and takes its lock, so it fails (exit 1)
        while another process has the store open for writing. Everything is on disk
        (fdatasync) when the command exits.

        USAGE: cask import-defaults <dir> <plist> [--prefix <p>] [--coder <c>] [--json]
                                    [--key-file <file>]

        ARGUMENTS:
          <dir>                   The store directory.
          <plist>                 The property-list file (or pipe) to import.

        OPTIONS:
          --prefix <p>            Put <p> before each entry's name to make its key
                                  (default: none).
          --coder <c>             The object coder <c> for the values: binary (the
                                  default, as the store's), json or plist.
          --json                  Print JSON instead of text (object keys sorted).
          --key-file <file>       The key of an encrypted store: a file of 64 hex digits
                                  (as 'cask keygen' writes) or 32 bytes. Needed for an
                                  encrypted store, refused for one that is not; a store
                                  this command creates is encrypted with it.
          -h, --help              Show help information.

        """

    func testHelpSnapshots() throws {
        for (command, expected) in [("recover", Self.recoverHelp), ("import-defaults", Self.importDefaultsHelp)] {
            for arguments in [[command, "--help"], ["help", command], [command, "dir", "-h"]] {
                let run = try cask(arguments)
                XCTAssertEqual(run.status, 0, "\(arguments)")
                XCTAssertEqual(run.out, expected, "\(arguments)")
                XCTAssertEqual(run.err, "")
            }
            XCTAssertFalse(expected.split(separator: "\n").contains { $0.count > 80 }, "\(command): a line over 80 columns")
        }
        let root = try cask(["help"]).out
        XCTAssertTrue(root.contains("\n  recover                 Repair a damaged store (backing up what it changes).\n"), root)
        XCTAssertTrue(root.contains("\n  import-defaults         Import the entries of a property-list file.\n"), root)
    }

    func testExitStatusOfEachErrorClass() throws {
        let fixture = try makeFixture(seed: 1)
        let plist = fixture.root.appending("defaults.plist")
        try PropertyListSerialization.data(fromPropertyList: ["a": 1], format: .xml, options: 0).write(to: URL(fileURLWithPath: plist))
        let usage: [([String], String)] = [
            (["recover"], "Error: missing argument <dir>\n"),
            (["recover", fixture.path, "--force"], "Error: unknown option '--force'\n"),
            (["recover", fixture.path, "--backup"], "Error: missing value for option '--backup <dir>'\n"),
            (["recover", fixture.path, "--backup", fixture.path + "/"], "Error: --backup must name a directory other than the store's\n"),
            (["recover", fixture.path, "--dry-run=yes"], "Error: flag '--dry-run' takes no value\n"),
            (["import-defaults", fixture.path], "Error: missing argument <plist>\n"),
            (["import-defaults", fixture.path, plist, "--coder", "xml"], "Error: --coder must be binary, json or plist, not 'xml'\n"),
            (["import-defaults", fixture.path, plist, "extra"], "Error: unexpected argument 'extra'\n"),
        ]
        for (arguments, error) in usage {
            let run = try cask(arguments)
            XCTAssertEqual(run.status, 64, "\(arguments)")
            XCTAssertTrue(run.err.hasPrefix(error), "\(arguments): \(run.err)")
            XCTAssertTrue(run.err.contains("\nUsage: cask \(arguments[0]) "), "\(arguments): \(run.err)")
            XCTAssertEqual(run.out, "", "\(arguments)")
        }

        // Failures: exit 1.
        let missing = fixture.root.appending("no-such-store")
        var run = try cask(["recover", missing])
        XCTAssertEqual(run.status, 1)
        XCTAssertEqual(run.err, "Error: store directory \(missing) does not exist; check the path (put, import and import-defaults create a store where there is none)\n")
        XCTAssertFalse(FileManager.default.fileExists(atPath: missing))
        run = try cask(["import-defaults", fixture.path, fixture.root.appending("no-such.plist")])
        XCTAssertEqual(run.status, 1)
        XCTAssertTrue(run.err.hasPrefix("Error: cannot read \(fixture.root.appending("no-such.plist")): "), run.err)
        let notEmpty = fixture.root.appending("not-empty")
        try FileManager.default.createDirectory(atPath: notEmpty, withIntermediateDirectories: false)
        try Data([1]).write(to: URL(fileURLWithPath: notEmpty + "/x"))
        try StoreFiles.flip(fixture.segment(fixture.sealed[0]), at: 100)
        let damaged = try files(fixture.path)
        run = try cask(["recover", fixture.path, "--backup", notEmpty])
        XCTAssertEqual(run.status, 1)
        // After the progress of the check, which found what to change.
        XCTAssertTrue(run.err.contains("\nError: create backup directory (it must be new or empty) failed on \(notEmpty): File exists"), run.err)
        XCTAssertTrue(try files(fixture.path) == damaged, "a failed backup must leave the store alone")

        // Data errors: exit 65.
        run = try cask(["recover", fixture.path, "--dry-run"])
        XCTAssertEqual(run.status, 65, run.err)
        XCTAssertTrue(run.out.contains("\nDry run, nothing was changed. Would back up 2 files to "), run.out)
        let notPlist = fixture.root.appending("not.plist")
        try Data("<plist><dict><key>a</key>".utf8).write(to: URL(fileURLWithPath: notPlist))
        run = try cask(["import-defaults", fixture.path, notPlist])
        XCTAssertEqual(run.status, 65)
        XCTAssertEqual(run.err, "Error: \(notPlist): XML property list, line 1, column 26: the file ends inside <dict> (opened at line 1, column 8); nothing was imported\n")
        let array = fixture.root.appending("array.plist")
        try PropertyListSerialization.data(fromPropertyList: [1, 2], format: .binary, options: 0).write(to: URL(fileURLWithPath: array))
        run = try cask(["import-defaults", fixture.path, array])
        XCTAssertEqual(run.status, 65)
        XCTAssertEqual(run.err, "Error: \(array): binary property list, object 0 at byte 8: the top level is an array, not a dictionary; nothing was imported\n")

        // Success: exit 0.
        run = try cask(["recover", fixture.path])
        XCTAssertEqual(run.status, 0, run.out + run.err)
        run = try cask(["recover", fixture.path, "--dry-run"])
        XCTAssertEqual(run.status, 0, run.out + run.err)
        XCTAssertTrue(run.out.hasSuffix("\nNothing to repair.\n"), run.out)
        XCTAssertEqual(try cask(["import-defaults", fixture.path, plist]).status, 0)
    }

    func testRecoverRefusesWhileAWriterHoldsTheLock() throws {
        let fixture = try makeFixture(seed: 2)
        try StoreFiles.flip(fixture.segment(fixture.sealed[1]), at: 200)
        let store = try CaskStore.open(at: fixture.path)
        defer { try? store.close() }
        let before = try StoreFiles.snapshot(fixture.path)
        let locked = "Error: \(CaskError.locked(path: fixture.path, holderPID: getpid()))\n"
        for arguments in [["recover", fixture.path], ["recover", fixture.path, "--dry-run"], ["recover", fixture.path, "--json"]] {
            let run = try cask(arguments)
            XCTAssertEqual(run.status, 1, "\(arguments)")
            XCTAssertEqual(run.err, locked, "\(arguments)")
            XCTAssertEqual(run.out, "", "\(arguments)")
        }
        let plist = fixture.root.appending("d.plist")
        try PropertyListSerialization.data(fromPropertyList: ["a": "b"], format: .xml, options: 0).write(to: URL(fileURLWithPath: plist))
        let run = try cask(["import-defaults", fixture.path, plist])
        XCTAssertEqual(run.status, 1)
        XCTAssertEqual(run.err, locked)
        XCTAssertTrue(try StoreFiles.snapshot(fixture.path) == before, "nothing may change while the writer holds the lock")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: fixture.root.path).filter { $0.contains("backup") }, [])
    }

    // MARK: Damage

    func testTornTailCutAtSeveralPoints() throws {
        let fixture = try makeFixture(seed: 3)
        let last = fixture.ids.last!
        let lastRecords = fixture.records[last]!
        let original = try files(fixture.path)
        let lastName = SegmentName.segment(last)
        // Inside a record's header, key and value; on a boundary (nothing to cut); and inside the
        // segment header (a crash while it was created).
        let record = lastRecords[lastRecords.count - 2]
        let cuts = [record.offset + 3, record.offset + 12, record.end - 1, lastRecords.last!.end - 5, record.end, 20]
        for (round, cut) in cuts.enumerated() {
            let scratch = TemporaryDirectory("cask-recover-torn")
            defer { scratch.remove() }
            let directory = scratch.appending("store")
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
            // A crash leaves the active segment without a hint; every other round keeps a stale one.
            for (name, bytes) in original where name != SegmentName.hint(last) || round % 2 == 1 {
                try StoreFiles.write(directory + "/" + name, name == lastName ? Array(bytes.prefix(cut)) : bytes)
            }
            let torn = try files(directory)
            let context = "cut at \(cut) of \(original[lastName]!.count)"
            let earlier = fixture.ids.dropLast().flatMap { fixture.records[$0]! }
            let intact = StoreFiles.replay(earlier + lastRecords.filter { $0.end <= cut })

            let dryRun = try cask(["recover", directory, "--dry-run", "--json"])
            XCTAssertTrue(try files(directory) == torn, "\(context): the dry run changed files")
            let run = try cask(["recover", directory, "--json"])
            let report = try json(run)
            if cut == record.end {
                XCTAssertEqual(dryRun.status, round % 2 == 1 ? 65 : 0, "\(context): only the stale hint needs work")
                XCTAssertEqual(run.status, 0, run.err)
            } else {
                XCTAssertEqual(dryRun.status, 65, "\(context): \(dryRun.out)")
                XCTAssertEqual(run.status, 0, "\(context): \(run.out) \(run.err)")
                let changes = try XCTUnwrap(report["changes"] as? [[String: Any]])
                let segmentChange = try XCTUnwrap(changes.first { ($0["file"] as? String) == directory + "/" + lastName }, "\(context): \(changes)")
                XCTAssertEqual(segmentChange["kind"] as? String, cut == 20 ? "rewrite" : "truncate", context)
                XCTAssertEqual((segmentChange["bytesBefore"] as? NSNumber)?.intValue, cut, context)
                let expectedLength = cut == 20 ? SegmentHeader.length : lastRecords.filter { $0.end <= cut }.last?.end ?? SegmentHeader.length
                XCTAssertEqual((segmentChange["bytesAfter"] as? NSNumber)?.intValue, expectedLength, context)
                XCTAssertEqual(try StoreFiles.fileSize(directory + "/" + lastName), expectedLength, context)
                // A torn write was never acknowledged; but a kept hint (written once the segment was
                // synced, at close) that describes more than the file shows records that were lost.
                let lost = round % 2 == 1 ? lastRecords.filter { $0.end > cut }.count : 0
                XCTAssertEqual((report["lostRecords"] as? [Any])?.count, lost, "\(context): \(report["lostRecords"] ?? "")")
                try assertBackupRestores(report, directory, torn, context)
            }
            try assertRepaired(directory, intact, context)
            let again = try cask(["recover", directory])
            XCTAssertEqual(again.status, 0, "\(context): \(again.out)")
            XCTAssertTrue(again.out.hasSuffix("Nothing to repair.\n"), "\(context): \(again.out)")
        }
    }

    func testFlippedByteInASealedRecordKeepsEveryIntactRecordByteForByte() throws {
        let fixture = try makeFixture(seed: 4)
        // A live put in the middle of a sealed segment, so that dropping it changes what its key
        // reads; not a batch member (a batch with a damaged member is dropped whole, tested below).
        let newest = Dictionary(fixture.all.map { ($0.key, $0) }, uniquingKeysWith: { $0.seq > $1.seq ? $0 : $1 })
        let (id, victim) = try XCTUnwrap(fixture.sealed.dropFirst().lazy.compactMap { id -> (UInt64, StoreFiles.Record)? in
            fixture.records[id]!.dropFirst(2).first {
                $0.type == .put && !$0.isBatchMember && $0.length >= 40 && newest[$0.key]?.seq == $0.seq
            }.map { (id, $0) }
        }.first)
        for keepHint in [false, true] {
            let scratch = TemporaryDirectory("cask-recover-flip")
            defer { scratch.remove() }
            let directory = scratch.appending("store")
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
            try StoreFiles.copy(from: fixture.path, to: directory)
            if !keepHint { try FileManager.default.removeItem(atPath: StoreFiles.hintPath(directory, id)) }
            let segmentPath = StoreFiles.segmentPath(directory, id)
            try StoreFiles.flip(segmentPath, at: victim.offset + victim.length / 2, mask: 0x10)
            let damaged = try StoreFiles.snapshot(directory)
            let context = "hint kept: \(keepHint)"

            let dryRun = try cask(["recover", directory, "--dry-run"])
            XCTAssertEqual(dryRun.status, 65, dryRun.out)
            XCTAssertTrue(try StoreFiles.snapshot(directory) == damaged, "\(context): the dry run changed a file, or the lock file")
            XCTAssertTrue(dryRun.out.contains("rewrite \(segmentPath): 1 damaged range dropped, every intact record kept byte for byte; "), dryRun.out)
            XCTAssertTrue(dryRun.out.contains("\n  dropped bytes \(victim.offset)..<\(victim.end) (\(victim.length) bytes, record): damaged: checksum mismatch"), dryRun.out)

            let run = try cask(["recover", directory, "--json"])
            XCTAssertEqual(run.status, 0, "\(context): \(run.out) \(run.err)")
            let report = try json(run)
            XCTAssertEqual(report["verifiedClean"] as? Bool, true, context)
            XCTAssertEqual((report["bytesDropped"] as? NSNumber)?.intValue, victim.length, context)
            let lost = try XCTUnwrap(report["lostRecords"] as? [[String: Any]])
            if keepHint {
                // The hint agrees with every intact record: it names what was lost.
                XCTAssertEqual(lost.count, 1, "\(context): \(lost)")
                XCTAssertEqual(lost.first?["key"] as? String, String(decoding: victim.key, as: UTF8.self), context)
                XCTAssertEqual(lost.first?["verified"] as? Bool, true, context)
            }
            try assertRepaired(directory, fixture.model(without: [victim]), context)
            // Every other record of the segment, byte for byte, in order.
            let before = fixture.records[id]!.filter { $0.offset != victim.offset }
            let after = try StoreFiles.records(ofSegment: segmentPath)
            XCTAssertEqual(after.map(\.seq), before.map(\.seq), context)
            let old = try StoreFiles.read(fixture.segment(id)), new = try StoreFiles.read(segmentPath)
            XCTAssertEqual(Array(new.prefix(SegmentHeader.length)), Array(old.prefix(SegmentHeader.length)), "\(context): header")
            for (was, now) in zip(before, after) {
                XCTAssertEqual(new[now.offset..<now.end], old[was.offset..<was.end], "\(context): record seq \(was.seq)")
            }
            XCTAssertEqual(FileManager.default.fileExists(atPath: StoreFiles.hintPath(directory, id)), keepHint, "\(context): no new file")
            try assertBackupRestores(report, directory, damaged.filter { $0.key != SegmentName.lockFile }, context)
        }
    }

    /// Found by trying the tool: a byte flipped in one member of an imported batch drops the
    /// batch (FORMAT.md, "Batches": applied whole or not at all), and `recover` named one lost key
    /// while it took away 1,000. It names every key it takes away.
    func testRecoverNamesEveryKeyOfABatchItDrops() throws {
        let scratch = TemporaryDirectory("cask-recover-batch-keys")
        defer { scratch.remove() }
        let input = scratch.appending("in.jsonl"), directory = scratch.appending("store")
        let lines = (0..<300).map { "{\"key\":\"user/\(1000 + $0)\",\"value\":\"value \($0) of some length\"}" }
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: input))
        let imported = try cask(["import", directory, "--input", input, "--batch-size", "100"])
        XCTAssertEqual(imported.status, 0, imported.err)
        try? FileManager.default.removeItem(atPath: StoreFiles.hintPath(directory, 1))
        let segment = StoreFiles.segmentPath(directory, 1)
        let records = try StoreFiles.records(ofSegment: segment)
        let members = records.filter(\.isBatchMember)
        XCTAssertEqual(members.count, 300)
        let victim = members[150]  // in the second batch: user/1100 ..< user/1200
        try StoreFiles.flip(segment, at: victim.offset + victim.length - 1)
        let run = try cask(["recover", directory, "--dry-run", "--json"])
        XCTAssertEqual(run.status, 65, run.err)
        let lost = try XCTUnwrap(try json(run)["lostRecords"] as? [[String: Any]])
        let keys = Set(lost.compactMap { $0["key"] as? String })
        let batch = Set((100..<200).map { "user/\(1000 + $0)" })
        XCTAssertEqual(keys.subtracting([String(decoding: victim.key, as: UTF8.self)]), batch.subtracting([String(decoding: victim.key, as: UTF8.self)]), "\(lost)")
        XCTAssertTrue(lost.filter { $0["key"] as? String != String(decoding: victim.key, as: UTF8.self) }.allSatisfy { $0["verified"] as? Bool == true })
    }

    /// Found by trying the tool: the active segment's last record, whole but damaged, is a torn
    /// tail (FORMAT.md, rule 4), and `put` cut it without a word. Every writing command now says
    /// what its open cut: file, offset and length.
    func testWritingCommandsSayWhatTheirOpenCut() throws {
        let scratch = TemporaryDirectory("cask-tool-torn-note")
        defer { scratch.remove() }
        let input = scratch.appending("in.jsonl")
        try Data("{\"key\":\"j\",\"value\":\"v\"}\n".utf8).write(to: URL(fileURLWithPath: input))
        let key = scratch.appending("key")
        XCTAssertEqual(try cask(["keygen", key]).status, 0)
        for command in [["put", "new"], ["delete", "k1"], ["compact"], ["import", "--input", input], ["rekey", "--new-key-file", key]] {
            let directory = scratch.appending(command[0])
            let store = try CaskStore.open(at: directory)
            for i in 1...3 { try store.put("k\(i)", Array("value \(i)".utf8)) }
            try store.close()
            try? FileManager.default.removeItem(atPath: StoreFiles.hintPath(directory, 1))
            let segment = StoreFiles.segmentPath(directory, 1)
            let last = try XCTUnwrap(try StoreFiles.records(ofSegment: segment).last)
            try StoreFiles.flip(segment, at: last.end - 1)
            let run = try cask([command[0], directory] + command.dropFirst(), stdin: Data("v".utf8))
            XCTAssertEqual(run.status, 0, "\(command): \(run.err)")
            XCTAssertTrue(run.err.contains("note: opening \(directory) cut the torn tail of \(segment): \(last.length) bytes at offset \(last.offset) ("), "\(command): \(run.err)")
        }
    }

    /// Found by trying the tool: `--backup` named an empty directory inside the store, and the
    /// repair copied the damaged files there, into the store it repairs. Refused, as `backup` and
    /// `export --output` refuse a path inside the store; nothing is changed.
    func testABackupDirectoryInsideTheStoreIsRefused() throws {
        let fixture = try makeFixture(seed: 5)
        let scratch = TemporaryDirectory("cask-recover-inside")
        defer { scratch.remove() }
        let directory = scratch.appending("store")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        try StoreFiles.copy(from: fixture.path, to: directory)
        let segment = StoreFiles.segmentPath(directory, try XCTUnwrap(fixture.sealed.first))
        try StoreFiles.flip(segment, at: 60, mask: 0x10)
        let damaged = try StoreFiles.snapshot(directory).filter { $0.key != SegmentName.lockFile }
        func files() throws -> [String: [UInt8]] {  // the store's files, the directory `sub` and the lock aside
            var files: [String: [UInt8]] = [:]
            for name in try FileManager.default.contentsOfDirectory(atPath: directory) where name != "sub" && name != SegmentName.lockFile {
                files[name] = try StoreFiles.read(directory + "/" + name)
            }
            return files
        }
        try FileManager.default.createDirectory(atPath: directory + "/sub", withIntermediateDirectories: false)
        try FileManager.default.createSymbolicLink(atPath: scratch.appending("link"), withDestinationPath: directory)
        for backup in [directory + "/sub", directory + "/new", scratch.appending("link") + "/other", directory] {
            let run = try cask(["recover", directory, "--backup", backup])
            XCTAssertNotEqual(run.status, 0, "\(backup): \(run.out)")
            XCTAssertTrue(run.err.contains(backup == directory ? "other than the store's" : backup), "\(backup): \(run.err)")
            XCTAssertTrue(try files() == damaged, "\(backup): the store changed")
            XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory + "/sub"), [], backup)
        }
        let outside = scratch.appending("backup")
        let run = try cask(["recover", directory, "--backup", outside])
        XCTAssertEqual(run.status, 0, "\(run.out) \(run.err)")
        XCTAssertFalse(try FileManager.default.contentsOfDirectory(atPath: outside).isEmpty)
    }

    func testDamagedDeleteIsRebuiltFromAConsistentHintAndReportedWithoutOne() throws {
        let fixture = try makeFixture(seed: 5)
        // A delete in a sealed segment that hides an older put: dropping it would bring the put back.
        var target: (id: UInt64, record: StoreFiles.Record)?
        for id in fixture.sealed {
            for record in fixture.records[id]! where record.type == .delete && fixture.model[record.key] == nil {
                let older = fixture.all.contains { $0.key == record.key && $0.type == .put && $0.seq < record.seq }
                let newer = fixture.all.contains { $0.key == record.key && $0.seq > record.seq }
                if older && !newer && target == nil { target = (id, record) }
            }
        }
        let (id, tombstone) = try XCTUnwrap(target, "no suitable delete in the fixture")
        let name = String(decoding: tombstone.key, as: UTF8.self)
        for keepHint in [true, false] {
            let scratch = TemporaryDirectory("cask-recover-delete")
            defer { scratch.remove() }
            let directory = scratch.appending("store")
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
            try StoreFiles.copy(from: fixture.path, to: directory)
            if !keepHint { try FileManager.default.removeItem(atPath: StoreFiles.hintPath(directory, id)) }
            let segmentPath = StoreFiles.segmentPath(directory, id)
            try StoreFiles.flip(segmentPath, at: tombstone.offset + 1)  // the checksum: the record's fields still parse
            let context = "hint kept: \(keepHint)"
            let run = try cask(["recover", directory, "--json"])
            XCTAssertEqual(run.status, 0, "\(context): \(run.out) \(run.err)")
            let report = try json(run)
            let lost = try XCTUnwrap(report["lostRecords"] as? [[String: Any]])
            if keepHint {
                XCTAssertEqual(report["recordsRestored"] as? Int, 1, context)
                XCTAssertEqual(lost.count, 0, "\(context): \(lost)")
                // The rebuilt delete is the record that was there: the segment is the undamaged one.
                XCTAssertTrue(try StoreFiles.read(segmentPath) == StoreFiles.read(fixture.segment(id)), context)
                try assertRepaired(directory, fixture.model, context)
                XCTAssertEqual(try cask(["get", directory, name]).status, 1, "\(context): the key stays deleted")
            } else {
                // Nothing vouches for the damaged bytes: an older put shows, as it did before the repair.
                XCTAssertEqual(report["recordsRestored"] as? Int, 0, context)
                XCTAssertEqual(lost.count, 1, "\(context): \(lost)")
                XCTAssertEqual(lost.first?["type"] as? String, "delete", context)
                XCTAssertEqual(lost.first?["key"] as? String, name, context)
                XCTAssertEqual((lost.first?["seq"] as? NSNumber)?.uint64Value, tombstone.seq, context)
                XCTAssertEqual(lost.first?["verified"] as? Bool, false, context)
                try assertRepaired(directory, fixture.model(without: [tombstone]), context)
                XCTAssertNotNil(fixture.model(without: [tombstone])[tombstone.key], "the fixture must make the delete matter")
                let text = try cask(["recover", directory, "--dry-run"])
                XCTAssertEqual(text.status, 0, text.out)
            }
        }
    }

    func testDamagedSegmentHeaderIsWrittenAnewKeepingEveryRecord() throws {
        let fixture = try makeFixture(seed: 6)
        let id = fixture.sealed[2]
        for position in [0, 20, 36] {
            let scratch = TemporaryDirectory("cask-recover-header")
            defer { scratch.remove() }
            let directory = scratch.appending("store")
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
            try StoreFiles.copy(from: fixture.path, to: directory)
            let segmentPath = StoreFiles.segmentPath(directory, id)
            try StoreFiles.flip(segmentPath, at: position, mask: 0x40)
            let damaged = try files(directory)
            let run = try cask(["recover", directory, "--json"])
            XCTAssertEqual(run.status, 0, "byte \(position): \(run.out) \(run.err)")
            let report = try json(run)
            let changes = try XCTUnwrap(report["changes"] as? [[String: Any]])
            XCTAssertEqual(changes.map { $0["kind"] as? String }, ["rewrite", "rebuild-hint"], "byte \(position)")
            XCTAssertTrue((changes.first?["reason"] as? String ?? "").hasPrefix("invalid segment header ("), "\(changes)")
            XCTAssertEqual(report["bytesDropped"] as? Int, 0)
            try assertRepaired(directory, fixture.model, "header byte \(position)")
            // The header is the one the writer wrote (its base seq is the segment's lowest seq) and the
            // records are untouched.
            XCTAssertTrue(try StoreFiles.read(segmentPath) == StoreFiles.read(fixture.segment(id)), "byte \(position)")
            try assertBackupRestores(report, directory, damaged, "header byte \(position)")
        }
    }

    func testInvalidHintFilesAreRebuiltAndOrphansRemoved() throws {
        let fixture = try makeFixture(seed: 7)
        let id = fixture.sealed[1]
        let hintPath = fixture.hint(id)
        let good = try StoreFiles.read(hintPath)
        try StoreFiles.flip(hintPath, at: good.count / 2)
        try StoreFiles.write(fixture.path + "/0000000099.hint", Array(good.prefix(100)))
        let damaged = try files(fixture.path)
        let segmentsBefore = try fixture.ids.map { try StoreFiles.read(fixture.segment($0)) }

        let run = try cask(["recover", fixture.path])
        XCTAssertEqual(run.status, 0, run.out + run.err)
        XCTAssertTrue(run.out.contains("rebuild-hint \(hintPath): invalid: "), run.out)
        XCTAssertTrue(run.out.contains("remove \(fixture.path)/0000000099.hint: hint file without a segment 0000000099.cask; 100 bytes"), run.out)
        XCTAssertTrue(run.out.contains("\nVerified: no damage found.\n"), run.out)
        XCTAssertEqual(try StoreFiles.read(hintPath), good, "the rebuilt hint is the one the writer wrote")
        XCTAssertFalse(FileManager.default.fileExists(atPath: fixture.path + "/0000000099.hint"))
        XCTAssertTrue(try fixture.ids.map { try StoreFiles.read(fixture.segment($0)) } == segmentsBefore, "no segment changes")
        try assertRepaired(fixture.path, fixture.model, "hints")
        let backup = try XCTUnwrap(run.out.split(separator: "\n").first { $0.hasPrefix("Backed up 2 files to ") })
        let backupPath = String(backup.dropFirst("Backed up 2 files to ".count).prefix { $0 != " " })
        XCTAssertTrue(backupPath.hasPrefix(fixture.root.appending("store.cask-backup-")), backupPath)
        try assertBackupRestores(["backupDirectory": backupPath], fixture.path, damaged, "hints")
    }

    func testInterruptedCompactionIsFinishedPerItsManifest() throws {
        let fixture = try makeFixture(seed: 8)
        let before = try files(fixture.path)
        var options = CaskStore.Options()
        options.maxSegmentSize = 8 << 10
        options.automaticCompaction = false
        let store = try CaskStore.open(at: fixture.path, options: options)
        XCTAssertGreaterThan(try store.compact().segmentsCompacted, 2)
        try store.close()
        // Back to the moment after the manifest was written: some of the replaced segments (and a
        // hint) are still there, and two temporary files the crash left behind.
        let present = Set(try FileManager.default.contentsOfDirectory(atPath: fixture.path))
        let replaced = fixture.ids.filter { !present.contains(SegmentName.segment($0)) }
        XCTAssertGreaterThan(replaced.count, 2)
        for id in replaced.prefix(replaced.count / 2 + 1) {
            try StoreFiles.write(fixture.segment(id), before[SegmentName.segment(id)]!)
        }
        try StoreFiles.write(fixture.hint(replaced[0]), before[SegmentName.hint(replaced[0])]!)
        try StoreFiles.write(fixture.path + "/" + CompactionManifest.fileName, CompactionManifest.encode(inputs: replaced))
        try StoreFiles.write(fixture.path + "/0000000999.cask.tmp", [1, 2, 3])
        try StoreFiles.write(fixture.path + "/COMPACTION.tmp", [4, 5])
        let interrupted = try files(fixture.path)

        let dryRun = try cask(["recover", fixture.path, "--dry-run"])
        XCTAssertEqual(dryRun.status, 65, dryRun.out)
        XCTAssertTrue(try files(fixture.path) == interrupted)
        let run = try cask(["recover", fixture.path, "--json"])
        XCTAssertEqual(run.status, 0, run.out + run.err)
        let report = try json(run)
        let changes = try XCTUnwrap(report["changes"] as? [[String: Any]])
        let kinds = changes.map { "\($0["kind"] as? String ?? "?") \(URL(fileURLWithPath: $0["file"] as? String ?? "").lastPathComponent)" }
        // Hints before segments, then the manifest, then the leftovers.
        var expected = ["finish-compaction \(SegmentName.hint(replaced[0]))"]
        expected += replaced.prefix(replaced.count / 2 + 1).map { "finish-compaction \(SegmentName.segment($0))" }
        expected.append("finish-compaction COMPACTION")
        expected += ["remove-leftover 0000000999.cask.tmp", "remove-leftover COMPACTION.tmp"]
        XCTAssertEqual(kinds, expected)
        let after = Set(try FileManager.default.contentsOfDirectory(atPath: fixture.path))
        XCTAssertTrue(after.isDisjoint(with: replaced.map(SegmentName.segment) + [CompactionManifest.fileName, "COMPACTION.tmp", "0000000999.cask.tmp"]), "\(after)")
        try assertRepaired(fixture.path, fixture.model, "compaction")
        try assertBackupRestores(report, fixture.path, interrupted, "compaction")

        // A manifest that is not valid is ignored by every open, and removed.
        try StoreFiles.write(fixture.path + "/" + CompactionManifest.fileName, [0x43, 0x41, 0x53, 0x4B])
        let invalid = try cask(["recover", fixture.path])
        XCTAssertEqual(invalid.status, 0, invalid.out)
        XCTAssertTrue(invalid.out.contains("remove \(fixture.path)/COMPACTION: invalid compaction manifest (every open ignores it); 4 bytes"), invalid.out)
        try assertRepaired(fixture.path, fixture.model, "invalid manifest")
    }

    func testDamagedBatchCommitIsRebuiltFromTheHintOrItsMembersDropped() throws {
        let fixture = try makeFixture(seed: 11)
        // A batch (a put and a delete, then the commit record) inside a sealed segment.
        var found: (id: UInt64, members: [StoreFiles.Record], commit: StoreFiles.Record)?
        for id in fixture.sealed where found == nil {
            let records = fixture.records[id]!
            if let index = records.indices.first(where: { $0 >= 2 && records[$0].type == .batch }) {
                found = (id, [records[index - 2], records[index - 1]], records[index])
            }
        }
        let (id, members, commit) = try XCTUnwrap(found, "no batch in a sealed segment")
        for keepHint in [true, false] {
            let scratch = TemporaryDirectory("cask-recover-batch")
            defer { scratch.remove() }
            let directory = scratch.appending("store")
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
            try StoreFiles.copy(from: fixture.path, to: directory)
            if !keepHint { try FileManager.default.removeItem(atPath: StoreFiles.hintPath(directory, id)) }
            let segmentPath = StoreFiles.segmentPath(directory, id)
            try StoreFiles.flip(segmentPath, at: commit.end - 1)
            let run = try cask(["recover", directory, "--json"])
            XCTAssertEqual(run.status, 0, run.out + run.err)
            let report = try json(run)
            if keepHint {
                // The hint holds everything a commit record is made of.
                XCTAssertEqual(report["recordsRestored"] as? Int, 1)
                XCTAssertTrue(try StoreFiles.read(segmentPath) == StoreFiles.read(fixture.segment(id)))
                try assertRepaired(directory, fixture.model, "batch, hint kept")
            } else {
                // Without their commit record the members were never applied: they go too.
                XCTAssertEqual(report["recordsDropped"] as? Int, 2)
                let change = try XCTUnwrap((report["changes"] as? [[String: Any]])?.first)
                let ranges = try XCTUnwrap(change["droppedRanges"] as? [[String: Any]])
                XCTAssertEqual(ranges.compactMap { ($0["offset"] as? NSNumber)?.intValue }, [members[0].offset, members[1].offset, commit.offset])
                XCTAssertTrue((ranges.first?["reason"] as? String ?? "").hasSuffix("a member of a batch without its commit record (never applied)"), "\(ranges)")
                try assertRepaired(directory, fixture.model(without: members + [commit]), "batch, no hint")
            }
        }
        // The member that is a delete damaged instead: the hint rebuilds it, which makes the batch
        // whole again (every member and the commit record kept); without the hint the batch goes.
        // (Before, the rebuilt member was kept while the rest of its batch was dropped: a batch
        // member without its commit record, damage the repair had made itself.)
        let delete = try XCTUnwrap(members.first { $0.type == .delete }, "the batch has a delete")
        for keepHint in [true, false] {
            let scratch = TemporaryDirectory("cask-recover-batch-member")
            defer { scratch.remove() }
            let directory = scratch.appending("store")
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
            try StoreFiles.copy(from: fixture.path, to: directory)
            if !keepHint { try FileManager.default.removeItem(atPath: StoreFiles.hintPath(directory, id)) }
            let segmentPath = StoreFiles.segmentPath(directory, id)
            try StoreFiles.flip(segmentPath, at: delete.end - 1)
            let run = try cask(["recover", directory, "--json"])
            XCTAssertEqual(run.status, 0, run.out + run.err)
            let report = try json(run)
            XCTAssertEqual(try cask(["verify", directory]).status, 0, "member damaged, hint \(keepHint)")
            if keepHint {
                XCTAssertEqual(report["recordsRestored"] as? Int, 1)
                XCTAssertTrue(try StoreFiles.read(segmentPath) == StoreFiles.read(fixture.segment(id)))
                try assertRepaired(directory, fixture.model, "batch member, hint kept")
            } else {
                XCTAssertEqual(report["recordsDropped"] as? Int, 2)
                try assertRepaired(directory, fixture.model(without: members + [commit]), "batch member, no hint")
            }
        }
    }

    func testValueThatDoesNotDecompressIsDropped() throws {
        // Three records; the middle one's checksum holds but its LZ4 payload does not expand to its
        // value length (as in ToolTests.testVerifierDecompressesEveryCompressedValue).
        let root = TemporaryDirectory("cask-recover-lz4")
        let directory = root.appending("store")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        func record(_ key: String, _ value: [UInt8], seq: UInt64) -> [UInt8] {
            var buffer = ByteBuffer(capacity: 4096)
            _ = Array(key.utf8).withUnsafeBytes { key in
                value.withUnsafeBytes { RecordEncoder().append(type: .put, seq: seq, key: key, value: $0, expiresAt: nil, to: &buffer) }
            }
            return buffer.copyBytes()
        }
        let first = record("a", [1, 2, 3], seq: 1), last = record("c", [7], seq: 3)
        var bad = record("b", [UInt8](repeating: 0x61, count: 1000), seq: 2)
        XCTAssertEqual(Array(bad[8...9]), [0xE8, 0x07], "value length 1000")
        bad[8] = 0xE9
        StoreFiles.rechecksumRecord(&bad)
        let header = SegmentHeader(segmentID: 1, baseSeq: 1).encoded()
        try StoreFiles.write(directory + "/0000000001.cask", header + first + bad + last)
        XCTAssertEqual(try cask(["verify", directory]).status, 65)

        let run = try cask(["recover", directory])
        XCTAssertEqual(run.status, 0, run.out + run.err)
        XCTAssertTrue(run.out.contains("\n  dropped bytes \(40 + first.count)..<\(40 + first.count + bad.count) (\(bad.count) bytes, record): put record, seq 2: LZ4 payload does not expand to 1001 bytes\n"), run.out)
        XCTAssertTrue(run.out.contains("\n  1 intact record dropped\n"), run.out)
        XCTAssertEqual(try StoreFiles.read(directory + "/0000000001.cask"), header + first + last)
        try assertRepaired(directory, [Array("a".utf8): [1, 2, 3], Array("c".utf8): [7]], "lz4")
    }

    /// A batch's members written after its commit record (found by the store-image fuzzer): the
    /// reader applies none of them, and the repair must drop them all with the commit record, not
    /// keep a batch the next verify finds incomplete.
    func testBatchMembersAfterTheirCommitRecordAreDropped() throws {
        let root = TemporaryDirectory("cask-recover-batch-order")
        defer { root.remove() }
        let directory = root.appending("store")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        func record(_ type: RecordType, _ key: [UInt8], _ value: [UInt8], seq: UInt64, member: Bool = false) -> [UInt8] {
            var buffer = ByteBuffer(capacity: 4096)
            _ = key.withUnsafeBytes { key in
                value.withUnsafeBytes { RecordEncoder().append(type: type, seq: seq, key: key, value: $0, expiresAt: nil, batchMember: member, to: &buffer) }
            }
            return buffer.copyBytes()
        }
        let first = record(.put, Array("a".utf8), [1], seq: 1)
        let commit = record(.batch, [2, 0, 0, 0, 0, 0, 0, 0], [2], seq: 4)
        let members = record(.put, Array("b".utf8), [2], seq: 2, member: true) + record(.put, Array("c".utf8), [3], seq: 3, member: true)
        let last = record(.put, Array("d".utf8), [4], seq: 5)
        let header = SegmentHeader(segmentID: 1, baseSeq: 1).encoded()
        try StoreFiles.write(directory + "/0000000001.cask", header + first + commit + members + last)
        XCTAssertEqual(try cask(["verify", directory]).status, 65)

        let run = try cask(["recover", directory, "--json"])
        XCTAssertEqual(run.status, 0, run.out + run.err)
        XCTAssertEqual(try json(run)["recordsDropped"] as? Int, 3)
        XCTAssertEqual(try cask(["verify", directory]).status, 0)
        XCTAssertEqual(try StoreFiles.read(directory + "/0000000001.cask"), header + first + last)
        try assertRepaired(directory, [Array("a".utf8): [1], Array("d".utf8): [4]], "members after their commit record")
    }

    /// A failure at any I/O call of a repair (the backup, a rewrite, a rename, a sync…) leaves a
    /// store that opens and reads every undamaged key, and a second repair finishes the job.
    func testAFailureAtAnyCallLeavesAStoreThatASecondRepairFinishes() throws {
        let fixture = try makeFixture(seed: 12)
        let damaged = TemporaryDirectory("cask-recover-faults")
        try StoreFiles.copy(from: fixture.path, to: damaged.path)
        let newest = Dictionary(fixture.all.map { ($0.key, $0) }, uniquingKeysWith: { $0.seq > $1.seq ? $0 : $1 })
        let victim = try XCTUnwrap(fixture.records[fixture.sealed[1]]!.first { $0.type == .put && $0.length >= 40 && newest[$0.key]?.seq == $0.seq })
        try StoreFiles.flip(StoreFiles.segmentPath(damaged.path, fixture.sealed[1]), at: victim.offset + victim.length / 2)
        try StoreFiles.flip(StoreFiles.hintPath(damaged.path, fixture.sealed[2]), at: 60)
        let last = fixture.records[fixture.ids.last!]!.last!
        try StoreFiles.truncate(StoreFiles.segmentPath(damaged.path, fixture.ids.last!), to: last.end - 3)
        try StoreFiles.write(damaged.appending("COMPACTION.tmp"), [1])
        let full = fixture.model
        let repaired = fixture.model(without: [victim, last])
        let undamagedKeys = full.keys.filter { full[$0] == repaired[$0] }

        let recorder = FaultInjectingFileSystem()
        let baseline = TemporaryDirectory("cask-recover-faults-baseline")
        defer { try? FileManager.default.removeItem(atPath: baseline.path + "-backup") }
        try StoreFiles.copy(from: damaged.path, to: baseline.path)
        var baselineRepair = StoreRepair(directory: baseline.path, fileSystem: recorder)
        _ = try baselineRepair.run(dryRun: false, backupDirectory: baseline.path + "-backup", progress: nil)
        let points = recorder.trace.filter { $0.operation.canFail }.map(\.index)
        XCTAssertGreaterThan(points.count, 40, "too few calls for a real test")
        for operation in [FaultInjectingFileSystem.Operation.pwrite, .fdatasync, .rename, .ftruncate, .unlink, .makeDirectory] {
            XCTAssertTrue(recorder.trace.contains { $0.operation == operation }, "no \(operation) in the repair")
        }

        var failures = 0
        for point in points {
            let scratch = TemporaryDirectory("cask-recover-fault")
            defer {
                scratch.remove()
                for suffix in ["-backup", "-backup-2"] { try? FileManager.default.removeItem(atPath: scratch.path + suffix) }
            }
            try StoreFiles.copy(from: damaged.path, to: scratch.path)
            let fileSystem = FaultInjectingFileSystem()
            fileSystem.inject(.init(nil, .callIndex(point), .fail(.ioError)))
            let context = "fault at \(recorder.trace[point])"
            do {
                var repair = StoreRepair(directory: scratch.path, fileSystem: fileSystem)
                _ = try repair.run(dryRun: false, backupDirectory: scratch.path + "-backup", progress: nil)
            } catch {
                failures += 1
            }
            // Whatever happened, the store opens and every key the damage did not touch reads right.
            let store = try CaskStore.open(at: scratch.path, options: .readOnly)
            for key in undamagedKeys {
                XCTAssertEqual(try store.get(key), full[key], "\(context): \(String(decoding: key, as: UTF8.self))")
            }
            try store.close()
            // And a second repair finishes the job.
            let report = try CaskStore.repair(at: scratch.path, backupDirectory: scratch.path + "-backup-2")
            XCTAssertFalse(report.dryRun)
            let verification = try CaskStore.verify(at: scratch.path)
            XCTAssertTrue(verification.isClean, "\(context): \(verification)")
            let reopened = try CaskStore.open(at: scratch.path, options: .readOnly)
            XCTAssertTrue(reopened.recoveryReport.isClean, "\(context): \(reopened.recoveryReport)")
            assertStore(reopened, matches: repaired, context)
            try reopened.close()
        }
        XCTAssertGreaterThan(failures, points.count / 2, "most faults must surface as errors")
    }

    /// A repair whose backup cannot be made (the disk fills while it copies) removes what it made
    /// of the backup and changes nothing: it left a directory of truncated copies, which the
    /// documented undo (copy the backup back) would have put into the store.
    func testABackupThatFailsIsRemovedAndTheStoreIsUnchanged() throws {
        let fixture = try makeFixture(seed: 13)
        try StoreFiles.flip(fixture.segment(fixture.sealed[0]), at: 300)
        try StoreFiles.flip(fixture.segment(fixture.sealed[1]), at: 300)
        let before = try StoreFiles.snapshot(fixture.path)
        for nth in [1, 2] {
            let fileSystem = FaultInjectingFileSystem()
            fileSystem.inject(.init(.pwrite, pathSuffix: ".cask", .nth(nth), .shortWrite(bytes: 100, then: .noSpace)))
            let backup = fixture.path + "-backup-\(nth)"
            var repair = StoreRepair(directory: fixture.path, fileSystem: fileSystem)
            XCTAssertThrowsError(try repair.run(dryRun: false, backupDirectory: backup, progress: nil)) {
                guard case .diskFull? = $0 as? CaskError else { return XCTFail("\($0)") }
            }
            XCTAssertFalse(FileManager.default.fileExists(atPath: backup), "copy \(nth): a partial backup was left")
            XCTAssertEqual(try StoreFiles.snapshot(fixture.path), before, "copy \(nth): the store changed")
        }
    }

    func testProgressOnStandardError() throws {
        let fixture = try makeFixture(seed: 9)
        try StoreFiles.flip(fixture.segment(fixture.sealed[0]), at: 300)
        let run = try cask(["recover", fixture.path])
        XCTAssertEqual(run.status, 0, run.err)
        for phase in ["checking", "backing up", "repairing"] {
            XCTAssertTrue(run.err.contains("\(phase): 0%"), run.err)
            XCTAssertTrue(run.err.contains("\(phase): 100%"), run.err)
        }
    }

    // MARK: import-defaults

    /// Whole seconds: XML property lists keep no fractions of a second.
    private static let date = Date(timeIntervalSinceReferenceDate: 786_000_123)

    /// Every property-list type, nested, as Foundation objects and as the values that must come back.
    private static var entries: [(name: String, object: Any, value: PropertyListValue)] { [
        ("name", "Ada Lovelace", .string("Ada Lovelace")),
        ("empty", "", .string("")),
        ("launches", 42, .integer(42)),
        ("one", 1, .integer(1)),
        ("zero", 0, .integer(0)),
        ("negative", Int64.min, .integer(Int(Int64.min))),
        ("flag", true, .bool(true)),
        ("off", false, .bool(false)),
        ("ratio", 0.1, .real(0.1)),
        ("whole", 1.0, .real(1.0)),
        ("when", date, .date(date)),
        ("blob", Data([0, 1, 0xFF, 0x7F]), .data(Data([0, 1, 0xFF, 0x7F]))),
        ("list", [1, "two", true, 3.5, Data([9])] as [Any], .array([.integer(1), .string("two"), .bool(true), .real(3.5), .data(Data([9]))])),
        ("nested", ["inner": ["deep": [false, 0, ["k": date]]], "42": "int-like key", "042": 1.5] as [String: Any],
         .dictionary(["inner": .dictionary(["deep": .array([.bool(false), .integer(0), .dictionary(["k": .date(date)])])]),
                      "42": .string("int-like key"), "042": .real(1.5)])),
        ("empties", ["a": [Any](), "d": [String: Any]()] as [String: Any], .dictionary(["a": .array([]), "d": .dictionary([:])])),
        ("unicode ключ 🔑", "värde", .string("värde")),
    ] }

    func testImportDefaultsRoundTripsEveryPropertyListType() throws {
        let root = TemporaryDirectory("cask-recover-defaults")
        var dictionary: [String: Any] = [:]
        for entry in Self.entries { dictionary[entry.name] = entry.object }
        for (format, coder, option) in [
            (PropertyListSerialization.PropertyListFormat.xml, ObjectCoder.binary, [String]()),
            (.binary, .binary, ["--coder", "binary"]),
            (.xml, .json, ["--coder", "json"]),
            (.binary, .propertyList, ["--coder", "plist"]),
        ] {
            let context = "\(format == .xml ? "XML" : "binary") plist, \(coder) coder"
            let file = root.appending("defaults-\(format.rawValue).plist")
            try PropertyListSerialization.data(fromPropertyList: dictionary, format: format, options: 0).write(to: URL(fileURLWithPath: file))
            let directory = root.appending("store-\(format.rawValue)-\(coder)")
            let run = try cask(["import-defaults", directory, file, "--prefix", "defaults/"] + option)
            // The plist coder cannot store a bare string, number, boolean or date (PropertyListEncoder
            // refuses one outside a container): those are skipped, the rest imported.
            let entries = Self.entries.filter { entry in
                switch entry.value {
                case .string, .integer, .real, .bool, .date: coder != .propertyList
                case .data, .array, .dictionary: true
                }
            }
            XCTAssertEqual(run.status, entries.count == Self.entries.count ? 0 : 65, "\(context): \(run.out) \(run.err)")
            XCTAssertTrue(run.out.hasPrefix("""
                Imported \(entries.count) entries from \(file) into \(directory) (\(option.last ?? "binary") coder, keys 'defaults/' + entry name).
                Stored 3 entries as PropertyListValue (values of mixed kinds, no Swift type of their own):
                  'empties': the dictionary mixes array and dictionary values
                  'list': the array mixes integer and string values
                  'nested': the dictionary mixes real and string values

                """), "\(context): \(run.out)")

            let store = try CaskStore.open(at: directory, options: .readOnly)
            defer { try? store.close() }
            XCTAssertEqual(store.count, entries.count, context)
            for entry in entries {
                // Read as its Swift type (a PropertyListValue when it has none), with that coder.
                let bytes = try XCTUnwrap(try store.get("defaults/" + entry.name), "\(context): \(entry.name)")
                XCTAssertEqual(try Self.readBack(bytes, like: entry.value, coder: coder), entry.value, "\(context): \(entry.name)")
            }
            // Back to Foundation objects that serialize as the original did.
            let back = try XCTUnwrap(try store.get(PropertyListValue.self, forKey: "defaults/nested", coder: coder)).propertyListObject
            XCTAssertEqual(try PropertyListValue(propertyList: back), Self.entries.first { $0.name == "nested" }!.value, context)
            XCTAssertNoThrow(try PropertyListSerialization.data(fromPropertyList: back, format: .binary, options: 0))
        }
    }

    func testImportDefaultsReportsSkippedEntriesAndImportsTheRestAtomically() throws {
        let root = TemporaryDirectory("cask-recover-defaults")
        let dictionary: [String: Any] = [
            "good": "yes",
            "also-good": [1, 2],
            "too-big-integer": UInt64.max,
            "nested-too-big": ["fine": 1, "bad": [UInt64.max]] as [String: Any],
            String(repeating: "k", count: 70_000): "a key over the limit",
            "not-a-number": Double.nan,
        ]
        let file = root.appending("defaults.plist")
        try PropertyListSerialization.data(fromPropertyList: dictionary, format: .binary, options: 0).write(to: URL(fileURLWithPath: file))
        let directory = root.appending("store")
        var run = try cask(["import-defaults", directory, file, "--coder", "json"])
        XCTAssertEqual(run.status, 65, run.err)
        XCTAssertEqual(run.err, "")
        XCTAssertEqual(run.out, """
            Imported 2 entries from \(file) into \(directory) (json coder, keys are the entry names).
            Skipped 4 entries:
              '\(String(repeating: "k", count: 60))…' (70000 bytes): key is 70000 bytes, over the limit of 65535 bytes
              'nested-too-big': integer 18446744073709551615 is outside Int's range (-9223372036854775808 ... 9223372036854775807) at bad[0]
              'not-a-number': does not encode with the json coder: \(try Self.jsonError(Double.nan))
              'too-big-integer': integer 18446744073709551615 is outside Int's range (-9223372036854775808 ... 9223372036854775807)

            """)
        let store = try CaskStore.open(at: directory, options: .init(durability: .os, readOnly: true))
        XCTAssertEqual(try store.keys(), [Array("also-good".utf8), Array("good".utf8)])
        XCTAssertEqual(try store.get(String.self, forKey: "good", coder: .json), "yes")
        XCTAssertEqual(try store.get([Int].self, forKey: "also-good", coder: .json), [1, 2])
        try store.close()

        // With the binary coder a NaN is a value like any other.
        run = try cask(["import-defaults", directory, file, "--prefix", "b:"])
        XCTAssertEqual(run.status, 65)
        XCTAssertTrue(run.out.hasPrefix("Imported 3 entries "), run.out)
        let reopened = try CaskStore.open(at: directory, options: .init(durability: .os, readOnly: true))
        defer { try? reopened.close() }
        XCTAssertEqual(try reopened.get(Double.self, forKey: "b:not-a-number")?.isNaN, true)

        // --json: the same report, machine-readable.
        run = try cask(["import-defaults", directory, file, "--prefix", "j:", "--json"])
        XCTAssertEqual(run.status, 65, run.err)
        let report = try XCTUnwrap(try JSONSerialization.jsonObject(with: run.stdout) as? [String: Any], run.out)
        XCTAssertEqual(report["imported"] as? Int, 3)
        XCTAssertEqual(report["coder"] as? String, "binary")
        XCTAssertEqual(report["prefix"] as? String, "j:")
        let skipped = try XCTUnwrap(report["skipped"] as? [[String: Any]])
        XCTAssertEqual(skipped.compactMap { $0["name"] as? String }.filter { !$0.hasPrefix("kkk") }, ["nested-too-big", "too-big-integer"])
        XCTAssertEqual(skipped.count, 3)
    }

    /// Whether the store (read-only) holds exactly `expected`, each value read with the binary coder
    /// as its Swift type (see ``readBack(_:like:coder:)``).
    private func assertStored(_ directory: String, _ expected: [String: PropertyListValue], file: StaticString = #filePath, line: UInt = #line) throws {
        let store = try CaskStore.open(at: directory, options: .init(durability: .os, readOnly: true))
        defer { try? store.close() }
        XCTAssertEqual(Set(try store.keys().map { String(decoding: $0, as: UTF8.self) }), Set(expected.keys), file: file, line: line)
        for (key, value) in expected {
            let bytes = try XCTUnwrap(try store.get(key), key, file: file, line: line)
            XCTAssertEqual(try Self.readBack(bytes, like: value, coder: .binary), value, key, file: file, line: line)
        }
    }

    /// An imported value decoded as the Swift type `expected` has (``PropertyListValue/typedValue()``),
    /// or as a ``PropertyListValue`` when it has none, and converted back for comparison.
    static func readBack(_ bytes: [UInt8], like expected: PropertyListValue, coder: ObjectCoder) throws -> PropertyListValue {
        guard let typed = try? expected.typedValue() else { return try coder.decode(PropertyListValue.self, from: bytes) }
        let type: any Decodable.Type = type(of: typed)
        return try PropertyListValue(propertyList: decode(type, bytes, coder))
    }

    private static func decode<T: Decodable>(_ type: T.Type, _ bytes: [UInt8], _ coder: ObjectCoder) throws -> Any {
        try coder.decode(T.self, from: bytes)
    }

    /// The findings of issue 27 (items 3 and 4 and the rest), end to end: exit status, exact
    /// messages, and what the store holds afterwards.
    func testImportDefaultsIssue27Findings() throws {
        let root = TemporaryDirectory("cask-recover-defaults")
        func write(_ name: String, _ bytes: [UInt8]) throws -> String {
            let file = root.appending(name)
            try Data(bytes).write(to: URL(fileURLWithPath: file))
            return file
        }
        let range = "outside Int's range (-9223372036854775808 ... 9223372036854775807)"
        typealias Fixtures = PropertyListReaderTests

        // 128-bit binary integers: skipped with their exact value, not cut to the low 64 bits.
        var objects: [[UInt8]] = [[0xD4, 1, 2, 3, 4, 5, 6, 7, 8], [0x54] + Array("big1".utf8), [0x54] + Array("big2".utf8),
                                  [0x54] + Array("big3".utf8), [0x52] + Array("ok".utf8)]
        objects += [Fixtures.int128(Int128(1) << 64 + 5), Fixtures.int128(Int128(1) << 100), Fixtures.int128(-(Int128(1) << 64)), Fixtures.int128(5)]
        var file = try write("int128.plist", Fixtures.bplist(objects))
        var directory = root.appending("int128")
        var run = try cask(["import-defaults", directory, file])
        XCTAssertEqual(run.status, 65, run.err)
        XCTAssertEqual(run.err, "")
        XCTAssertEqual(run.out, """
            Imported 1 entry from \(file) into \(directory) (binary coder, keys are the entry names).
            Skipped 3 entries:
              'big1': integer 18446744073709551621 is \(range)
              'big2': integer 1267650600228229401496703205376 is \(range)
              'big3': integer -18446744073709551616 is \(range)

            """)
        try assertStored(directory, ["ok": .integer(5)])

        // XML: a big integer skips its entry only; invalid base64 refuses the file.
        file = try write("big.xml", Array("<plist><dict><key>a</key><integer>18446744073709551621</integer><key>b</key><data>AQID</data></dict></plist>".utf8))
        directory = root.appending("big-xml")
        run = try cask(["import-defaults", directory, file])
        XCTAssertEqual(run.status, 65, run.err)
        XCTAssertEqual(run.out, """
            Imported 1 entry from \(file) into \(directory) (binary coder, keys are the entry names).
            Skipped 1 entry:
              'a': integer 18446744073709551621 is \(range)

            """)
        try assertStored(directory, ["b": .data(Data([1, 2, 3]))])

        let refused: [(String, [UInt8], String)] = [
            ("base64.plist", Array("<plist><dict><key>b</key><data>AQ*D</data></dict></plist>".utf8),
             "XML property list, line 1, column 34: '*' in <data> is not a base64 character"),
            ("set.plist", Fixtures.bplist([[0xC2, 1, 2], [0x10, 1], [0x10, 2]]),
             "binary property list, object 0 at byte 8: the top level is a set, not a dictionary"),
            ("nested-set.plist", Fixtures.single([0xA1, 3], [0xC1, 4], [0x51, 0x78]),
             "binary property list, object 3 at byte 15: a set (marker 0xC1), not a property-list type"),
            ("duplicate.plist", Array("<plist><dict><key>a</key><true/><key>a</key><false/></dict></plist>".utf8),
             "XML property list, line 1, column 33: the dictionary has the key 'a' twice"),
            ("duplicate-binary.plist", Fixtures.bplist([[0xD2, 1, 1, 2, 3], [0x51, 0x61], [0x09], [0x08]]),
             "binary property list, object 0 at byte 8: the dictionary has the key 'a' twice"),
            ("openstep.plist", Array("{ a = 1; }".utf8),
             "it starts with '{': an OpenStep (text) property list or JSON; only XML and binary property lists are read"),
            ("bare.plist", Array("bplist00".utf8),
             "a binary property list of 8 bytes: too short for the 8-byte header and the 32-byte trailer (40 bytes)"),
        ]
        for (name, bytes, message) in refused {
            file = try write(name, bytes)
            directory = root.appending("refused-" + name)
            run = try cask(["import-defaults", directory, file])
            XCTAssertEqual(run.status, 65, name)
            XCTAssertEqual(run.err, "Error: \(file): \(message); nothing was imported\n", name)
            XCTAssertEqual(run.out, "", name)
            XCTAssertFalse(FileManager.default.fileExists(atPath: directory), name)
        }

        // 128 levels of arrays: skipped, said why; 127 stored and read back.
        func nested(_ depth: Int) -> String { String(repeating: "<array>", count: depth) + "<true/>" + String(repeating: "</array>", count: depth) }
        file = try write("deep.plist", Array("<plist><dict><key>deep</key>\(nested(128))<key>fits</key>\(nested(127))</dict></plist>".utf8))
        directory = root.appending("deep")
        run = try cask(["import-defaults", directory, file])
        XCTAssertEqual(run.status, 65, run.err)
        XCTAssertEqual(run.out, """
            Imported 1 entry from \(file) into \(directory) (binary coder, keys are the entry names).
            Skipped 1 entry:
              'deep': containers are nested more than 127 deep, more than the object coder can store

            """)
        var deep = PropertyListValue.bool(true)
        for _ in 0..<127 { deep = .array([deep]) }
        try assertStored(directory, ["fits": deep])

        // A FIFO is read as a stream.
        let fifo = root.appending("fifo.plist")
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let plist = [UInt8](try PropertyListSerialization.data(fromPropertyList: ["piped": "yes"], format: .xml, options: 0))
        DispatchQueue.global().async {
            let descriptor = open(fifo, O_WRONLY)
            guard descriptor >= 0 else { return }
            _ = plist.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            close(descriptor)
        }
        directory = root.appending("fifo")
        run = try cask(["import-defaults", directory, fifo])
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertEqual(run.out, "Imported 1 entry from \(fifo) into \(directory) (binary coder, keys are the entry names).\n")
        try assertStored(directory, ["piped": .string("yes")])

        // A directory as the property list.
        run = try cask(["import-defaults", root.appending("new"), directory])
        XCTAssertEqual(run.status, 1)
        XCTAssertEqual(run.err, "Error: cannot read \(directory): it is a directory, not a property-list file\n")
        XCTAssertFalse(FileManager.default.fileExists(atPath: root.appending("new")))

        // An empty dictionary creates nothing, changes nothing, and says so.
        file = try write("empty.plist", [UInt8](try PropertyListSerialization.data(fromPropertyList: [String: Any](), format: .binary, options: 0)))
        run = try cask(["import-defaults", root.appending("none"), file])
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertEqual(run.out, "Imported nothing from \(file) (its top-level dictionary is empty); \(root.appending("none")) was not created.\n")
        XCTAssertFalse(FileManager.default.fileExists(atPath: root.appending("none")))
        let before = try StoreFiles.snapshot(directory)
        run = try cask(["import-defaults", directory, file])
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertEqual(run.out, "Imported nothing from \(file) (its top-level dictionary is empty); \(directory) was not changed.\n")
        XCTAssertTrue(try StoreFiles.snapshot(directory) == before)
    }

    /// What JSONEncoder says about a real it cannot encode (the text differs between Foundation versions).
    private static func jsonError(_ value: Double) throws -> String {
        do {
            _ = try JSONEncoder().encode(value)
            return "(encoded)"
        } catch {
            return "\(error)"
        }
    }
}
