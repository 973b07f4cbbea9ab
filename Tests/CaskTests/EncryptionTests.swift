import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// Encryption at rest (FORMAT.md, "Encryption"): round trips through every path a record takes —
/// puts and batches, gets with and without the lock, listings, hints, compaction, dictionaries,
/// repair and backup — and what an encrypted store refuses: a wrong key, no key, a plain segment,
/// another store's segment, a swapped or altered one.
final class EncryptionTests: XCTestCase {
    static let key = try! EncryptionKey(Array(0..<32).map { UInt8($0) })
    static let otherKey = try! EncryptionKey(Array(0..<32).map { UInt8(255 - $0) })

    static func options(
        _ algorithm: EncryptionAlgorithm = .preferred, key: EncryptionKey = key, maxSegmentSize: Int64? = nil
    ) -> CaskStore.Options {
        var options = CaskStore.Options.manualCompaction(maxSegmentSize: maxSegmentSize)
        options.encryption = .key(key, algorithm: algorithm)
        return options
    }

    private func algorithms() -> [EncryptionAlgorithm] { EncryptionAlgorithm.allCases.filter(\.isAvailable) }

    private func assertReads(_ store: CaskStore, _ model: [String: [UInt8]], file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(store.count, model.count, file: file, line: line)
        for (key, value) in model { XCTAssertEqual(try store.get(key), value, key, file: file, line: line) }
        XCTAssertEqual(try store.keys(prefix: ""), model.keys.sorted(), file: file, line: line)
    }

    func testRoundTripsThroughReopensCompactionAndVerify() throws {
        for algorithm in algorithms() {
            let directory = TemporaryDirectory()
            defer { directory.remove() }
            var model: [String: [UInt8]] = [:]
            var store = try CaskStore.open(at: directory.path, options: Self.options(algorithm, maxSegmentSize: 16 << 10))
            for n in 0..<2000 {
                let value = Array("value \(n) ".utf8) + [UInt8](repeating: UInt8(n % 7), count: n % 300)
                try store.put("key/\(n % 700)", value)
                model["key/\(n % 700)"] = value
                if n % 97 == 0 {
                    XCTAssertTrue(try store.delete("key/\(n % 700)"))
                    model["key/\(n % 700)"] = nil
                }
            }
            var batch = WriteBatch()
            batch.put("batch/a", Array("A".utf8))
            batch.delete("key/1")
            try store.write(batch)
            model["batch/a"] = Array("A".utf8)
            model["key/1"] = nil
            try assertReads(store, model)
            try store.close()

            store = try CaskStore.open(at: directory.path, options: Self.options(algorithm))
            XCTAssertTrue(store.recoveryReport.isClean, "\(store.recoveryReport)")
            try assertReads(store, model)
            try store.put("after/reopen", Array("x".utf8))
            model["after/reopen"] = Array("x".utf8)
            _ = try store.compact()
            try assertReads(store, model)
            try store.close()

            store = try CaskStore.open(at: directory.path, options: Self.options(algorithm))
            try assertReads(store, model)
            try store.close()
            let report = try CaskStore.verify(at: directory.path, encryption: .key(Self.key))
            XCTAssertTrue(report.isClean, "\(report)")
        }
    }
}

extension EncryptionTests {
    func testKeysThatDoNotOpenTheStore() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let store = try CaskStore.open(at: directory.path, options: Self.options())
        try store.put("k", Array("secret".utf8))
        try store.close()

