import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// `backup(to:)`: a consistent copy of a live store — every commit up to one point, never part of
/// a batch — made of links to the sealed segments and a copy of the active one, built under a
/// temporary name, never placed over anything, never inside the store, and never touching the
/// store's files.
final class BackupTests: XCTestCase {
    /// Values LZ4 cannot shrink, so that a few hundred of them fill several small segments.
    private static func value(_ n: Int, _ length: Int = 100) -> [UInt8] {
        var random = SeededGenerator(seed: UInt64(n))
        return Array("value \(n) ".utf8) + random.bytes(length)
    }

    // MARK: One point of the history

    /// The history the writer makes: operation `n` (from 1) is one batch of puts and deletes of
    /// `k/…` keys that also sets `counter` to `n`, then a put of `solo/<n>` on its own. A copy at
    /// one point holds the batches 1…N whole (N is its `counter`) and the solos 1…N-1, or 1…N.
    private struct History {
        var random: SeededGenerator
        var model: [String: [UInt8]] = [:]
        var operations = 0

        init(seed: UInt64) { random = SeededGenerator(seed: seed) }

        /// Applies the next operation to the model; returns its batch and its solo key.
        mutating func next() -> (batch: WriteBatch, solo: String) {
            operations += 1
            let n = operations
            var batch = WriteBatch()
            for _ in 0..<Int.random(in: 1...8, using: &random) {
                let key = "k/\(Int.random(in: 0..<300, using: &random))"
                if Int.random(in: 0..<4, using: &random) == 0 {
                    batch.delete(key)
                    model[key] = nil
                } else {
                    let value = Array("\(n) \(key) ".utf8) + [UInt8](repeating: UInt8(n & 0xFF), count: Int.random(in: 0...300, using: &random))
                    batch.put(key, value)
                    model[key] = value
                }
            }
            batch.put("counter", Array(String(n).utf8))
            model["counter"] = Array(String(n).utf8)
            let solo = "solo/\(n)"
            model[solo] = Array(solo.utf8)
            return (batch, solo)
        }
    }

    /// Backups taken while one thread writes batches and single puts, another compacts, over small
    /// segments that seal all the time: each, verified, opens clean and equals the history at one
    /// point — linked on this file system, copied with `.copy` and onto tmpfs.
    func testBackupsBesideWritesAndCompactionsEachHoldOnePointOfTheHistory() throws {
        let dir = TemporaryDirectory("cask-backup")
        defer { dir.remove() }
        let other = FileManager.default.fileExists(atPath: "/dev/shm") ? TemporaryDirectory("cask-backup", base: "/dev/shm") : nil
        defer { other?.remove() }
        let store = try CaskStore.open(at: dir.appending("store"), options: .manualCompaction(.os, maxSegmentSize: 32 << 10))
        let seed = SeededGenerator.fromEnvironment(fallback: 24_1204).seed
        // Each backup waits for the writer to get `spacing` operations further (so that segments
        // seal and compact in between, however loaded the machine); the writer goes at most one
        // `spacing` past the backup under way (the store stays small), and runs until the last one.
        let rounds = 12, spacing = 400
        let written = Lock(0), allowed = Lock(2 * spacing), stop = Lock(false), halt = Lock(false)
        let writing = Thread {
            var history = History(seed: seed)
            defer { stop.withLock { $0 = true } }
            while !halt.withLock({ $0 }) {
                if history.operations >= allowed.withLock({ $0 }) {
                    usleep(200)
                    continue
                }
                let (batch, solo) = history.next()
                do {
                    try store.write(batch)
                    try store.put(solo, Array(solo.utf8))
                } catch {
                    XCTFail("write \(history.operations): \(error)")
                    return
                }
                written.withLock { $0 = history.operations }
            }
        }
        let compacting = Thread {
            while !stop.withLock({ $0 }) {
                do { try store.compact() } catch { XCTFail("compact: \(error)") }
                usleep(3000)
            }
        }
        writing.start()
        compacting.start()
        var backups: [(path: String, report: CaskStore.BackupReport)] = []
        rounds: for round in 1...rounds {
            let deadline = Date().addingTimeInterval(120)
            while written.withLock({ $0 }) < round * spacing {
                guard !stop.withLock({ $0 }), Date() < deadline else {
                    XCTFail("the writer stopped, or made no progress for 2 minutes, before backup \(round)")
                    break rounds
                }
                usleep(500)
            }
            let (base, method): (String, CaskStore.BackupMethod) = switch round % 3 {
            case 0: (dir.path, .copy)
            case 1: (dir.path, .linkWherePossible)
            default: (other?.path ?? dir.path, .linkWherePossible)
            }
            let path = base + "/backup-\(round)"
            do { backups.append((path, try store.backup(to: path, method: method, verify: true))) } catch {
                XCTFail("backup \(round): \(error)")
                break
            }
            allowed.withLock { $0 = (round + 2) * spacing }
        }
        halt.withLock { $0 = true }
        while !stop.withLock({ $0 }) { usleep(1000) }
        while !compacting.isFinished { usleep(1000) }
        try store.close()
        XCTAssertEqual(backups.count, rounds)
        XCTAssertTrue(backups.contains { $0.report.segmentsLinked > 0 }, "no backup linked a segment")

        var replay = History(seed: seed)
        var points: [Int] = []
        for (path, report) in backups {
            XCTAssertEqual(report.verificationProblems, [], path)
            let copy = try CaskStore.open(at: path, options: .manualCompaction())
            XCTAssertTrue(copy.recoveryReport.isClean, "\(path): \(copy.recoveryReport)")
            let n = try copy.get("counter").flatMap { Int(String(decoding: $0, as: UTF8.self)) } ?? 0
            points.append(n)
            while replay.operations < n { _ = replay.next() }
            var model = replay.model
            // The solo put that follows batch n may be in or not; nothing later is.
            if n > 0, try copy.get("solo/\(n)") == nil { model["solo/\(n)"] = nil }
            assertStore(copy, matches: model, "\(path) at operation \(n)")
            try copy.close()
        }
        XCTAssertEqual(points, points.sorted(), "later backups hold later points")
        XCTAssertGreaterThan(Set(points).count, rounds / 2, "the backups were not taken at different points: \(points)")
        XCTAssertTrue(zip(points, 1...rounds).allSatisfy { $0 >= $1 * spacing }, "\(points)")
    }

