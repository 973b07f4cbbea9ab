import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// Key prefixes (format 4, FORMAT.md "Segment files"): a segment names the prefix the keys written
/// lately share, and its records elide it. Real stores in temporary directories: what they read
/// back after reopens with and without hints, compactions that move records between prefixes,
/// damaged headers and hints, and the second reader on the same files.
final class KeyPrefixTests: XCTestCase {
    /// 8 KiB segments: the keys sampled in the first name the second's prefix.
    private func options(keyPrefixes: Bool = true) -> CaskStore.Options {
        var options = CaskStore.Options.manualCompaction(maxSegmentSize: 8 << 10)
        options.keyPrefixes = keyPrefixes
        return options
    }

    private func header(of directory: String, segment id: UInt64) throws -> SegmentHeader {
        let bytes = try StoreFiles.read(StoreFiles.segmentPath(directory, id))
        return try bytes.withUnsafeBytes { try SegmentHeader.decode($0, encryption: nil).get().0 }
    }

    /// Puts drafts of one user after another, deletes some, and returns what must be there.
    private func writeDrafts(_ store: CaskStore, users: Range<Int>, drafts: Int, into model: inout [String: [UInt8]]) throws {
        var random = SeededGenerator(seed: UInt64(users.lowerBound) + 7)
        for user in users {
            for draft in 0..<drafts {
                let key = "drafts/\(String(format: "%06d", user))/\(1_700_000_000 + draft)"
                let value = Array("draft \(draft) of \(user): ".utf8) + random.bytes(Int(random.next() % 40))
                try store.put(key, value)
                model[key] = value
                if draft % 7 == 3 {
                    try store.delete(key)
                    model[key] = nil
                }
            }
        }
    }

    /// A closed store of `users`' drafts (``writeDrafts(_:users:drafts:into:)``), and what must be in it.
    private func draftStore(_ name: String, users: Range<Int>, drafts: Int) throws -> (TemporaryDirectory, [String: [UInt8]]) {
        let dir = TemporaryDirectory(name)
        var model: [String: [UInt8]] = [:]
        let store = try CaskStore.open(at: dir.path, options: options())
        try writeDrafts(store, users: users, drafts: drafts, into: &model)
        try store.close()
        return (dir, model)
    }

    private func check(_ directory: String, _ model: [String: [UInt8]], options: CaskStore.Options, file: StaticString = #filePath, line: UInt = #line) throws {
        let store = try CaskStore.open(at: directory, options: options)
        defer { try? store.close() }
        XCTAssertTrue(store.recoveryReport.isClean, "\(store.recoveryReport)", file: file, line: line)
        XCTAssertEqual(store.count, model.count, file: file, line: line)
        for (key, value) in model { XCTAssertEqual(try store.get(key), value, key, file: file, line: line) }
        let verified = try CaskStore.verify(at: directory)
        XCTAssertTrue(verified.damagedRanges.isEmpty && verified.invalidHints.isEmpty, "\(verified)", file: file, line: line)
    }

    func testSegmentsAfterTheFirstNameThePrefixAndEveryKeyReadsBack() throws {
        let dir = TemporaryDirectory("cask-key-prefix")
        var model: [String: [UInt8]] = [:]
        let store = try CaskStore.open(at: dir.path, options: options())
        try writeDrafts(store, users: 0..<3, drafts: 200, into: &model)
        try store.put("settings/theme", Array("dark".utf8))  // shares nothing with the prefix
        model["settings/theme"] = Array("dark".utf8)
        try store.close()

        let ids = try StoreFiles.segmentIDs(in: dir.path)
        XCTAssertGreaterThan(ids.count, 3)
        XCTAssertEqual(try header(of: dir.path, segment: ids[0]).version, SegmentHeader.versionWithoutDictionary)
        var elided = 0, whole = 0
        for id in ids.dropFirst() {
            let header = try header(of: dir.path, segment: id)
            XCTAssertEqual(header.version, SegmentHeader.versionWithKeyPrefix, "segment \(id)")
            XCTAssertTrue(String(decoding: header.keyPrefix, as: UTF8.self).hasPrefix("drafts/00000"), "\(header.keyPrefix)")
            let bytes = try StoreFiles.read(StoreFiles.segmentPath(dir.path, id))
            for record in try StoreFiles.records(ofSegment: StoreFiles.segmentPath(dir.path, id)) {
                let flags = bytes[record.offset + 5]
                if flags & RecordFlags.keyPrefix != 0 { elided += 1 } else { whole += 1 }
            }
        }
        XCTAssertGreaterThan(elided, 500)
        XCTAssertGreaterThanOrEqual(whole, 1, "settings/theme is stored whole")

        try check(dir.path, model, options: options())
        try StoreFiles.removeHints(in: dir.path)
        try check(dir.path, model, options: options())
        try SecondReaderTests.compareReaders(dir.path, label: "key prefixes")
    }

