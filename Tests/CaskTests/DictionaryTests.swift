import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// Trained dictionaries (FORMAT.md, "Dictionary files"): records of small, alike values compressed
/// against content learnt from the store's own values, through every state a store can be in —
/// none yet, one, several, retrained and recompressed by compaction, turned off — and with the
/// dictionary file damaged, missing or replaced.
final class DictionaryTests: XCTestCase {
    /// A user record as an app would store it: JSON with the same field names every time, common
    /// words, and random ids.
    static func profile(_ n: Int, generation: Int = 0) -> [UInt8] {
        var random = SeededGenerator(seed: UInt64(n * 31 + generation))
        let names = ["ada", "grace", "alan", "edsger", "barbara", "donald", "frances", "ken"]
        let cities = ["London", "Paris", "Zurich", "Boston", "Kyoto", "Lisbon"]
        let name = names[Int(random.next() % 8)]
        let id = random.bytes(8).map { String($0, radix: 16) }.joined()
        let json = #"{"id":"\#(id)","name":"\#(name)","email":"\#(name).\#(n)@example.com","age":\#(20 + random.next() % 50),"#
            + #""verified":\#(random.next() % 2 == 0),"city":"\#(cities[Int(random.next() % 6)])","generation":\#(generation),"#
            + #""tags":["swift","server","\#(names[Int(random.next() % 8)])"],"bio":"writes software and reads about distributed systems"}"#
        return Array(json.utf8)
    }

    private func options(trainingBytes: Int = 64 << 10, enabled: Bool = true) -> CaskStore.Options {
        var options = CaskStore.Options.manualCompaction()
        options.dictionaries = DictionaryOptions(enabled: enabled, trainingSampleBytes: trainingBytes)
        return options
    }