    // MARK: Links and copies

    /// A linked backup's sealed segments are the store's files (one inode, two names, checked
    /// against the store's own descriptor); its active segment is a copy up to the last commit.
    /// Afterwards each store writes on its own: neither sees the other's writes, and the store's
    /// sealed files are byte for byte what they were.
    func testSealedSegmentsAreLinkedAndTheActiveOneIsCopied() throws {
        let dir = TemporaryDirectory("cask-backup")
        defer { dir.remove() }
        let source = dir.appending("store"), target = dir.appending("backup")
        let store = try CaskStore.open(at: source, options: .manualCompaction(.os, maxSegmentSize: 16 << 10))
        var model: [String: [UInt8]] = [:]
        for n in 0..<400 {
            model["key/\(n)"] = Self.value(n)
            try store.put("key/\(n)", model["key/\(n)"]!)
        }
        let report = try store.backup(to: target)
        let ids = try StoreFiles.segmentIDs(in: source)
        XCTAssertGreaterThan(ids.count, 2)
        XCTAssertEqual(try StoreFiles.segmentIDs(in: target), ids)
        XCTAssertEqual(report.segmentsLinked, ids.count - 1)
        XCTAssertEqual(report.segmentsCopied, 1)
        XCTAssertEqual(report.keys, 400)
        XCTAssertEqual(report.lastSeq, 400)
        let activeID = ids.last!
        for id in ids {
            let inSource = try FileManager.default.attributesOfItem(atPath: StoreFiles.segmentPath(source, id))[.systemFileNumber] as? Int
            let inBackup = try FileManager.default.attributesOfItem(atPath: StoreFiles.segmentPath(target, id))[.systemFileNumber] as? Int
            if id == activeID {
                XCTAssertNotEqual(inSource, inBackup, "the active segment must be a copy")
            } else {
                XCTAssertEqual(inSource, inBackup, "sealed segment \(id) is not linked")
            }
        }
        let sealedBefore = try ids.dropLast().map { try StoreFiles.read(StoreFiles.segmentPath(source, $0)) }

        try store.put("after/source", Array("s".utf8))
        let copy = try CaskStore.open(at: target, options: .manualCompaction(.os, maxSegmentSize: 16 << 10))
        assertStore(copy, matches: model, "the backup")
        try copy.put("after/backup", Array("b".utf8))
        try copy.compact()
        try copy.close()
        XCTAssertNil(try store.get("after/backup"))
        try store.close()
        let reopened = try CaskStore.open(at: target, options: .readOnly)
        XCTAssertNil(try reopened.get("after/source"))
        try reopened.close()
        XCTAssertEqual(try ids.dropLast().map { try StoreFiles.read(StoreFiles.segmentPath(source, $0)) }, sealedBefore)
    }