    func testRecordsAreSmallerByThePrefixTheyElide() throws {
        func bytes(keyPrefixes: Bool) throws -> Int64 {
            let dir = TemporaryDirectory("cask-key-prefix-size")
            var model: [String: [UInt8]] = [:]
            let store = try CaskStore.open(at: dir.path, options: options(keyPrefixes: keyPrefixes))
            try writeDrafts(store, users: 0..<2, drafts: 300, into: &model)
            let total = try store.statistics().segmentBytes
            try store.close()
            return total
        }
        let with = try bytes(keyPrefixes: true), without = try bytes(keyPrefixes: false)
        // 600 records, all but the first segment's (about 130) eliding "drafts/00000" and more: at least 10 bytes each.
        XCTAssertLessThan(with, without - 4_000, "with \(with), without \(without)")
    }

    func testOffWritesNoVersion4SegmentAndEncryptedStoresNeverDo() throws {
        let plain = TemporaryDirectory("cask-key-prefix-off")
        var model: [String: [UInt8]] = [:]
        let store = try CaskStore.open(at: plain.path, options: options(keyPrefixes: false))
        try writeDrafts(store, users: 0..<2, drafts: 200, into: &model)
        try store.close()
        for id in try StoreFiles.segmentIDs(in: plain.path) {
            XCTAssertEqual(try header(of: plain.path, segment: id).keyPrefix, [])
        }

        let sealed = TemporaryDirectory("cask-key-prefix-encrypted")
        var encrypted = options()
        encrypted.encryption = .key(SecondReaderTests.storeKey)
        let encryptedStore = try CaskStore.open(at: sealed.path, options: encrypted)
        try writeDrafts(encryptedStore, users: 0..<2, drafts: 200, into: &model)
        try encryptedStore.compact()
        try encryptedStore.close()
        for id in try StoreFiles.segmentIDs(in: sealed.path) {
            let bytes = try StoreFiles.read(StoreFiles.segmentPath(sealed.path, id))
            XCTAssertEqual(Int(bytes[8]) | Int(bytes[9]) << 8, Int(SegmentHeader.versionEncrypted), "segment \(id)")
        }
    }

    /// Users 0 to 2, then users 500 to 502: the later segments name another prefix. A compaction
    /// copies both into outputs of one prefix; the records of the other are written with new headers.
    func testCompactionWritesRecordsOfAnotherPrefixAnew() throws {
        let dir = TemporaryDirectory("cask-key-prefix-compaction")
        var model: [String: [UInt8]] = [:]
        var store = try CaskStore.open(at: dir.path, options: options())
        try writeDrafts(store, users: 0..<3, drafts: 150, into: &model)
        var random = SeededGenerator(seed: 99)
        for n in 0..<600 {
            let key = "archive/\(String(format: "%08d", n))"
            let value = random.bytes(20 + Int(random.next() % 30))
            try store.put(key, value)
            model[key] = value
            if n % 10 == 0 {  // so that their segments are compacted too
                try store.delete(key)
                model[key] = nil
            }
        }
        try writeDrafts(store, users: 500..<502, drafts: 150, into: &model)
        let prefixes = try Set(StoreFiles.segmentIDs(in: dir.path).map { try header(of: dir.path, segment: $0).keyPrefix })
        XCTAssertGreaterThanOrEqual(prefixes.count, 3, "\(prefixes.map { String(decoding: $0, as: UTF8.self) })")
        try store.compact()
        try store.close()
        try check(dir.path, model, options: options())
        try SecondReaderTests.compareReaders(dir.path, label: "compacted across prefixes")

        // Reopened, written on, compacted again: outputs of one prefix copied byte for byte or anew.
        store = try CaskStore.open(at: dir.path, options: options())
        try writeDrafts(store, users: 3..<4, drafts: 100, into: &model)
        try store.compact()
        try store.close()
        try check(dir.path, model, options: options())
        try StoreFiles.removeHints(in: dir.path)
        try check(dir.path, model, options: options())
    }

