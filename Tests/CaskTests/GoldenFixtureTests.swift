import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// A store checked into the repository (Tests/CaskTests/Fixtures/golden-v1), written by a fixed
/// sequence of operations. Two checks keep the on-disk format from changing unnoticed:
/// the fixture opens with exactly the expected contents, and replaying the same operations today
/// produces byte-identical files. If a change is intended, bump the format version, document it in
/// FORMAT.md, and regenerate with `CASK_REGENERATE_FIXTURES=1 swift test --filter GoldenFixtureTests`.
/// The same for a store with a dictionary (golden-v2); the encrypted store (golden-v3) is read,
/// not replayed byte for byte (its salts are random; see `writeVersion3`).
final class GoldenFixtureTests: XCTestCase {
    static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/golden-v1").path

    /// The operations that made the fixture, and the contents they leave.
    static func write(into directory: String) throws -> [String: [UInt8]] {
        var options = CaskStore.Options()
        options.maxSegmentSize = 4096
        options.keyPrefixes = false  // format 1 (golden-v4 is the key prefixes')
        let store = try CaskStore.open(at: directory, options: options)
        var expected: [String: [UInt8]] = [:]
        func put(_ key: String, _ value: [UInt8]) throws {
            try store.put(key, value)
            expected[key] = value
        }
        try put("alpha", Array("one".utf8))
        try put("user/42", Array(String(repeating: "name=Ada Lovelace;", count: 6).utf8))
        try put("empty", [])
        try store.delete("alpha")
        expected["alpha"] = nil
        var generator = SeededGenerator(seed: 42)
        try put("binary/\u{1}", generator.bytes(40))
        try put("alpha", Array("two".utf8))
        for i in 0..<60 {
            let noise = generator.bytes(24).map { String($0, radix: 16) }.joined(separator: " ")
            let text = "draft \(i): " + String(repeating: "lorem ipsum ", count: 4) + noise
            try put("drafts/ada/\(1_000 + i)", Array(text.utf8))
        }
        for i in stride(from: 0, to: 60, by: 7) {
            try store.delete("drafts/ada/\(1_000 + i)")
            expected["drafts/ada/\(1_000 + i)"] = nil
        }
        try put("user/42", Array("name=Ada Lovelace".utf8))
        try store.close()
        return expected
    }