    /// A read-only handle beside a writer that was cut in the middle of a batch (its active
    /// segment ends in part of one): the copy stops at the last commit, so it opens clean and holds
    /// none of the batch. The store is not changed.
    func testAReadOnlyBackupStopsAtTheLastCommit() throws {
        let dir = TemporaryDirectory("cask-backup")
        defer { dir.remove() }
        let source = dir.appending("store")
        var options = CaskStore.Options.manualCompaction()
        options.writeHints = false
        var store = try CaskStore.open(at: source, options: options)
        var model: [String: [UInt8]] = [:]
        for n in 0..<50 {
            model["key/\(n)"] = Array("value \(n)".utf8)
            try store.put("key/\(n)", model["key/\(n)"]!)
        }
        try store.close()
        let active = StoreFiles.segmentPath(source, try StoreFiles.segmentIDs(in: source).last!)
        let committed = try StoreFiles.fileSize(active)
        store = try CaskStore.open(at: source, options: options)
        var batch = WriteBatch()
        for n in 0..<20 { batch.put("batch/\(n)", Self.value(n, 200)) }
        try store.write(batch)
        try store.close()
        // What a writer killed part way through the batch leaves: its first records.
        let written = try StoreFiles.fileSize(active)
        XCTAssertGreaterThan(written, committed + 4000)
        try StoreFiles.truncate(active, to: committed + (written - committed) / 2)
        let before = try StoreFiles.snapshot(source)

        let reader = try CaskStore.open(at: source, options: .readOnly)
        let report = try reader.backup(to: dir.appending("backup"), verify: true)
        try reader.close()
        XCTAssertEqual(report.verificationProblems, [])
        XCTAssertEqual(report.keys, 50)
        XCTAssertEqual(try StoreFiles.fileSize(StoreFiles.segmentPath(dir.appending("backup"), try StoreFiles.segmentIDs(in: source).last!)), committed)
        let copy = try CaskStore.open(at: dir.appending("backup"), options: .manualCompaction())
        XCTAssertTrue(copy.recoveryReport.isClean, "\(copy.recoveryReport)")
        assertStore(copy, matches: model, "the backup")
        try copy.close()
        XCTAssertEqual(try StoreFiles.snapshot(source), before, "the backup changed the store")
    }

    /// `.copy`, and a file system without links (the fault-injecting one): every file copied,
    /// nothing shared with the store.
    func testCopyMethodSharesNoFile() throws {
        let dir = TemporaryDirectory("cask-backup")
        defer { dir.remove() }
        for fileSystem: (any FileSystem)? in [nil, FaultInjectingFileSystem()] {
            let source = dir.appending("store-\(fileSystem == nil)"), target = source + "-backup"
            let store = try CaskStore.open(at: source, options: .manualCompaction(.os, maxSegmentSize: 8 << 10, fileSystem: fileSystem))
            for n in 0..<300 { try store.put("key/\(n)", Self.value(n, 80)) }
            let report = try store.backup(to: target, method: fileSystem == nil ? .copy : .linkWherePossible, verify: true)
            try store.close()
            XCTAssertEqual(report.verificationProblems, [])
            XCTAssertEqual(report.segmentsLinked, 0)
            XCTAssertEqual(report.bytesLinked, 0)
            XCTAssertGreaterThan(report.segmentsCopied, 3)
            for name in try FileManager.default.contentsOfDirectory(atPath: target) {
                let links = try FileManager.default.attributesOfItem(atPath: target + "/" + name)[.referenceCount] as? Int
                XCTAssertEqual(links, 1, name)
            }
        }
    }

    // MARK: Where a backup may go