    /// A new store's first segment names no prefix: once it holds 4 MiB of keys that share one, it
    /// is sealed, and the next names it.
    func testAFirstSegmentIsSealedEarlyForAPrefix() throws {
        let dir = TemporaryDirectory("cask-key-prefix-early")
        var options = CaskStore.Options.manualCompaction()
        options.writeHints = false
        let store = try CaskStore.open(at: dir.path, options: options)
        var random = SeededGenerator(seed: 5)
        for n in 0..<50_000 { try store.put(String(format: "%016d", n), random.bytes(100)) }
        try store.close()
        let ids = try StoreFiles.segmentIDs(in: dir.path)
        XCTAssertEqual(ids.count, 2)
        let first = try StoreFiles.fileSize(StoreFiles.segmentPath(dir.path, ids[0]))
        XCTAssertGreaterThanOrEqual(first, 4 << 20)
        XCTAssertLessThan(first, (4 << 20) + 4096)
        let prefix = String(decoding: try header(of: dir.path, segment: ids[1]).keyPrefix, as: UTF8.self)
        XCTAssertTrue(prefix.hasPrefix("00000000000"), prefix)
    }

    /// Damage to a version 4 header: the segment's hint holds its key prefix, so the records that
    /// elide it still read, and a repair writes the header again as it was. Without the hint they
    /// are damage, and the rest of the segment reads.
    func testADamagedHeaderIsReadAndRepairedWithTheKeyPrefixItsHintHolds() throws {
        let dir = TemporaryDirectory("cask-key-prefix-damaged-header")
        var model: [String: [UInt8]] = [:]
        let store = try CaskStore.open(at: dir.path, options: options())
        try writeDrafts(store, users: 0..<2, drafts: 100, into: &model)
        try store.put("settings/theme", Array("dark".utf8))
        model["settings/theme"] = Array("dark".utf8)
        try store.close()
        let ids = try StoreFiles.segmentIDs(in: dir.path)
        let victim = ids[1]
        let victimPath = StoreFiles.segmentPath(dir.path, victim)
        XCTAssertEqual(try header(of: dir.path, segment: victim).version, SegmentHeader.versionWithKeyPrefix)
        let records = try StoreFiles.records(ofSegment: victimPath)
        let original = try StoreFiles.read(victimPath)
        let elidedKeys = Set(records.filter { original[$0.offset + 5] & RecordFlags.keyPrefix != 0 }.map { String(decoding: $0.key, as: UTF8.self) })
        XCTAssertFalse(elidedKeys.isEmpty)
        try StoreFiles.flip(victimPath, at: 44)  // a byte of the key prefix

        for hints in [true, false] {
            let copy = try SecondReaderTests.copyStore(dir.path, hints: hints)
            let opened = try CaskStore.open(at: copy.path, options: .readOnly)
            let report = opened.recoveryReport
            XCTAssertFalse(report.damagedRanges.isEmpty)
            XCTAssertTrue(report.damagedRanges.allSatisfy { $0.file == copy.path + "/" + SegmentName.segment(victim) }, "\(report)")
            // Each key here is put once: its put in the victim is its only record.
            for key in elidedKeys where model[key] != nil {
                XCTAssertEqual(try opened.get(key), hints ? model[key] : nil, "\(key), \(hints ? "with" : "without") the hint")
            }
            for (key, value) in model where !elidedKeys.contains(key) { XCTAssertEqual(try opened.get(key), value, key) }
            try opened.close()
        }
        try SecondReaderTests.compareReaders(dir.path, label: "damaged version 4 header")

        let repaired = try CaskStore.repair(at: dir.path, backupDirectory: dir.path + "-backup")
        XCTAssertEqual(repaired.bytesDropped, 0, "\(repaired)")
        XCTAssertEqual(try StoreFiles.read(victimPath), original, "the header written anew is the one the writer wrote")
        try StoreFiles.removeHints(in: dir.path)
        try check(dir.path, model, options: options())
        try? FileManager.default.removeItem(atPath: dir.path + "-backup")
    }