        XCTAssertThrowsError(try CaskStore.open(at: directory.path, options: Self.options(key: Self.otherKey))) { error in
            XCTAssertEqual(error as? CaskError, .wrongKey(path: directory.path))
            XCTAssertEqual("\(error)", "the key given is not the key store \(directory.path) was encrypted with (the key check in its ENCRYPTION file fails); nothing was read or written")
        }
        for readOnly in [false, true] {
            var plain = CaskStore.Options.manualCompaction()
            plain.readOnly = readOnly
            XCTAssertThrowsError(try CaskStore.open(at: directory.path, options: plain)) { error in
                XCTAssertEqual(error as? CaskError, .encryptionKeyRequired(path: directory.path))
            }
        }
        var short = CaskStore.Options.manualCompaction()
        short.encryption = .key([UInt8](repeating: 1, count: 16))
        XCTAssertThrowsError(try CaskStore.open(at: directory.path, options: short)) { error in
            XCTAssertEqual(error as? CaskError, .invalidEncryptionKey(reason: "a key is 32 bytes, this one is 16"))
        }
        XCTAssertThrowsError(try CaskStore.verify(at: directory.path)) { error in
            XCTAssertEqual(error as? CaskError, .encryptionKeyRequired(path: directory.path))
        }
        XCTAssertThrowsError(try CaskStore.verify(at: directory.path, encryption: .key(Self.otherKey))) { error in
            XCTAssertEqual(error as? CaskError, .wrongKey(path: directory.path))
        }
        // The segments alone, without the ENCRYPTION file, are not a store that opens plain.
        let identity = try StoreFiles.read(directory.appending(EncryptionFile.fileName))
        try FileManager.default.removeItem(atPath: directory.appending(EncryptionFile.fileName))
        XCTAssertThrowsError(try CaskStore.open(at: directory.path, options: .manualCompaction())) { error in
            XCTAssertEqual(error as? CaskError, .encryptionKeyRequired(path: directory.appending("0000000001.cask")))
        }
        XCTAssertThrowsError(try CaskStore.open(at: directory.path, options: Self.options())) { error in
            guard case .corruptFile(let path, _)? = error as? CaskError else { return XCTFail("\(error)") }
            XCTAssertEqual(path, directory.appending(EncryptionFile.fileName))
        }
        try StoreFiles.write(directory.appending(EncryptionFile.fileName), identity)
        let reopened = try CaskStore.open(at: directory.path, options: Self.options())
        XCTAssertEqual(try reopened.get("k"), Array("secret".utf8))
        try reopened.close()

        // A store created without a key does not open with one.
        let plainDirectory = TemporaryDirectory()
        defer { plainDirectory.remove() }
        let plainStore = try CaskStore.open(at: plainDirectory.path, options: .manualCompaction())
        try plainStore.put("k", [1])
        try plainStore.close()
        XCTAssertThrowsError(try CaskStore.open(at: plainDirectory.path, options: Self.options())) { error in
            XCTAssertEqual(error as? CaskError, .notEncrypted(path: plainDirectory.path))
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: plainDirectory.appending(EncryptionFile.fileName)))
    }

    func testRekeyEncryptsRotatesAndDecrypts() throws {
        let parent = TemporaryDirectory()
        defer { parent.remove() }
        let path = parent.appending("store")
        var model: [String: [UInt8]] = [:]
        let store = try CaskStore.open(at: path, options: .manualCompaction())
        for n in 0..<3000 {
            let value = Array("value \(n)".utf8)
            try store.put("key/\(n % 1000)", value)
            model["key/\(n % 1000)"] = value
        }
        try store.put("expiring", [7], expiresAfter: .seconds(3600))
        model["expiring"] = [7]
        try store.close()

        let steps: [(from: Encryption, to: Encryption)] = [
            (.none, .key(Self.key)), (.key(Self.key), .key(Self.otherKey, algorithm: .xchacha20poly1305)), (.key(Self.otherKey), .none),
        ]
        for (from, to) in steps {
            let report = try CaskStore.rekey(at: path, from: from, to: to)
            XCTAssertEqual(report.keys, model.count)
            XCTAssertNil(report.leftBehind)
            XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: parent.path), ["store"])
            XCTAssertFalse(FileManager.default.fileExists(atPath: path + "/" + SegmentName.rekeyMarker), "the marker goes last")
            var options = CaskStore.Options.manualCompaction()
            options.encryption = to
            let reopened = try CaskStore.open(at: path, options: options)
            try assertReads(reopened, model)
            XCTAssertNotNil(try reopened.statistics())
            try reopened.close()
            XCTAssertEqual(FileManager.default.fileExists(atPath: path + "/" + EncryptionFile.fileName), to.key != nil)
            if to.key != nil {
                XCTAssertThrowsError(try CaskStore.open(at: path, options: .manualCompaction()))
            }
        }
        // A wrong key changes nothing.
        XCTAssertThrowsError(try CaskStore.rekey(at: path, from: .key(Self.key), to: .key(Self.otherKey))) { error in
            XCTAssertEqual(error as? CaskError, .notEncrypted(path: path))
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: parent.path), ["store"])

        // Each entry is a record of its own, not a member of a batch: a byte damaged later loses
        // one entry, not every entry of its batch (found by trying the tool: one flipped byte after
        // a rekey, and `recover` would have dropped the whole store, one batch).
        let segments = try StoreFiles.segmentIDs(in: path)
        let records = try segments.flatMap { try StoreFiles.records(ofSegment: StoreFiles.segmentPath(path, $0)) }
        XCTAssertEqual(records.count, model.count)
        XCTAssertFalse(records.contains { $0.isBatchMember || $0.type == .batch })
        let segment = StoreFiles.segmentPath(path, try XCTUnwrap(segments.first))
        let victim = try XCTUnwrap(try StoreFiles.records(ofSegment: segment).dropFirst(10).first)
        try StoreFiles.flip(segment, at: victim.offset + victim.length - 1)
        let verification = try CaskStore.verify(at: path)
        XCTAssertEqual(verification.damagedRanges.map(\.offset), [Int64(victim.offset)], "\(verification)")
        var options = CaskStore.Options.manualCompaction()
        options.readOnly = true
        let damaged = try CaskStore.open(at: path, options: options)
        for (key, value) in model where Array(key.utf8) != victim.key {
            XCTAssertEqual(try damaged.get(key), value, key)
        }
        try damaged.close()
    }
}