    static func files(in directory: String) throws -> [String: Data] {
        var files: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) where name != "LOCK" {
            files[name] = try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name))
        }
        return files
    }

    static let fixtureV2 = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/golden-v2").path

    /// The operations that made the version 2 fixture (Fixtures/golden-v2): drafts until the store
    /// trains a dictionary (from exactly the first 32 KiB of values: training starts at the put that
    /// fills the sample), a wait for the writer to take it, then more drafts — in a segment that
    /// names it — overwrites and deletes. The dictionary's bytes are zstd's trainer's (libzstd 1.5.4
    /// of Debian 12 made the fixture); a trainer that learns otherwise changes only the replay.
    static func writeVersion2(into directory: String) throws -> [String: [UInt8]] {
        var options = CaskStore.Options()
        options.maxSegmentSize = 64 << 10
        options.dictionaries = DictionaryOptions(enabled: true, trainingSampleBytes: 32 << 10)
        options.keyPrefixes = false  // format 2 (golden-v4 is the key prefixes')
        let store = try CaskStore.open(at: directory, options: options)
        var expected: [String: [UInt8]] = [:]
        func put(_ key: String, _ value: [UInt8]) throws {
            try store.put(key, value)
            expected[key] = value
        }
        var n = 0
        var sampled = 0
        while sampled < 32 << 10 {
            let draft = DictionaryTests.profile(n)
            try put("drafts/\(1_000 + n)", draft)
            sampled += min(draft.count, 16 << 10)
            n += 1
        }
        let deadline = Date().addingTimeInterval(60)
        while store.dictionaryForNewSegments == nil && Date() < deadline { Thread.sleep(forTimeInterval: 0.005) }
        precondition(store.dictionaryForNewSegments == 1, "the fixture's store trained no dictionary")
        for i in 0..<40 { try put("drafts/\(2_000 + i)", DictionaryTests.profile(10_000 + i)) }
        try put("drafts/1000", DictionaryTests.profile(0, generation: 1))
        for i in stride(from: 0, to: 40, by: 9) {
            try store.delete("drafts/\(2_000 + i)")
            expected["drafts/\(2_000 + i)"] = nil
        }
        try put("short", Array("raw".utf8))
        try store.close()
        return expected
    }

    static let fixtureV3 = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/golden-v3").path
    /// The key of the encrypted fixture (Fixtures/golden-v3). A test key, published here: it protects nothing.
    static let keyV3: [UInt8] = (0..<32).map { UInt8($0) ^ 0x5C }

    /// The operations that made the encrypted fixture (Fixtures/golden-v3: FORMAT.md, "Encryption"),
    /// ChaCha20-Poly1305 under `keyV3`: puts raw and compressed, an empty value, deletes, a batch
    /// with a delete, an expired put and one that expires in 2^50 ms, over two segments of 4 KiB
    /// with their hints. Encryption draws a random store id and a random salt for every file, so
    /// a replay does not give the same bytes: `testReplayVersion3GivesTheSameLayout` compares names
    /// and lengths, and the contents are checked by reading (here and in SecondReaderTests).
    static func writeVersion3(into directory: String) throws -> [String: [UInt8]] {
        var options = CaskStore.Options.manualCompaction(maxSegmentSize: 4096)
        options.encryption = .key(keyV3, algorithm: .xchacha20poly1305)
        let store = try CaskStore.open(at: directory, options: options)
        var expected: [String: [UInt8]] = [:]
        func put(_ key: String, _ value: [UInt8]) throws {
            try store.put(key, value)
            expected[key] = value
        }
        try put("alpha", Array("one".utf8))
        try put("user/42", Array(String(repeating: "name=Ada Lovelace;", count: 6).utf8))
        try put("empty", [])
        try store.delete("alpha")
        expected["alpha"] = nil
        var generator = SeededGenerator(seed: 3)
        try put("binary/\u{1}", generator.bytes(40))
        try put("alpha", Array("two".utf8))
        var batch = WriteBatch()
        batch.put("batch/a", Array("A".utf8))
        batch.put("batch/b", Array(String(repeating: "batched ", count: 8).utf8))
        batch.delete("empty")
        try store.write(batch)
        expected["batch/a"] = Array("A".utf8)
        expected["batch/b"] = Array(String(repeating: "batched ", count: 8).utf8)
        expected["empty"] = nil
        try store.put(Array("expired".utf8), Array("gone".utf8), expiresAtMilliseconds: 1_000)
        try store.put(Array("expires-later".utf8), Array("kept".utf8), expiresAtMilliseconds: 1 << 50)
        expected["expires-later"] = Array("kept".utf8)
        for i in 0..<48 {
            try put("drafts/ada/\(1_000 + i)", Array("draft \(i): lorem ipsum dolor sit amet \(generator.next() % 10_000)".utf8))
        }
        for i in stride(from: 0, to: 48, by: 5) {
            try store.delete("drafts/ada/\(1_000 + i)")
            expected["drafts/ada/\(1_000 + i)"] = nil
        }
        try put("user/42", Array("name=Ada Lovelace".utf8))
        try store.close()
        return expected
    }

    static let fixtureV4 = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/golden-v4").path

    /// The operations that made the key prefix fixture (Fixtures/golden-v4: format 4, FORMAT.md
    /// "Segment files"): 300 drafts keyed `drafts/ada/NNNN` fill a first segment of 8 KiB, which
    /// names no prefix (no key was seen when it began); the second names the prefix their keys
    /// share, and its puts, a delete, an overwrite, an expiring put and a batch elide it, but for a
    /// key that does not start with it.
    static func writeVersion4(into directory: String) throws -> [String: [UInt8]] {
        var options = CaskStore.Options.manualCompaction(maxSegmentSize: 8192)
        options.keyPrefixes = true
        let store = try CaskStore.open(at: directory, options: options)
        var expected: [String: [UInt8]] = [:]
        func put(_ key: String, _ value: [UInt8]) throws {
            try store.put(key, value)
            expected[key] = value
        }
        for i in 0..<300 { try put("drafts/ada/\(1_000 + i)", Array("draft \(i): lorem".utf8)) }
        try put("user/42", Array(String(repeating: "name=Ada Lovelace;", count: 6).utf8))
        try store.delete("drafts/ada/1003")
        expected["drafts/ada/1003"] = nil
        try put("drafts/ada/1004", Array("draft 4, again".utf8))
        try store.put(Array("drafts/ada/2000".utf8), Array("kept".utf8), expiresAtMilliseconds: 1 << 50)
        expected["drafts/ada/2000"] = Array("kept".utf8)
        var batch = WriteBatch()
        batch.put("drafts/ada/3000", Array("A".utf8))
        batch.delete("drafts/ada/1005")
        try store.write(batch)
        expected["drafts/ada/3000"] = Array("A".utf8)
        expected["drafts/ada/1005"] = nil
        try store.close()
        return expected
    }

    func testReplayProducesIdenticalFiles() throws {
        try checkReplay(fixture: Self.fixture, write: Self.write)
    }

    func testReplayProducesIdenticalFilesVersion2() throws {
        try checkReplay(fixture: Self.fixtureV2, write: Self.writeVersion2)
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.fixtureV2)
        XCTAssertTrue(names.contains("0000000001.dict"), "\(names)")
    }

    /// Where the hint files the fixtures had before hint entries were delta-coded are kept: version 1
    /// hints of golden-v1's and golden-v2's segments, and the whole encrypted store golden-v3 was
    /// (its segments' salts are those its version 2 hints name). A store written then reads the same.
    static func olderHints(_ name: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/\(name)").path
    }

    func testReplayProducesIdenticalFilesVersion4() throws {
        try checkReplay(fixture: Self.fixtureV4, write: Self.writeVersion4)
        // The second segment names a key prefix, and most of its records elide it.
        let files = try Self.files(in: Self.fixtureV4)
        let second = try XCTUnwrap(files["0000000002.cask"])
        let header = try second.withUnsafeBytes { try SegmentHeader.decode($0, encryption: nil).get().0 }
        XCTAssertEqual(header.version, SegmentHeader.versionWithKeyPrefix)
        XCTAssertTrue(String(decoding: header.keyPrefix, as: UTF8.self).hasPrefix("drafts/ada/1"), "\(header.keyPrefix)")
        let first = try XCTUnwrap(files["0000000001.cask"])
        XCTAssertEqual(first.withUnsafeBytes { try? SegmentHeader.decode($0, encryption: nil).get().0.version }, SegmentHeader.versionWithoutDictionary)
    }

    func testFixtureOpensWithExpectedContents() throws {
        try checkContents(fixture: Self.fixture, olderHints: Self.olderHints("golden-v1-hints-v1"), write: Self.write)
    }

    func testFixtureOpensWithExpectedContentsVersion2() throws {
        try checkContents(fixture: Self.fixtureV2, olderHints: Self.olderHints("golden-v2-hints-v1"), write: Self.writeVersion2)
    }

    func testFixtureOpensWithExpectedContentsVersion4() throws {
        try checkContents(fixture: Self.fixtureV4, olderHints: nil, write: Self.writeVersion4)
    }

    func testFixtureOpensWithExpectedContentsVersion3() throws {
        try checkContents(
            fixture: Self.fixtureV3, olderHints: Self.olderHints("golden-v3-hints-v2"), write: Self.writeVersion3, encryption: .key(Self.keyV3))
    }

    /// The hints this version writes are delta-coded (3, and 4 when encrypted); the older ones are not.
    func testFixtureHintVersions() throws {
        for (directory, version) in [
            (Self.fixture, 3), (Self.fixtureV2, 3), (Self.fixtureV3, 4),
            (Self.olderHints("golden-v1-hints-v1"), 1), (Self.olderHints("golden-v2-hints-v1"), 1), (Self.olderHints("golden-v3-hints-v2"), 2),
        ] {
            let hints = try Self.files(in: directory).filter { $0.key.hasSuffix(".hint") }
            XCTAssertEqual(hints.count, 2, directory)
            for (name, bytes) in hints { XCTAssertEqual(Int(bytes[8]) | Int(bytes[9]) << 8, version, "\(directory)/\(name)") }
        }
    }

    /// Not byte for byte: every replay draws a new store id and new salts. The same files with the
    /// same lengths (what is not secret — record headers, hint entries — is laid out alike).
    func testReplayVersion3GivesTheSameLayout() throws {
        let scratch = TemporaryDirectory("cask-golden-v3")
        _ = try Self.writeVersion3(into: scratch.path)
        if ProcessInfo.processInfo.environment["CASK_REGENERATE_FIXTURES"] != nil {
            try? FileManager.default.removeItem(atPath: Self.fixtureV3)
            try FileManager.default.createDirectory(atPath: Self.fixtureV3, withIntermediateDirectories: true)
            for (name, bytes) in try Self.files(in: scratch.path) {
                try bytes.write(to: URL(fileURLWithPath: Self.fixtureV3 + "/" + name))
            }
        }
        let golden = try Self.files(in: Self.fixtureV3)
        let replayed = try Self.files(in: scratch.path)
        XCTAssertEqual(Set(golden.keys), Set(replayed.keys))
        XCTAssertEqual(golden.keys.filter { $0.hasSuffix(".cask") }.count, 2, "\(golden.keys.sorted())")
        XCTAssertEqual(golden.keys.filter { $0.hasSuffix(".hint") }.count, 2, "\(golden.keys.sorted())")
        XCTAssertTrue(golden.keys.contains("ENCRYPTION"))
        XCTAssertLessThan(golden.values.reduce(0) { $0 + $1.count }, 12 << 10, "the fixture should stay small")
        for (name, bytes) in golden {
            XCTAssertEqual(replayed[name]?.count, bytes.count, "\(name): the replay's length differs from the fixture's: the on-disk format changed")
            XCTAssertNotEqual(replayed[name], bytes, "\(name): the same bytes again (a salt or store id that is not random?)")
        }
    }

    private func checkReplay(fixture: String, write: (String) throws -> [String: [UInt8]]) throws {
        let scratch = TemporaryDirectory("cask-golden")
        _ = try write(scratch.path)
        if ProcessInfo.processInfo.environment["CASK_REGENERATE_FIXTURES"] != nil {
            try? FileManager.default.removeItem(atPath: fixture)
            try FileManager.default.createDirectory(atPath: fixture, withIntermediateDirectories: true)
            for (name, bytes) in try Self.files(in: scratch.path) {
                try bytes.write(to: URL(fileURLWithPath: fixture + "/" + name))
            }
        }
        let golden = try Self.files(in: fixture)
        let replayed = try Self.files(in: scratch.path)
        XCTAssertEqual(Set(golden.keys), Set(replayed.keys))
        XCTAssertGreaterThanOrEqual(golden.keys.filter { $0.hasSuffix(".cask") }.count, 2, "fixture should span segments")
        for (name, bytes) in golden {
            XCTAssertEqual(replayed[name], bytes, "\(name) differs from the golden fixture: the on-disk format changed")
        }
    }

    /// Opens the fixture with its hints, with the hints of `olderHints` (if any) laid over it, and with none.
    private func checkContents(
        fixture: String, olderHints: String?, write: (String) throws -> [String: [UInt8]], encryption: Encryption = .none
    ) throws {
        let scratch = TemporaryDirectory("cask-golden-expected")
        let expected = try write(scratch.path)
        let hintSets: [String?] = [fixture] + (olderHints.map { [$0] } ?? []) + [nil]
        for hints in hintSets {
            let copy = TemporaryDirectory("cask-golden-copy")
            for (name, bytes) in try Self.files(in: fixture) where hints != nil || !name.hasSuffix(".hint") {
                try bytes.write(to: URL(fileURLWithPath: copy.path + "/" + name))
            }
            if let olderHints, hints == olderHints {
                for (name, bytes) in try Self.files(in: olderHints) { try bytes.write(to: URL(fileURLWithPath: copy.path + "/" + name)) }
            }
            var options = CaskStore.Options(durability: .os, readOnly: true)
            options.encryption = encryption
            let store = try CaskStore.open(at: copy.path, options: options)
            XCTAssertTrue(store.recoveryReport.isClean, "\(store.recoveryReport)")
            XCTAssertEqual(store.recoveryReport.segmentsFromHints, hints == nil ? 0 : 2, "hints from \(hints ?? "nowhere")")
            XCTAssertEqual(store.count, expected.count)
            for (key, value) in expected { XCTAssertEqual(try store.get(key), value, key) }
            XCTAssertNil(try store.get("alpha2"))
            XCTAssertEqual(try store.keys(prefix: Array("drafts/".utf8)).count, expected.keys.filter { $0.hasPrefix("drafts/") }.count)
            let verified = try CaskStore.verify(at: copy.path, encryption: encryption)
            XCTAssertTrue(verified.damagedRanges.isEmpty && verified.invalidHints.isEmpty, "\(verified)")
            try store.close()
        }
    }
}