    /// A hint must declare the key prefix length its segment's header gives.
    func testAHintDeclaringAnotherPrefixLengthIsNotUsed() throws {
        let (dir, model) = try draftStore("cask-key-prefix-hint", users: 0..<2, drafts: 100)
        let id = try StoreFiles.segmentIDs(in: dir.path)[1]
        let hintPath = StoreFiles.hintPath(dir.path, id)
        var hint = try StoreFiles.read(hintPath)
        XCTAssertGreaterThan(hint[40], 0)
        hint[40] -= 1
        let crc = hint[0..<44].withUnsafeBytes { CRC32C.checksum(of: $0) }
        for index in 0..<4 { hint[44 + index] = UInt8(truncatingIfNeeded: crc >> (8 * UInt32(index))) }
        try StoreFiles.write(hintPath, hint)
        let opened = try CaskStore.open(at: dir.path, options: .readOnly)
        XCTAssertEqual(opened.recoveryReport.invalidHints.map(\.segmentID), [id], "\(opened.recoveryReport)")
        for (key, value) in model { XCTAssertEqual(try opened.get(key), value, key) }
        try opened.close()
    }

    func testTheChooserPicksThePrefixThatSavesMost() {
        func best(_ keys: [String]) -> String {
            String(decoding: KeyPrefixChooser.best(for: keys.map { Array($0.utf8) }).prefix, as: UTF8.self)
        }
        // Ten zeros, then 64 different bytes: the zeros, whatever the order.
        let digits = Array("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_".utf8)
        XCTAssertEqual(best(digits.reversed().map { "0000000000" + String(UnicodeScalar($0)) + "xyz" }), "0000000000")
        // Mostly one user's drafts, a few other keys: that user's prefix, and the longest its keys share most.
        XCTAssertTrue(best((0..<60).map { "drafts/000042/\(1_000 + $0)" } + ["a", "b", "settings/x", "zz"]).hasPrefix("drafts/000042/10"))
        // A partial match counts: keys sharing only "ab" with "abX…" still elide 2 bytes.
        XCTAssertEqual(best(["abc1", "abc2", "abd", "zz"]), "abc")
        XCTAssertEqual(best(["a", "b", "c", "d", "ax", "by"]), "")
        XCTAssertEqual(KeyPrefixChooser.saving(of: Array("ab".utf8), for: [Array("abc".utf8), Array("xbc".utf8), Array("a".utf8)]), 1)
        XCTAssertEqual(KeyPrefixChooser().choice().prefix, [], "too few samples")
    }

    // MARK: The bytes (FORMAT.md, "Segment files", "Records", "Hint files")

    private func encode(
        _ type: RecordType, key: String, value: [UInt8] = Array("v".utf8), prefix: String, cipher: FileCipher? = nil
    ) -> [UInt8] {
        var buffer = ByteBuffer(capacity: 256)
        Array(key.utf8).withUnsafeBytes { key in
            value.withUnsafeBytes { value in
                Array(prefix.utf8).withUnsafeBytes { prefix in
                    _ = RecordEncoder().append(
                        type: type, seq: 7, key: key, value: value, expiresAt: nil, cipher: cipher, keyPrefix: prefix, to: &buffer)
                }
            }
        }
        return buffer.copyBytes()
    }

    private func parse(_ record: [UInt8], prefixLength: Int) -> Result<RecordHeader, RecordHeader.Problem> {
        record.withUnsafeBytes { RecordHeader.validate($0, keyPrefixLength: prefixLength) }
    }

