import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// What an attacker who can write an encrypted store's directory can do to it, and what Cask makes
/// of it: every flipped byte of every file is found (`verify` reports it, or the open refuses the
/// store), and no read ever returns bytes that were not written; records moved within a segment,
/// segments swapped, renamed or taken from another store sealed under the same key, and plain
/// segments planted in an encrypted store are all refused.
final class EncryptionDamageTests: XCTestCase {
    private let key = EncryptionTests.key

    /// A small encrypted store: a compaction's output with its hint, a dictionary its records use, an
    /// empty active segment; every key written once (so that a read either finds its one value, or none).
    private func makeStore(_ algorithm: EncryptionAlgorithm) throws -> (directory: TemporaryDirectory, model: [String: [UInt8]]) {
        let directory = TemporaryDirectory("cask-encrypted")
        var options = EncryptionTests.options(algorithm, maxSegmentSize: 4096)
        options.dictionaries = DictionaryOptions(enabled: true, trainingSampleBytes: 16 << 10)
        var model: [String: [UInt8]] = [:]
        let store = try CaskStore.open(at: directory.path, options: options)
        var n = 0
        // Enough alike values to train a dictionary, then a few records compressed against it.
        let deadline = Date().addingTimeInterval(30)
        while store.dictionaryForNewSegments == nil && Date() < deadline {
            try store.put("train/\(n)", DictionaryTests.profile(n))
            n += 1
        }
        XCTAssertNotNil(store.dictionaryForNewSegments, "no dictionary trained")
        let reopened = store
        // Drop the training values; what stays: a few profiles (dictionary-compressed), raw values,
        // a delete, a batch and an expiring key.
        for key in try reopened.keys(prefix: "train/") { try reopened.delete(key) }
        for m in 0..<6 {
            let value = DictionaryTests.profile(10_000 + m)
            try reopened.put("user/\(m)", value)
            model["user/\(m)"] = value
        }
        try reopened.put("raw", [1, 2, 3])
        model["raw"] = [1, 2, 3]
        var batch = WriteBatch()
        batch.put("batch/a", Array("a".utf8))
        batch.put("batch/b", Array("b".utf8))
        try reopened.write(batch)
        model["batch/a"] = Array("a".utf8)
        model["batch/b"] = Array("b".utf8)
        try reopened.put("later", Array("expires in an hour".utf8), expiresAfter: .seconds(3600))
        model["later"] = Array("expires in an hour".utf8)
        // The training values' records and their tombstones go: the store is small enough to flip
        // byte by byte (the dictionary file aside).
        _ = try reopened.compact()
        try reopened.close()
        return (directory, model)
    }

    /// Reads every key of `model` from the store in `path` (read-only); fails when a read returns
    /// bytes other than the model's. Returns whether every key read back whole.
    private func readsOnlyWhatWasWritten(_ path: String, _ model: [String: [UInt8]], _ what: String) -> Bool {
        var options = EncryptionTests.options()
        options.readOnly = true
        guard let store = try? CaskStore.open(at: path, options: options) else { return false }
        defer { try? store.close() }
        var whole = true
        for (key, value) in model {
            switch Result(catching: { try store.get(key) }) {
            case .success(let read?): if read != value { XCTFail("\(what): \(key) read as other bytes") }
            case .success(nil), .failure: whole = false
            }
        }
        if let keys = try? store.keys(prefix: "") {
            for key in keys where model[key] == nil { XCTFail("\(what): \(key) appeared") }
        }
        return whole
    }

    /// Whether `verify` (with the key) finds something wrong with the store, or refuses it.
    private func verifyFindsDamage(_ path: String) -> Bool {
        guard let report = try? CaskStore.verify(at: path, encryption: .key(key)) else { return true }
        return !report.isClean
    }