    private func files(_ directory: TemporaryDirectory, ending suffix: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(suffix) }.sorted()
    }

    private func header(of segment: String, in directory: TemporaryDirectory) throws -> SegmentHeader {
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: directory.appending(segment))).prefix(SegmentHeader.maxLength))
        return try bytes.withUnsafeBytes { SegmentHeader.decode($0, encryption: nil) }.get().0
    }

    /// Writes profiles until the store has trained a dictionary and handed it to its writer.
    private func writeUntilTrained(_ store: CaskStore, _ directory: TemporaryDirectory, model: inout [String: [UInt8]]) throws {
        var n = 0
        let deadline = Date().addingTimeInterval(60)
        while store.dictionaryForNewSegments == nil {
            XCTAssertLessThan(Date(), deadline, "no dictionary trained")
            if Date() > deadline { return }
            let value = Self.profile(n)
            try store.put("user/\(n)", value)
            model["user/\(n)"] = value
            n += 1
            if n % 1000 == 0 { Thread.sleep(forTimeInterval: 0.01) }
        }
    }

    private func assertReads(_ store: CaskStore, _ model: [String: [UInt8]], file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(store.count, model.count, file: file, line: line)
        for (key, value) in model { XCTAssertEqual(try store.get(key), value, key, file: file, line: line) }
    }

    // MARK: Round trips

    func testRecordsAfterTrainingUseTheDictionaryAndReadBack() throws {
        let directory = TemporaryDirectory()
        var model: [String: [UInt8]] = [:]
        let store = try CaskStore.open(at: directory.path, options: options())
        try writeUntilTrained(store, directory, model: &model)
        // The next write seals the active segment; the new one names the dictionary.
        for n in 0..<2000 {
            let value = Self.profile(100_000 + n)
            try store.put("later/\(n)", value)
            model["later/\(n)"] = value
        }
        let segments = try files(directory, ending: ".cask")
        let newest = try header(of: segments.last!, in: directory)
        XCTAssertTrue([SegmentHeader.versionWithDictionary, SegmentHeader.versionWithKeyPrefix].contains(newest.version), "\(newest.version)")
        XCTAssertEqual(newest.dictionaryID, 1)
        XCTAssertEqual(try header(of: segments.first!, in: directory).dictionaryID, 0)
        try assertReads(store, model)
        // Lock-free gets, iteration and listings read them too.
        var seen = 0
        try store.forEach(prefix: Array("later/".utf8)) { (key, value) throws(CaskError) in
            seen += 1
            XCTAssertEqual(Array(value), model[String(decoding: key, as: UTF8.self)])
        }
        XCTAssertEqual(seen, 2000)
        try store.close()

        let reopened = try CaskStore.open(at: directory.path, options: options())
        try assertReads(reopened, model)
        try reopened.close()
        let report = try CaskStore.verify(at: directory.path)
        XCTAssertTrue(report.damagedRanges.isEmpty, "\(report.damagedRanges)")
    }

    func testCompactionRecompressesWithTheDictionaryAndShrinksTheStore() throws {
        var sizes: [Bool: Int64] = [:]
        for enabled in [false, true] {
            let directory = TemporaryDirectory()
            var model: [String: [UInt8]] = [:]
            let store = try CaskStore.open(at: directory.path, options: options(enabled: enabled))
            for n in 0..<6000 {
                let value = Self.profile(n)
                try store.put("user/\(n)", value)
                model["user/\(n)"] = value
            }
            if enabled {
                let deadline = Date().addingTimeInterval(60)
                while store.dictionaryForNewSegments == nil && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
                XCTAssertEqual(try files(directory, ending: ".dict"), ["0000000001.dict"])
                try store.put("trigger", [1])  // seals the segment written without the dictionary
                model["trigger"] = [1]
            }
            _ = try store.compact()
            try assertReads(store, model)
            if enabled {
                for segment in try files(directory, ending: ".cask") {
                    XCTAssertEqual(try header(of: segment, in: directory).dictionaryID, 1, segment)
                }
            }
            sizes[enabled] = try store.statistics().segmentBytes
            try store.close()
            let reopened = try CaskStore.open(at: directory.path, options: options(enabled: enabled))
            try assertReads(reopened, model)
            try reopened.close()
        }
        // The same 6,000 profiles: LZ4 alone finds little to match inside one; with the dictionary
        // their shared field names and words are matched.
        XCTAssertLessThan(Double(sizes[true]!), 0.7 * Double(sizes[false]!), "with \(sizes[true]!) bytes, without \(sizes[false]!)")
        print("DictionaryTests: 6,000 profiles take \(sizes[true]!) bytes with the dictionary, \(sizes[false]!) without")
    }

    func testTurningDictionariesOffRecompressesWithoutThemAndRemovesTheFile() throws {
        let directory = TemporaryDirectory()
        var model: [String: [UInt8]] = [:]
        let store = try CaskStore.open(at: directory.path, options: options())
        try writeUntilTrained(store, directory, model: &model)
        for n in 0..<500 {
            let value = Self.profile(200_000 + n)
            try store.put("later/\(n)", value)
            model["later/\(n)"] = value
        }
        try store.close()

        let off = try CaskStore.open(at: directory.path, options: options(enabled: false))
        XCTAssertEqual(try files(directory, ending: ".dict"), ["0000000001.dict"], "kept while a segment names it")
        // The first write seals the segment that names the dictionary; compaction rewrites it.
        try off.put("after", Self.profile(3))
        model["after"] = Self.profile(3)
        _ = try off.compact()
        try assertReads(off, model)
        for segment in try files(directory, ending: ".cask") {
            XCTAssertEqual(try header(of: segment, in: directory).dictionaryID, 0, segment)
        }
        XCTAssertEqual(try files(directory, ending: ".dict"), [], "removed once no segment names it")
        try off.close()
        let again = try CaskStore.open(at: directory.path, options: options(enabled: false))
        try assertReads(again, model)
        try again.close()
    }

    func testBackupCarriesTheDictionaries() throws {
        let directory = TemporaryDirectory()
        var model: [String: [UInt8]] = [:]
        let store = try CaskStore.open(at: directory.path, options: options())
        try writeUntilTrained(store, directory, model: &model)
        try store.put("after", Self.profile(9))
        model["after"] = Self.profile(9)
        let target = directory.appending("../" + URL(fileURLWithPath: directory.path).lastPathComponent + "-backup")
        defer { try? FileManager.default.removeItem(atPath: target) }
        let report = try store.backup(to: target, verify: true)
        XCTAssertEqual(report.dictionaryFiles, 1)
        XCTAssertEqual(report.verificationProblems, [])
        try store.close()
        let copy = try CaskStore.open(at: target, options: .readOnly)
        try assertReads(copy, model)
        try copy.close()
    }

    /// A store opened often and written a little each time never samples enough in one open; its
    /// compaction trains from what it copies. Then the data changes: the writer sees it drift and
    /// trains a new dictionary, a compaction recompresses everything into it, and the old one's
    /// file goes.
    func testCompactionTrainsAndRetrainsWhenTheDataChanges() throws {
        let directory = TemporaryDirectory()
        var model: [String: [UInt8]] = [:]
        var options = options(trainingBytes: 1 << 20)
        options.maxSegmentSize = 128 << 10
        for session in 0..<6 {
            // An app's session: about 250 KB of updates to 2,000 users, never the 1 MiB one open needs.
            let store = try CaskStore.open(at: directory.path, options: options)
            for n in 0..<800 {
                let user = (session * 800 + n * 7) % 2000
                let value = Self.profile(user, generation: session)
                try store.put("user/\(user)", value)
                model["user/\(user)"] = value
            }
            XCTAssertNil(store.dictionaryForNewSegments)
            try store.close()
        }
        var store = try CaskStore.open(at: directory.path, options: options)
        _ = try store.compact()
        XCTAssertEqual(store.dictionaryForNewSegments, 1, "the compaction trained one from the values it copied")
        _ = try store.compact()
        try assertReads(store, model)
        let trained = try store.statistics().segmentBytes
        try store.close()

        // Other data: XML documents instead of JSON profiles, under the same keys. The writer sees
        // the dictionary compress them much worse than it did the profiles (drift), samples them and
        // trains a new one.
        store = try CaskStore.open(at: directory.path, options: options)
        var n = 0
        let deadline = Date().addingTimeInterval(60)
        while store.dictionaryForNewSegments == 1 && Date() < deadline {
            var random = SeededGenerator(seed: UInt64(n))
            let value = Array(("<document xmlns=\"urn:cask:test\"><title lang=\"en\">Report \(random.next() % 1000)</title>"
                + "<section><paragraph>\(random.bytes(12).map { String($0, radix: 36) }.joined())</paragraph></section></document>").utf8)
            try store.put("user/\(n % 2000)", value)
            model["user/\(n % 2000)"] = value
            n += 1
            if n % 1000 == 0 { Thread.sleep(forTimeInterval: 0.005) }
        }
        XCTAssertEqual(store.dictionaryForNewSegments, 2, "the writer trained a new dictionary for the new data")
        try store.put("after", [1])  // seals the segment that was active, which names the old one
        model["after"] = [1]
        _ = try store.compact()
        try assertReads(store, model)
        try store.close()
        for segment in try files(directory, ending: ".cask") {
            XCTAssertEqual(try header(of: segment, in: directory).dictionaryID, 2, segment)
        }
        XCTAssertEqual(try files(directory, ending: ".dict"), ["0000000002.dict"])
        XCTAssertGreaterThan(trained, 0)
        let reopened = try CaskStore.open(at: directory.path, options: options)
        try assertReads(reopened, model)
        try reopened.close()
    }

    // MARK: Damage

    /// A store whose every record after the first few thousand uses dictionary 1, closed.
    private func storeUsingTheDictionary() throws -> (TemporaryDirectory, [String: [UInt8]]) {
        let directory = TemporaryDirectory()
        var model: [String: [UInt8]] = [:]
        let store = try CaskStore.open(at: directory.path, options: options())
        try writeUntilTrained(store, directory, model: &model)
        try store.put("after", Self.profile(7))
        model["after"] = Self.profile(7)
        _ = try store.compact()
        try store.close()
        return (directory, model)
    }

    func testMissingOrDamagedDictionaryFailsItsRecordsNamingIt() throws {
        let cases: [(String, (String) throws -> Void)] = [
            ("missing", { path in try FileManager.default.removeItem(atPath: path) }),
            ("flipped byte", { path in
                var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
                bytes[bytes.count / 2] ^= 0x01
                try Data(bytes).write(to: URL(fileURLWithPath: path))
            }),
            ("a link to it", { path in
                // The very file, moved outside the store and linked back: never followed.
                let outside = URL(fileURLWithPath: path).deletingLastPathComponent().path + "-outside.dict"
                try FileManager.default.moveItem(atPath: path, toPath: outside)
                try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: outside)
            }),
            ("another dictionary", { path in
                let other = (0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 7) }
                try Data(other.withUnsafeBytes { DictionaryFile.encode(id: 1, content: $0) }).write(to: URL(fileURLWithPath: path))
            }),
        ]
        for (label, damage) in cases {
            let (directory, model) = try storeUsingTheDictionary()
            let dictionaryPath = directory.appending("0000000001.dict")
            try damage(dictionaryPath)
            defer { try? FileManager.default.removeItem(atPath: directory.path + "-outside.dict") }
            let store = try CaskStore.open(at: directory.path, options: .readOnly)
            XCTAssertEqual(store.count, model.count, label)
            var failures = 0
            for key in model.keys {
                do throws(CaskError) {
                    let value = try store.get(key)
                    XCTAssertEqual(value, model[key], "\(label): \(key)")
                } catch {
                    guard case .corruptRecord(_, _, let reason) = error else { return XCTFail("\(label): \(error)") }
                    XCTAssertTrue(reason.contains("dictionary 1") && reason.contains(dictionaryPath), "\(label): \(reason)")
                    failures += 1
                }
            }
            XCTAssertEqual(failures, model.count, "\(label): every record needs the dictionary")
            try store.close()
            let report = try CaskStore.verify(at: directory.path)
            XCTAssertEqual(report.damagedRanges.count, model.count, label)
            XCTAssertTrue(report.damagedRanges.allSatisfy { $0.reason.contains(dictionaryPath) }, label)
        }
    }

    /// `recover` with the dictionary file gone: every record that needs it is named as dropped, the
    /// originals are in the repair's backup, and putting the file and the segments back restores all.
    func testRecoverWithoutTheDictionaryKeepsTheOriginalsInItsBackup() throws {
        let (directory, model) = try storeUsingTheDictionary()
        let dictionary = directory.appending("0000000001.dict")
        let saved = try Data(contentsOf: URL(fileURLWithPath: dictionary))
        try FileManager.default.removeItem(atPath: dictionary)
        let backup = directory.path + "-repair-backup"
        defer { try? FileManager.default.removeItem(atPath: backup) }
        let report = try CaskStore.repair(at: directory.path, backupDirectory: backup)
        XCTAssertEqual(report.recordsDropped, model.count, "\(report)")
        XCTAssertTrue(report.changes.contains { $0.reason.contains("dictionary 1") || $0.droppedRanges.contains { $0.reason.contains("dictionary 1") } }, "\(report)")
        let repaired = try CaskStore.open(at: directory.path, options: .readOnly)
        XCTAssertEqual(repaired.count, 0)
        try repaired.close()
        XCTAssertTrue(try CaskStore.verify(at: directory.path).damagedRanges.isEmpty)
        // The way back: the dictionary and the segments from the backup.
        for name in try FileManager.default.contentsOfDirectory(atPath: backup) where name.hasSuffix(".cask") {
            let target = directory.appending(name)
            try? FileManager.default.removeItem(atPath: target)
            try FileManager.default.copyItem(atPath: backup + "/" + name, toPath: target)
            try? FileManager.default.removeItem(atPath: directory.appending(String(name.dropLast(5)) + ".hint"))
        }
        try saved.write(to: URL(fileURLWithPath: dictionary))
        let restored = try CaskStore.open(at: directory.path, options: .readOnly)
        try assertReads(restored, model)
        try restored.close()
    }

    func testStatAndDumpShowTheDictionaries() throws {
        let (directory, _) = try storeUsingTheDictionary()
        let stat = try ToolTests.cask(["stat", directory.path, "--json"])
        XCTAssertEqual(stat.status, 0, stat.err)
        let report = try XCTUnwrap(try JSONSerialization.jsonObject(with: stat.stdout) as? [String: Any])
        let dictionaries = try XCTUnwrap(report["dictionaries"] as? [[String: Any]])
        let used = try XCTUnwrap(dictionaries.first { $0["id"] as? Int == 1 }, "\(dictionaries)")
        XCTAssertEqual(used["file"] as? String, "0000000001.dict")
        XCTAssertEqual((used["bytes"] as? NSNumber)?.int64Value,
                       (try FileManager.default.attributesOfItem(atPath: directory.appending("0000000001.dict"))[.size] as? NSNumber)?.int64Value)
        XCTAssertGreaterThan(used["compressionRatio"] as? Double ?? 0, 2, "JSON profiles against their dictionary")
        let segments = try XCTUnwrap(report["segments"] as? [[String: Any]])
        XCTAssertTrue(segments.allSatisfy { $0["dictionary"] as? Int == 1 }, "\(segments)")
        let text = try ToolTests.cask(["stat", directory.path])
        XCTAssertTrue(text.out.contains("0000000001.dict"), text.out)
        let dump = try ToolTests.cask(["dump", directory.path])
        XCTAssertEqual(dump.status, 0, dump.err)
        XCTAssertTrue(dump.out.contains(", dictionary 1"), String(dump.out.prefix(500)))
    }

    // MARK: Pieces

    func testDictionaryFileRoundTripAndRefusals() throws {
        let content = (0..<1000).map { UInt8(truncatingIfNeeded: $0) }
        let file = content.withUnsafeBytes { DictionaryFile.encode(id: 3, content: $0, ratio: 0.25) }
        XCTAssertEqual(file.withUnsafeBytes { DictionaryFile.ratio($0) }, 0.25)
        XCTAssertEqual(file.count, DictionaryFile.headerLength + 1000)
        XCTAssertEqual(try file.withUnsafeBytes { try DictionaryFile.decode($0, expectedID: 3, encryption: nil).get().content }, content)
        func refusal(_ bytes: [UInt8], id: UInt32 = 3) -> String? {
            bytes.withUnsafeBytes { raw in
                if case .failure(let reason) = DictionaryFile.decode(raw, expectedID: id, encryption: nil) { reason.description } else { nil }
            }
        }
        XCTAssertEqual(refusal(file, id: 4), "the header names dictionary 3, the file name 4")
        XCTAssertEqual(refusal(Array(file.dropLast())), "the file is 1031 bytes; its header says 1032")
        for index in 0..<file.count {
            var damaged = file
            damaged[index] ^= 0x20
            XCTAssertNotNil(refusal(damaged), "flip at \(index)")
        }
        for length in 0..<DictionaryFile.headerLength { XCTAssertNotNil(refusal(Array(file.prefix(length)))) }
    }

    func testDictionaryCompressionRoundTripsAndNeedsItsDictionary() throws {
        var samples: [UInt8] = [], sizes: [Int] = []
        for n in 0..<2000 {
            let value = Self.profile(n)
            samples += value
            sizes.append(value.count)
        }
        let content = try XCTUnwrap(DictionaryTrainer.train(samples: samples, sizes: sizes))
        XCTAssertLessThanOrEqual(content.count, DictionaryFile.maxContentLength)
        let dictionary = content.withUnsafeBytes { LZ4Dictionary(content: $0) }
        let compressor = LZ4Compressor()
        var plainTotal = 0, dictionaryTotal = 0
        for n in 5000..<5200 {
            let value = Self.profile(n)
            var output = [UInt8](repeating: 0, count: LZ4Compressor.bound(value.count))
            let plain = try XCTUnwrap(value.withUnsafeBytes { source in output.withUnsafeMutableBytes { compressor.compress(source, into: $0) } })
            let length = try XCTUnwrap(value.withUnsafeBytes { source in
                output.withUnsafeMutableBytes { compressor.compress(source, into: $0, dictionary: dictionary) }
            })
            plainTotal += plain
            dictionaryTotal += length
            let block = Array(output[0..<length])
            var expanded = [UInt8](repeating: 0, count: value.count)
            XCTAssertTrue(block.withUnsafeBytes { source in
                expanded.withUnsafeMutableBytes { LZ4Decompressor.decompress(source, into: $0, dictionary: dictionary.content) }
            })
            XCTAssertEqual(expanded, value)
            // Without the dictionary (or with too little of it) the block does not expand.
            XCTAssertFalse(block.withUnsafeBytes { source in expanded.withUnsafeMutableBytes { LZ4Decompressor.decompress(source, into: $0) } })
        }
        XCTAssertLessThan(Double(dictionaryTotal), 0.6 * Double(plainTotal), "dictionary \(dictionaryTotal), plain \(plainTotal)")
        // Too few samples: nothing to learn, no dictionary.
        XCTAssertNil(DictionaryTrainer.train(samples: Array(samples.prefix(sizes[0])), sizes: [sizes[0]]))
    }
}