    /// A destination that exists — a directory, an empty one, a file, a link to nothing — is
    /// refused and left as it was; so is one inside the store (by a relative path too) and one
    /// whose parent is missing. Nothing is left behind.
    func testABackupNeverReplacesAnythingNorGoesInsideTheStore() throws {
        let dir = TemporaryDirectory("cask-backup")
        defer { dir.remove() }
        let source = dir.appending("store")
        let first = try CaskStore.open(at: source, options: .manualCompaction())
        try first.put("k", Array("v".utf8))
        try first.close()
        // Reopened: a store that has not written since its open has no space reserved in its file.
        let store = try CaskStore.open(at: source, options: .manualCompaction())
        try FileManager.default.createDirectory(atPath: dir.appending("empty"), withIntermediateDirectories: false)
        try FileManager.default.createDirectory(atPath: dir.appending("full"), withIntermediateDirectories: false)
        try Data("keep".utf8).write(to: URL(fileURLWithPath: dir.appending("full/file")))
        try Data("keep".utf8).write(to: URL(fileURLWithPath: dir.appending("file")))
        try FileManager.default.createSymbolicLink(atPath: dir.appending("dangling"), withDestinationPath: dir.appending("nowhere"))
        let storeBefore = try StoreFiles.snapshot(source)
        let listing = try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()

        for name in ["empty", "full", "file", "dangling", "store", "store/inside", "store/../store/x", "missing/backup"] {
            XCTAssertThrowsError(try store.backup(to: dir.appending(name)), name) { error in
                XCTAssertTrue("\(error)".contains(dir.path), "\(name): \(error) does not name the path")
            }
        }
        let relative = FileManager.default.currentDirectoryPath
        XCTAssertTrue(FileManager.default.changeCurrentDirectoryPath(source))
        XCTAssertThrowsError(try store.backup(to: "inside"), "inside the store, relative")
        XCTAssertTrue(FileManager.default.changeCurrentDirectoryPath(relative))
        try store.close()

        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted(), listing)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir.appending("empty")), [])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir.appending("full")), ["file"])
        XCTAssertEqual(try String(contentsOfFile: dir.appending("file"), encoding: .utf8), "keep")
        XCTAssertEqual(try FileManager.default.destinationOfSymbolicLink(atPath: dir.appending("dangling")), dir.appending("nowhere"))
        var storeAfter = try StoreFiles.snapshot(source)
        storeAfter["LOCK"] = storeBefore["LOCK"]  // the pid of the open
        XCTAssertEqual(storeAfter, storeBefore)
    }

    /// A backup that fails part way (the disk fills while the third segment is copied; a sync of
    /// the directory fails) throws naming the file, leaves no destination and no temporary
    /// directory, and the store goes on as before.
    func testAFailedBackupLeavesNothingBehind() throws {
        let dir = TemporaryDirectory("cask-backup")
        defer { dir.remove() }
        let fileSystem = FaultInjectingFileSystem()
        let source = dir.appending("store"), target = dir.appending("backup")
        var options = CaskStore.Options.manualCompaction(.os, maxSegmentSize: 8 << 10, fileSystem: fileSystem)
        options.writeHints = false  // no hint written in the background while the store's files are compared
        let store = try CaskStore.open(at: source, options: options)
        for n in 0..<300 { try store.put("key/\(n)", Self.value(n, 80)) }
        let before = try StoreFiles.snapshot(source)
        fileSystem.inject(.init(.pwrite, pathSuffix: "/" + SegmentName.segment(3), .nth(1), .fail(.noSpace)))
        XCTAssertThrowsError(try store.backup(to: target)) { error in
            XCTAssertEqual(error as? CaskError, .diskFull(path: "\(target).incomplete-\(getpid())-1/\(SegmentName.segment(3))"))
        }
        fileSystem.removeAllRules()
        fileSystem.inject(.init(.fsync, .nth(1), .fail(.ioError)))
        XCTAssertThrowsError(try store.backup(to: target))
        fileSystem.removeAllRules()
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir.path), ["store"])
        XCTAssertEqual(try StoreFiles.snapshot(source), before)
        try store.put("after", Array("a".utf8))
        let report = try store.backup(to: target, verify: true)
        XCTAssertEqual(report.verificationProblems, [])
        XCTAssertEqual(report.keys, 301)
        try store.close()
    }

    // MARK: The store after a backup

    /// `recover` cuts the damaged tail of a segment a backup also names by writing a cut copy, so
    /// that the backup's file is left as it was (a truncation in place would cut both).
    func testRepairLeavesALinkedBackupAsItWas() throws {
        let dir = TemporaryDirectory("cask-backup")
        defer { dir.remove() }
        let source = dir.appending("store"), target = dir.appending("backup")
        let store = try CaskStore.open(at: source, options: .smallSegmentsWithoutHints())
        for n in 0..<300 { try store.put("key/\(n)", Self.value(n, 80)) }
        try store.backup(to: target)
        try store.close()
        let sealed = StoreFiles.segmentPath(source, try StoreFiles.segmentIDs(in: source).first!)
        let length = try StoreFiles.fileSize(sealed)
        try StoreFiles.append(sealed, [UInt8](repeating: 0xAB, count: 37))
        let backupBytes = try StoreFiles.read(StoreFiles.segmentPath(target, 1))

        let report = try CaskStore.repair(at: source, backupDirectory: dir.appending("repair-backup"))
        XCTAssertFalse(report.changes.isEmpty, "\(report)")
        XCTAssertEqual(try StoreFiles.fileSize(sealed), length)
        XCTAssertEqual(try StoreFiles.read(StoreFiles.segmentPath(target, 1)), backupBytes, "the repair changed the backup's file")
        let reopened = try CaskStore.open(at: source, options: .smallSegmentsWithoutHints())
        XCTAssertTrue(reopened.recoveryReport.isClean, "\(reopened.recoveryReport)")
        XCTAssertEqual(reopened.count, 300)
        try reopened.close()
    }
}