    func testEveryFlippedByteIsFoundAndNoReadReturnsOtherBytes() throws {
        for algorithm in EncryptionAlgorithm.allCases where algorithm.isAvailable {
            let (directory, model) = try makeStore(algorithm)
            defer { directory.remove() }
            XCTAssertTrue(readsOnlyWhatWasWritten(directory.path, model, "undamaged"))
            XCTAssertFalse(verifyFindsDamage(directory.path), "undamaged")
            let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0 != "LOCK" }.sorted()
            XCTAssertTrue(names.contains(EncryptionFile.fileName))
            XCTAssertTrue(names.contains { $0.hasSuffix(".dict") }, "\(names)")
            XCTAssertTrue(names.contains { $0.hasSuffix(".hint") }, "\(names)")
            let scratch = TemporaryDirectory("cask-flipped")
            defer { scratch.remove() }
            var flips = 0
            for name in names {
                let original = try StoreFiles.read(directory.appending(name))
                // Every byte of every file; a dictionary's content (up to 64 KiB) every 61st byte.
                let stride = name.hasSuffix(".dict") ? 61 : (algorithm == .xchacha20poly1305 ? 3 : 1)
                for offset in Swift.stride(from: 0, to: original.count, by: stride) {
                    for other in names where other != name {
                        try? FileManager.default.removeItem(atPath: scratch.appending(other))
                        try FileManager.default.copyItem(atPath: directory.appending(other), toPath: scratch.appending(other))
                    }
                    var damaged = original
                    damaged[offset] ^= 1 << UInt8(offset % 8)
                    try StoreFiles.write(scratch.appending(name), damaged)
                    let what = "\(algorithm): \(name) byte \(offset)"
                    XCTAssertTrue(verifyFindsDamage(scratch.path), "\(what): not found")
                    _ = readsOnlyWhatWasWritten(scratch.path, model, what)
                    flips += 1
                }
            }
            XCTAssertGreaterThan(flips, 400, "\(names)")
        }
    }

    /// Writes `count` keys `prefix/n` into a new encrypted store in `directory`, in segments of
    /// `segmentSize` bytes, and closes it (hints written).
    private func fill(_ directory: TemporaryDirectory, prefix: String, count: Int, key: EncryptionKey? = nil) throws -> [String: [UInt8]] {
        var model: [String: [UInt8]] = [:]
        let store = try CaskStore.open(at: directory.path, options: EncryptionTests.options(key: key ?? self.key, maxSegmentSize: 4096))
        for n in 0..<count {
            let value = Array("\(prefix) value \(n)".utf8)
            try store.put("\(prefix)/\(n)", value)
            model["\(prefix)/\(n)"] = value
        }
        try store.close()
        return model
    }

    private func segments(_ directory: TemporaryDirectory) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".cask") }.sorted()
    }

    func testSegmentsFromAnotherStoreSwappedOrNotEncryptedAreRefusedWhole() throws {
        let store = TemporaryDirectory("cask-encrypted"), other = TemporaryDirectory("cask-encrypted")
        defer { store.remove(); other.remove() }
        let model = try fill(store, prefix: "mine", count: 300)
        _ = try fill(other, prefix: "theirs", count: 300)  // the same key, another store
        let mine = try segments(store), theirs = try segments(other)
        XCTAssertGreaterThan(mine.count, 3)

        func assertRefused(_ file: String, _ what: String, hasTheirKeys: Bool = false) throws {
            let report = try CaskStore.verify(at: store.path, encryption: .key(key))
            let whole = report.damagedRanges.filter { $0.file == store.appending(file) && $0.kind == .segmentHeader && $0.offset == 0 }
            XCTAssertEqual(whole.count, 1, "\(what): \(report)")
            if let range = whole.first {
                XCTAssertEqual(range.length, try Int64(StoreFiles.read(store.appending(file)).count), what)
            }
            var options = EncryptionTests.options()
            options.readOnly = true
            let opened = try CaskStore.open(at: store.path, options: options)
            defer { try? opened.close() }
            XCTAssertTrue(opened.recoveryReport.damagedRanges.contains { $0.file == store.appending(file) }, what)
            XCTAssertTrue(try opened.keys(prefix: "theirs/").isEmpty, "\(what): another store's records were read")
            for (key, value) in model { if let read = try? opened.get(key) { XCTAssertEqual(read, value, what) } }
        }

        // Another store's segment, under a free id of this one: its header names another store id.
        let planted = SegmentName.segment(9_000)
        try FileManager.default.copyItem(atPath: other.appending(theirs[0]), toPath: store.appending(planted))
        try assertRefused(planted, "another store's segment")
        // Its header rewritten to name this store and this segment id, its checksum made right: the tag fails.
        var forged = try StoreFiles.read(store.appending(planted))
        let ours = try StoreFiles.read(store.appending(mine[0]))
        forged.replaceSubrange(40..<56, with: ours[40..<56])
        forged.withUnsafeMutableBytes { $0.storeBytes(of: UInt64(9_000).littleEndian, toByteOffset: 16, as: UInt64.self) }
        StoreFiles.rechecksumSegmentHeader(&forged, encrypted: true)
        try StoreFiles.write(store.appending(planted), forged)
        try assertRefused(planted, "a forged header")
        try FileManager.default.removeItem(atPath: store.appending(planted))

        // A segment that is not encrypted, planted in the encrypted store.
        let plain = TemporaryDirectory("cask-plain")
        defer { plain.remove() }
        let plainStore = try CaskStore.open(at: plain.path, options: .manualCompaction())
        var noise = SeededGenerator(seed: 9)
        try plainStore.put("theirs/plain", noise.bytes(200))  // longer than a header: not a torn creation
        try plainStore.close()
        try FileManager.default.copyItem(atPath: plain.appending(SegmentName.segment(1)), toPath: store.appending(planted))
        try assertRefused(planted, "a plain segment")
        try FileManager.default.removeItem(atPath: store.appending(planted))

        // Two of its own sealed segments swapped: each header names the other's id.
        let (a, b) = (store.appending(mine[0]), store.appending(mine[1]))
        let (bytesA, bytesB) = (try StoreFiles.read(a), try StoreFiles.read(b))
        try StoreFiles.write(a, bytesB)
        try StoreFiles.write(b, bytesA)
        try assertRefused(mine[0], "swapped segments")
        try assertRefused(mine[1], "swapped segments")
        try StoreFiles.write(a, bytesA)
        try StoreFiles.write(b, bytesB)

        // Another store's hint, under this segment's name: it names another segment's salt.
        let hintName = SegmentName.hint(UInt64(mine[0].prefix(10))!)
        let otherHint = SegmentName.hint(UInt64(theirs[0].prefix(10))!)
        try? FileManager.default.removeItem(atPath: store.appending(hintName))
        try FileManager.default.copyItem(atPath: other.appending(otherHint), toPath: store.appending(hintName))
        let report = try CaskStore.verify(at: store.path, encryption: .key(key))
        XCTAssertEqual(report.invalidHints.map(\.file), [store.appending(hintName)], "\(report)")
        XCTAssertTrue(report.damagedRanges.isEmpty, "\(report)")
        let reopened = try CaskStore.open(at: store.path, options: EncryptionTests.options())
        XCTAssertEqual(reopened.recoveryReport.invalidHints.map(\.file), [store.appending(hintName)])
        for (key, value) in model { XCTAssertEqual(try reopened.get(key), value) }
        try reopened.close()
    }

    func testRecordsMovedInsideASegmentFailTheirTags() throws {
        let store = TemporaryDirectory("cask-encrypted")
        defer { store.remove() }
        let model = try fill(store, prefix: "k", count: 40)
        let first = try segments(store)[0]
        let path = store.appending(first)
        var bytes = try StoreFiles.read(path)
        // The first two records have the same length (keys and values of one width): swap them.
        var records: [(offset: Int, length: Int)] = []
        var offset = SegmentHeader.encryptedLength
        while offset < bytes.count, records.count < 12 {
            guard case .success(let header) = bytes[offset...].withUnsafeBytes({ RecordHeader.validate($0, keyPrefixLength: 0) }) else { break }
            records.append((offset, header.recordLength))
            offset += header.recordLength
        }
        guard let pair = zip(records, records.dropFirst()).first(where: { $0.0.length == $0.1.length }) else {
            return XCTFail("no two records of one length: \(records)")
        }
        let (x, y) = pair
        let recordX = Array(bytes[x.offset..<(x.offset + x.length)]), recordY = Array(bytes[y.offset..<(y.offset + y.length)])
        bytes.replaceSubrange(x.offset..<(x.offset + x.length), with: recordY)
        bytes.replaceSubrange(y.offset..<(y.offset + y.length), with: recordX)
        try StoreFiles.write(path, bytes)
        // Each record's checksum holds where it now is: only its tag (its place is its nonce) tells.
        let report = try CaskStore.verify(at: store.path, encryption: .key(key))
        let damaged = report.damagedRanges.filter { $0.file == path }
        // Adjacent: one range, both records.
        XCTAssertEqual(damaged.map(\.offset), [Int64(x.offset)], "\(report)")
        XCTAssertEqual(damaged.map(\.end), [Int64(y.offset + y.length)], "\(report)")
        XCTAssertTrue(damaged.allSatisfy { $0.reason.contains("authentication failed") }, "\(damaged)")
        // Through the hint the index trusts, the reads of both keys fail rather than swap values.
        let opened = try CaskStore.open(at: store.path, options: EncryptionTests.options())
        var failed = 0
        for (key, value) in model {
            do {
                let read = try opened.get(key)
                XCTAssertEqual(read, value, key)
            } catch {
                guard case .corruptRecord(_, _, let reason) = error else { return XCTFail("\(error)") }
                XCTAssertTrue(reason.contains("authentication failed"), reason)
                failed += 1
            }
        }
        XCTAssertEqual(failed, 2)
        try opened.close()
    }

    func testRepairRewritesDamagedSegmentsAndAMissingOrDamagedEncryptionFile() throws {
        let store = TemporaryDirectory("cask-encrypted")
        defer { store.remove() }
        let model = try fill(store, prefix: "k", count: 300)
        let first = try segments(store)[0]
        let firstPath = store.appending(first)
        let original = try StoreFiles.read(firstPath)

        // A damaged record: its segment is written again under a new salt, every other record sealed again.
        var damaged = original
        damaged[SegmentHeader.encryptedLength + 40] ^= 0x04
        try StoreFiles.write(firstPath, damaged)
        let repair = try CaskStore.repair(at: store.path, backupDirectory: store.path + "-backup-1", encryption: .key(key))
        defer { try? FileManager.default.removeItem(atPath: store.path + "-backup-1") }
        XCTAssertEqual(repair.changes.map(\.kind), [.rewriteSegment, .rebuildHint], "\(repair)")
        let rewritten = try StoreFiles.read(firstPath)
        XCTAssertNotEqual(Array(rewritten[56..<72]), Array(original[56..<72]), "a rewritten segment gets a new salt")
        XCTAssertTrue(try CaskStore.verify(at: store.path, encryption: .key(key)).isClean)
        let reopened = try CaskStore.open(at: store.path, options: EncryptionTests.options())
        let lost = model.filter { (try? reopened.get($0.key)) == nil }
        XCTAssertEqual(lost.count, 1, "one record was damaged")
        for (key, value) in model where lost[key] == nil { XCTAssertEqual(try reopened.get(key), value) }
        try reopened.close()

        // The ENCRYPTION file missing, then damaged: written again from an authentic segment header.
        let identityPath = store.appending(EncryptionFile.fileName)
        let identity = try StoreFiles.read(identityPath)
        for damage in ["missing", "damaged"] {
            if damage == "missing" { try FileManager.default.removeItem(atPath: identityPath) } else {
                var bytes = identity
                bytes[20] ^= 0x01
                try StoreFiles.write(identityPath, bytes)
            }
            XCTAssertThrowsError(try CaskStore.open(at: store.path, options: EncryptionTests.options()))
            XCTAssertThrowsError(try CaskStore.repair(at: store.path, backupDirectory: store.path + "-backup-wrong", encryption: .key(EncryptionTests.otherKey))) { error in
                guard case .corruptFile(let path, let reason)? = error as? CaskError else { return XCTFail("\(error)") }
                XCTAssertEqual(path, identityPath)
                XCTAssertTrue(reason.hasSuffix("no segment header authenticates under the key given, so it cannot be written again"), reason)
            }
            let backup = store.path + "-backup-\(damage)"
            defer { try? FileManager.default.removeItem(atPath: backup) }
            let report = try CaskStore.repair(at: store.path, backupDirectory: backup, encryption: .key(key))
            XCTAssertEqual(report.changes.first?.kind, .rewriteEncryptionFile, "\(report)")
            XCTAssertEqual(FileManager.default.fileExists(atPath: backup + "/" + EncryptionFile.fileName), damage == "damaged")
            let opened = try CaskStore.open(at: store.path, options: EncryptionTests.options())
            for (key, value) in model where lost[key] == nil { XCTAssertEqual(try opened.get(key), value) }
            try opened.close()
            XCTAssertTrue(try CaskStore.verify(at: store.path, encryption: .key(key)).isClean, damage)
        }
    }

    /// A copy of a segment under the newest id: its header authenticates but names another segment,
    /// so every reader takes the whole file for damage — and then no segment is active (FORMAT.md).
    /// The choice took its base seq all the same, and the sealed segment before it became the active
    /// one, its last bytes cut as a torn tail. Now they stay (damage, as the second reader says),
    /// and the writes go to a new segment.
    func testASwappedNewestSegmentLeavesNoSegmentActive() throws {
        let store = TemporaryDirectory("cask-encrypted")
        defer { store.remove() }
        _ = try fill(store, prefix: "k", count: 300)
        let names = try segments(store)
        let last = store.appending(names.last!)
        try StoreFiles.write(last, try StoreFiles.read(last) + [0x42, 0x17, 0x99])
        let newest = StoreFiles.segmentPath(store.path, UInt64(names.count) + 1)
        try FileManager.default.copyItem(atPath: store.appending(names[0]), toPath: newest)
        let before = try StoreFiles.snapshot(store.path)
        _ = try SecondReaderTests.compareEncrypted(store.path, label: "a segment copied under the newest id", key: Array(0..<32).map { UInt8($0) })
        let opened = try CaskStore.open(at: store.path, options: EncryptionTests.options())
        XCTAssertEqual(opened.recoveryReport.truncations, [], "\(opened.recoveryReport)")
        try opened.put("after", [1])
        try opened.close()
        XCTAssertEqual(try StoreFiles.read(last), before[names.last!], "the segment before it was cut or appended to")
        XCTAssertEqual(try StoreFiles.read(newest), before[URL(fileURLWithPath: newest).lastPathComponent])
    }

    /// The active segment is chosen among headers that authenticate: a sealed segment whose header
    /// was given a higher base seq (its checksum made right, its tag then failing) does not become
    /// the active one, so the real active segment's torn tail is still cut, not kept as damage.
    func testAForgedBaseSeqDoesNotChooseTheActiveSegment() throws {
        let store = TemporaryDirectory("cask-encrypted")
        defer { store.remove() }
        let model = try fill(store, prefix: "k", count: 300)
        let names = try segments(store)
        let (sealed, active) = (store.appending(names[0]), store.appending(names.last!))
        var forged = try StoreFiles.read(sealed)
        forged.withUnsafeMutableBytes { $0.storeBytes(of: UInt64(1 << 40).littleEndian, toByteOffset: 24, as: UInt64.self) }
        StoreFiles.rechecksumSegmentHeader(&forged, encrypted: true)
        try StoreFiles.write(sealed, forged)
        try StoreFiles.write(active, try StoreFiles.read(active) + [0x42, 0x17, 0x99])  // a torn write
        let opened = try CaskStore.open(at: store.path, options: EncryptionTests.options())
        XCTAssertEqual(opened.recoveryReport.truncations.map(\.file), [active], "\(opened.recoveryReport)")
        XCTAssertEqual(opened.recoveryReport.damagedRanges.map(\.file), [sealed], "\(opened.recoveryReport)")
        XCTAssertEqual(opened.recoveryReport.damagedRanges.first?.kind, .segmentHeader)
        for (key, value) in model { if let read = try? opened.get(key) { XCTAssertEqual(read, value) } }
        try opened.close()
    }
}