    private func key(of record: [UInt8], prefix: String) throws -> String {
        let header = try parse(record, prefixLength: prefix.utf8.count).get()
        return String(decoding: record.withUnsafeBytes { bytes in Array(prefix.utf8).withUnsafeBytes { header.key(in: bytes, prefix: $0) } }, as: UTF8.self)
    }

    func testARecordElidesWhatItsKeySharesWithThePrefixAndIsReadOnlyWithIt() throws {
        let record = encode(.put, key: "user/42", prefix: "user/7")
        let header = try parse(record, prefixLength: 6).get()
        XCTAssertEqual(header.flags & RecordFlags.keyPrefix, RecordFlags.keyPrefix)
        XCTAssertEqual(header.elidedLength, 5)
        XCTAssertEqual(header.keyLength, 7)
        XCTAssertEqual(record.count, encode(.put, key: "user/42", prefix: "").count - 4, "5 bytes elided, 1 for their count")
        XCTAssertEqual(try key(of: record, prefix: "user/7"), "user/42")
        XCTAssertTrue(record.withUnsafeBytes { bytes in
            Array("user/7".utf8).withUnsafeBytes { prefix in
                Array("user/42".utf8).withUnsafeBytes { header.isKey($0, stored: UnsafeRawBufferPointer(rebasing: bytes[header.storedKeyRange]), prefix: prefix) }
            }
        })
        // Read where no prefix is named, or a shorter one: refused, never another key.
        XCTAssertEqual(parse(record, prefixLength: 0), .failure(.malformed("key prefix flag in a segment that names no key prefix")))
        guard case .failure(.malformed) = parse(record, prefixLength: 4) else { return XCTFail("read with a 4-byte prefix") }
        // A key sharing one byte, or none, is stored whole, without the flag; a delete elides too.
        XCTAssertEqual(try parse(encode(.put, key: "u", prefix: "user/"), prefixLength: 5).get().flags & RecordFlags.keyPrefix, 0)
        XCTAssertEqual(try parse(encode(.put, key: "ux", prefix: "user/"), prefixLength: 5).get().elidedLength, 0)
        XCTAssertEqual(try parse(encode(.delete, key: "user/9", value: [], prefix: "user/"), prefixLength: 5).get().elidedLength, 5)
        // A key that is all prefix stores no key byte.
        let whole = encode(.put, key: "user/", prefix: "user/")
        XCTAssertEqual(try parse(whole, prefixLength: 5).get().storedKeyLength, 0)
        XCTAssertEqual(try key(of: whole, prefix: "user/"), "user/")
    }

    func testHandMadeRecordsOfTheFlagAreRefusedBesideTheSameMadeValid() throws {
        // put, flags, seq 7, key length 3, elided n, value length 1, stored key, value — checksummed.
        func record(flags: UInt8, type: RecordType = .put, elided: UInt8, keyLength: UInt8 = 3, value: [UInt8] = [0x76]) -> [UInt8] {
            var bytes: [UInt8] = [0, 0, 0, 0, type.rawValue, flags, 7, keyLength, elided, UInt8(value.count)]
            bytes += [UInt8](repeating: 0x6B, count: Int(keyLength) - Int(min(elided, keyLength))) + value
            StoreFiles.rechecksumRecord(&bytes)
            return bytes
        }
        let valid = record(flags: RecordFlags.keyPrefix, elided: 2)
        XCTAssertEqual(try parse(valid, prefixLength: 2).get().elidedLength, 2)
        for (label, bytes) in [
            ("elided 0", record(flags: RecordFlags.keyPrefix, elided: 0)),
            ("elided past the key", record(flags: RecordFlags.keyPrefix, elided: 4)),
            ("elided past the prefix", record(flags: RecordFlags.keyPrefix, elided: 3)),
            ("with the encrypted flag", record(flags: RecordFlags.keyPrefix | RecordFlags.encrypted, elided: 2)),
        ] {
            guard case .failure(.malformed) = parse(bytes, prefixLength: 2) else { return XCTFail("\(label): accepted") }
        }
        // A batch commit never elides (8-byte key, 1-byte raw value).
        var commit: [UInt8] = [0, 0, 0, 0, RecordType.batch.rawValue, RecordFlags.keyPrefix, 9, 8, 2, 1] + [UInt8](repeating: 0, count: 6) + [1]
        StoreFiles.rechecksumRecord(&commit)
        guard case .failure(.malformed) = parse(commit, prefixLength: 2) else { return XCTFail("a commit record with the flag: accepted") }
    }