extension EncryptionTests {
    /// A rekey killed after its swap leaves the old store beside the new one and a `REKEYED` file
    /// naming it; the store's next writable open deletes that directory, then the marker. A
    /// read-only open touches nothing, and a marker naming anything but a real directory beside the
    /// store, named as a rekey names it, deletes nothing.
    func testAnOpenFinishesARekeyStoppedAfterItsSwap() throws {
        let parent = TemporaryDirectory()
        defer { parent.remove() }
        let path = parent.appending("store")
        var options = Self.options(key: Self.key)
        let store = try CaskStore.open(at: path, options: options)
        try store.put("k", [1])
        try store.close()
        let marker = path + "/" + SegmentName.rekeyMarker
        func plantOldStore(_ name: String) throws -> String {
            let old = parent.appending(name)
            let copy = try CaskStore.open(at: old, options: .manualCompaction())
            try copy.put("old", [2])
            try copy.close()
            try Data((name + "\n").utf8).write(to: URL(fileURLWithPath: marker))
            return old
        }

        var old = try plantOldStore("store.cask-rekey-4242-1")
        options.readOnly = true
        try CaskStore.open(at: path, options: options).close()
        XCTAssertTrue(FileManager.default.fileExists(atPath: old), "a read-only open deletes nothing")
        options.readOnly = false
        var reopened = try CaskStore.open(at: path, options: options)
        XCTAssertEqual(try reopened.get("k"), [1])
        try reopened.close()
        XCTAssertFalse(FileManager.default.fileExists(atPath: old))
        XCTAssertFalse(FileManager.default.fileExists(atPath: marker))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: parent.path), ["store"])

        // A marker naming a directory that is already gone only goes itself.
        try Data("store.cask-rekey-4242-2\n".utf8).write(to: URL(fileURLWithPath: marker))
        try CaskStore.open(at: path, options: options).close()
        XCTAssertFalse(FileManager.default.fileExists(atPath: marker))

        // Markers that name anything else, or a link, delete nothing.
        old = try plantOldStore("other")
        let link = parent.appending("store.cask-rekey-4242-3")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: old)
        for text in ["other\n", "../other\n", "store.cask-rekey-4242-x\n", "store.cask-rekey-4242-1", "store.cask-rekey-4242-3\n"] {
            try Data(text.utf8).write(to: URL(fileURLWithPath: marker))
            reopened = try CaskStore.open(at: path, options: options)
            try reopened.close()
            XCTAssertTrue(FileManager.default.fileExists(atPath: old + "/0000000001.cask"), text)
            XCTAssertTrue(FileManager.default.fileExists(atPath: marker), text)
        }
    }

    /// An app's encrypted store, opened at every launch: each open that writes starts a segment of
    /// its own (no place is sealed twice), and the small-store compaction merges them once there are
    /// more than ``CompactionWatch/segmentsToMerge``, so the files stay few, however many launches.
    func testAStoreOpenedAtEveryLaunchKeepsFewSegments() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        var options = Self.options()
        options.automaticCompaction = true
        options.idleCompactionDelay = 0.02
        var model: [String: [UInt8]] = [:]
        var most = 0
        for launch in 0..<40 {
            let store = try CaskStore.open(at: directory.path, options: options)
            let value = Array("draft of launch \(launch)".utf8)
            try store.put("drafts/\(launch)", value)
            model["drafts/\(launch)"] = value
            Thread.sleep(forTimeInterval: 0.06)  // idle: the small-store check runs
            try store.close()
            let segments = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".cask") }.count
            most = max(most, segments)
        }
        XCTAssertLessThanOrEqual(most, 18, "segments piled up")  // 16 merged at the next idle check, and the newest
        let store = try CaskStore.open(at: directory.path, options: options)
        try assertReads(store, model)
        try store.close()
    }
}

extension EncryptionTests {
    /// A read-only handle follows an encrypted writer with `refresh()` (across its rotations and a
    /// compaction), and `inspect` (`cask dump`) shows the records decrypted.
    func testRefreshAndInspectWithTheKey() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let writer = try CaskStore.open(at: directory.path, options: Self.options(maxSegmentSize: 4096))
        try writer.put("first", [1])
        var readOnly = Self.options()
        readOnly.readOnly = true
        let reader = try CaskStore.open(at: directory.path, options: readOnly)
        XCTAssertEqual(try reader.get("first"), [1])
        var model: [String: [UInt8]] = ["first": [1]]
        for n in 0..<200 {
            let value = Array("value \(n)".utf8)
            try writer.put("k/\(n % 50)", value)
            model["k/\(n % 50)"] = value
        }
        _ = try reader.refresh()
        try assertReads(reader, model)
        _ = try writer.compact()
        try writer.put("after", [2])
        model["after"] = [2]
        _ = try reader.refresh()
        try assertReads(reader, model)
        try reader.close()
        try writer.close()

        var keys: [String] = []
        try CaskStore.inspect(at: directory.path, encryption: .key(Self.key)) { item in
            if case .record(let record) = item, record.type == .put { keys.append(String(decoding: record.key, as: UTF8.self)) }
        }
        XCTAssertEqual(Set(keys), Set(model.keys))
        XCTAssertThrowsError(try CaskStore.inspect(at: directory.path) { _ in }) { error in
            XCTAssertEqual(error as? CaskError, .encryptionKeyRequired(path: directory.path))
        }
    }
}

extension EncryptionTests {
    /// A store with damage is not rekeyed: the copy would hold an older value of a damaged key.
    func testRekeyRefusesADamagedStore() throws {
        let parent = TemporaryDirectory()
        defer { parent.remove() }
        let path = parent.appending("store")
        let store = try CaskStore.open(at: path, options: .manualCompaction(maxSegmentSize: 4096))
        for n in 0..<200 { try store.put("k/\(n)", Array("value \(n)".utf8)) }
        try store.close()
        let segment = path + "/" + SegmentName.segment(1)
        var bytes = try StoreFiles.read(segment)
        bytes[SegmentHeader.length + 10] ^= 0x40
        try StoreFiles.write(segment, bytes)
        // With its hint the open does not read the record: the copy meets it, and stops.
        var before = try StoreFiles.snapshot(path)
        XCTAssertThrowsError(try CaskStore.rekey(at: path, from: .none, to: .key(Self.key))) { error in
            guard case .corruptRecord(let file, _, _)? = error as? CaskError else { return XCTFail("\(error)") }
            XCTAssertEqual(file, segment)
        }
        XCTAssertEqual(try StoreFiles.snapshot(path).filter { $0.key != "LOCK" }, before.filter { $0.key != "LOCK" })
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: parent.path), ["store"])
        // Without it the open finds the damage, and the rekey refuses before it copies anything.
        try StoreFiles.removeHints(in: path)
        before = try StoreFiles.snapshot(path)
        XCTAssertThrowsError(try CaskStore.rekey(at: path, from: .none, to: .key(Self.key))) { error in
            guard case .corruptFile(let failed, let reason)? = error as? CaskError else { return XCTFail("\(error)") }
            XCTAssertEqual(failed, path)
            XCTAssertTrue(reason.hasSuffix("repair it first ('cask recover'), then rekey it — nothing was changed"), reason)
        }
        XCTAssertEqual(try StoreFiles.snapshot(path).filter { $0.key != "LOCK" }, before.filter { $0.key != "LOCK" })
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: parent.path), ["store"])
    }
}