    func testAMovedRecordElidesWhatTheNewPrefixSharesAndKeepsItsSeqAndPayload() throws {
        let record = encode(.put, key: "user/42", value: Array(repeating: Array("abcdefgh".utf8), count: 8).flatMap { $0 }, prefix: "user/7")
        let header = try parse(record, prefixLength: 6).get()
        for (to, elided) in [("user/7", 5), ("user/4", 6), ("us", 2), ("", 0), ("x", 0)] {
            var moved = ByteBuffer(capacity: 256)
            let needsNew = record.withUnsafeBytes { plain in
                Array("user/7".utf8).withUnsafeBytes { from in
                    Array(to.utf8).withUnsafeBytes { to in
                        let needsNew = RecordEncoder.needsNewHeader(header, plain: plain, keyPrefix: (from, to))
                        if needsNew {
                            _ = RecordEncoder.appendRekeyed(plain: plain, header: header, clearingBatchMember: false, keyPrefix: (from, to), to: &moved)
                        } else {
                            moved.append(plain)
                        }
                        return needsNew
                    }
                }
            }
            let bytes = moved.copyBytes()
            let copy = try parse(bytes, prefixLength: to.utf8.count).get()
            XCTAssertEqual(copy.elidedLength, elided, to)
            XCTAssertEqual(needsNew, to != "user/7", to)
            if to == "user/7" { XCTAssertEqual(bytes, record, "copied byte for byte") }
            XCTAssertEqual(try key(of: bytes, prefix: to), "user/42", to)
            XCTAssertEqual(copy.seq, header.seq)
            XCTAssertEqual(Array(bytes[copy.payloadRange]), Array(record[header.payloadRange]), to)
        }
    }

    func testVersion4HeadersRoundTripAndAreCheckedStrictly() throws {
        func decode(_ bytes: [UInt8]) -> Result<SegmentHeader, SegmentHeader.Problem> {
            bytes.withUnsafeBytes { SegmentHeader.decode($0, encryption: nil) }.map(\.0)
        }
        for (prefix, dictionary) in [(Array("drafts/".utf8), UInt32(0)), ([UInt8](repeating: 0x30, count: 255), 3), ([0x00], 0)] {
            let header = SegmentHeader(segmentID: 9, baseSeq: 77, dictionaryID: dictionary, dictionaryChecksum: dictionary == 0 ? 0 : 0xABCD, keyPrefix: prefix)
            let bytes = header.encoded()
            XCTAssertEqual(bytes.count, 46 + prefix.count)
            XCTAssertEqual(header.version, SegmentHeader.versionWithKeyPrefix)
            XCTAssertEqual(try decode(bytes).get(), header)
            // A reader of formats 1 and 2 finds a valid header of a version it does not know.
            XCTAssertEqual(bytes[0..<36].withUnsafeBytes { CRC32C.checksum(of: $0) }, UInt32(bytes[36]) | UInt32(bytes[37]) << 8 | UInt32(bytes[38]) << 16 | UInt32(bytes[39]) << 24)
            XCTAssertEqual(decode(Array(bytes.prefix(bytes.count - 1))), .failure(.tooShort))
        }
        let good = SegmentHeader(segmentID: 9, baseSeq: 77, keyPrefix: Array("drafts/".utf8)).encoded()
        // Resealed: both checksums made right again after a change.
        func resealed(_ bytes: [UInt8]) -> [UInt8] {
            var bytes = bytes
            func store(_ crc: UInt32, at offset: Int) { for index in 0..<4 { bytes[offset + index] = UInt8(truncatingIfNeeded: crc >> (8 * UInt32(index))) } }
            store(bytes[0..<36].withUnsafeBytes { CRC32C.checksum(of: $0) }, at: 36)
            let end = bytes.count - 4
            store(bytes[0..<end].withUnsafeBytes { CRC32C.checksum(of: $0) }, at: end)
            return bytes
        }
        XCTAssertEqual(try decode(resealed(good)).get().keyPrefix, Array("drafts/".utf8), "resealed unchanged")
        var flipped = good
        flipped[44] ^= 1  // a byte of the prefix: only the second checksum covers it
        XCTAssertEqual(decode(flipped), .failure(.badChecksum))
        var empty = good
        empty[40] = 0
        XCTAssertEqual(decode(resealed(empty)), .failure(.keyPrefixLengthOutOfRange(0)))
        var long = good + [UInt8](repeating: 0, count: 300)
        long[40] = 0; long[41] = 1
        XCTAssertEqual(decode(long), .failure(.keyPrefixLengthOutOfRange(256)))
        var length = good
        length[10] = 40
        XCTAssertEqual(decode(resealed(length)), .failure(.unsupportedHeaderLength(40)))
        var checksum = good
        checksum[12] = 1  // a dictionary checksum, and no dictionary
        XCTAssertEqual(decode(resealed(checksum)), .failure(.dictionaryChecksumWithoutDictionary))
    }

    /// A plain hint of a 48-byte prefix has the encrypted hints' header length (96): told apart by
    /// its version, it is used.
    func testAPrefixOfAnyLengthIsHeldByItsHints() throws {
        for length in [8, 47, 48, 49, 255] {
            let dir = TemporaryDirectory("cask-key-prefix-length")
            let prefix = String(repeating: "p", count: length - 2) + "/"
            var model: [String: [UInt8]] = [:]
            let store = try CaskStore.open(at: dir.path, options: options())
            for n in 0..<600 {
                let key = prefix + String(format: "%04d", n)
                model[key] = Array("value \(n)".utf8)
                try store.put(key, model[key]!)
            }
            try store.close()
            let ids = try StoreFiles.segmentIDs(in: dir.path)
            XCTAssertGreaterThanOrEqual(try header(of: dir.path, segment: ids.last!).keyPrefix.count, length - 1, "\(length)")
            let opened = try CaskStore.open(at: dir.path, options: .readOnly)
            XCTAssertEqual(opened.recoveryReport.segmentsFromHints, ids.count, "\(length): \(opened.recoveryReport)")
            XCTAssertTrue(opened.recoveryReport.invalidHints.isEmpty, "\(length): \(opened.recoveryReport)")
            for (key, value) in model { XCTAssertEqual(try opened.get(key), value, key) }
            try opened.close()
        }
    }

    /// The active segment's creation, torn inside a version 4 header (or leaving its length and
    /// zeros), is rewritten; one whose prefix length was damaged after records followed is not:
    /// those records stay.
    func testATornVersion4HeaderIsRewrittenButADamagedOneKeepsItsRecords() throws {
        let (dir, model) = try draftStore("cask-key-prefix-torn", users: 0..<2, drafts: 100)
        let last = try XCTUnwrap(StoreFiles.segmentIDs(in: dir.path).last)
        let lastPath = StoreFiles.segmentPath(dir.path, last)
        let lastHeader = try header(of: dir.path, segment: last)
        XCTAssertEqual(lastHeader.version, SegmentHeader.versionWithKeyPrefix)
        let whole = try StoreFiles.read(lastPath)
        let records = try StoreFiles.records(ofSegment: lastPath)
        let lost = Set(records.map { String(decoding: $0.key, as: UTF8.self) })
        for torn in [Array(whole.prefix(lastHeader.byteCount - 3)), Array(whole.prefix(41)), [UInt8](repeating: 0, count: lastHeader.byteCount)] {
            let copy = try SecondReaderTests.copyStore(dir.path, hints: true)
            let path = StoreFiles.segmentPath(copy.path, last)
            try StoreFiles.write(path, torn)
            try? FileManager.default.removeItem(atPath: StoreFiles.hintPath(copy.path, last))
            try SecondReaderTests.compareReaders(copy.path, label: "torn after \(torn.count) bytes")
            let store = try CaskStore.open(at: copy.path, options: options())
            XCTAssertEqual(store.recoveryReport.truncations.map(\.offset), [0], "\(torn.count): \(store.recoveryReport)")
            XCTAssertTrue(store.recoveryReport.damagedRanges.isEmpty, "\(store.recoveryReport)")
            for (key, value) in model where !lost.contains(key) { XCTAssertEqual(try store.get(key), value, key) }
            try store.close()
        }
        // The prefix length damaged (no checksum covers it) in an active segment of a few records
        // after its header, so that the header seems cut short, or its length out of range: damage,
        // never a torn creation that would cut the records.
        let short = TemporaryDirectory("cask-key-prefix-short-active")
        let store = try CaskStore.open(at: short.path, options: options())
        var n = 0, segments = 1
        while true {
            try store.put("drafts/000001/\(1_700_000_000 + n)", Array("v\(n)".utf8))
            n += 1
            let count = try StoreFiles.segmentIDs(in: short.path).count
            if count > segments {
                segments = count
                if n > 200 { break }  // the new segment names a prefix: its first record elides it
            }
        }
        try store.put("settings/x", Array("kept".utf8))  // stored whole
        try store.close()
        let active = try XCTUnwrap(StoreFiles.segmentIDs(in: short.path).last)
        let activeBytes = try StoreFiles.read(StoreFiles.segmentPath(short.path, active))
        XCTAssertLessThan(activeBytes.count, SegmentHeader.maxLength)
        XCTAssertEqual(try header(of: short.path, segment: active).version, SegmentHeader.versionWithKeyPrefix)
        for (offset, mask) in [(40, UInt8(0x80)), (41, UInt8(0x01))] {
            let copy = try SecondReaderTests.copyStore(short.path, hints: true)
            try StoreFiles.flip(StoreFiles.segmentPath(copy.path, active), at: offset, mask: mask)
            try SecondReaderTests.compareReaders(copy.path, label: "prefix length flipped at \(offset)")
            let opened = try CaskStore.open(at: copy.path, options: options())
            XCTAssertTrue(opened.recoveryReport.truncations.isEmpty, "\(offset): \(opened.recoveryReport)")
            XCTAssertEqual(opened.recoveryReport.damagedRanges.first?.kind, .segmentHeader, "\(opened.recoveryReport)")
            XCTAssertEqual(try opened.get("settings/x"), Array("kept".utf8))
            try opened.close()
        }
    }

    func testAHintHoldsItsSegmentsPrefixAndIsCheckedAgainstIt() throws {
        let prefix = Array("drafts/".utf8)
        var encoder = HintFile.Encoder(segmentID: 4, keyPrefix: prefix)
        let record = encode(.put, key: "drafts/1", prefix: "drafts/")
        let header = try parse(record, prefixLength: prefix.count).get()
        Array("drafts/1".utf8).withUnsafeBytes { encoder.add(header, key: $0) }
        let hint = encoder.finish()
        let summary = try XCTUnwrap(hint.withUnsafeBytes { HintFile.declaredSummary($0) })
        XCTAssertEqual(summary.keyPrefix, prefix)
        XCTAssertEqual(summary.headerLength, 48 + prefix.count)
        XCTAssertEqual(summary.coveredLength, Int64(46 + prefix.count + record.count))
        func entries(_ keyPrefix: [UInt8]?) -> [String]? {
            var keys: [String] = []
            let summary = hint.withUnsafeBytes {
                HintFile.forEachEntry(in: $0, segmentID: 4, segmentLength: 1 << 20, sealing: nil, keyPrefix: keyPrefix) { keys.append(String(decoding: $0.key, as: UTF8.self)) }
            }
            return summary == nil ? nil : keys
        }
        XCTAssertEqual(entries(prefix), ["drafts/1"])
        XCTAssertEqual(entries(nil), ["drafts/1"], "behind a damaged header")
        XCTAssertNil(entries(Array("drafts".utf8)))
        XCTAssertNil(entries([]))
    }
}
