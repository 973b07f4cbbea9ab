import Foundation
import XCTest
import Cask
import CaskTestSupport

/// Checks FORMAT.md against the code: `Tests/FormatReader/cask_reader.py` is a second reader written
/// from FORMAT.md alone (Python, standard library only). These tests run it on stores the Swift code
/// wrote and require both readers to see the same live keys and values, with and without hints, and
/// after damage.
final class SecondReaderTests: XCTestCase {
    static let testsDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    static let script = testsDirectory.deletingLastPathComponent().appendingPathComponent("FormatReader/cask_reader.py").path
    static let fixture = testsDirectory.appendingPathComponent("Fixtures/golden-v1").path

    // MARK: - Running the Python reader

    struct ReaderFailure: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }

    struct PythonOutput {
        /// Live keys and values.
        var values: [[UInt8]: [UInt8]] = [:]
        /// Keys whose winning record the reader could not read back, with the reason.
        var unreadable: [[UInt8]: String] = [:]
        /// Keys in output order (the reader sorts them by bytes).
        var order: [[UInt8]] = []
        /// The `--json` summary from stderr.
        var summary: [String: Any] = [:]

        var damaged: [(file: String, start: Int, end: Int)] {
            (summary["damaged"] as? [[String: Any]] ?? []).map {
                (file: $0["file"] as? String ?? "", start: $0["start"] as? Int ?? -1, end: $0["end"] as? Int ?? -1)
            }
        }
        var hintsUsed: Int { (summary["hints_used"] as? [Any])?.count ?? 0 }
        var hintsIgnored: Int { (summary["hints_ignored"] as? [Any])?.count ?? 0 }
        var recordsFromHints: Int { summary["records_from_hints"] as? Int ?? -1 }
        var segments: Int { summary["segments"] as? Int ?? -1 }
        var tornTail: Bool { !(summary["torn_tail"] is NSNull) && summary["torn_tail"] != nil }
    }

    static func findPython() -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/python3"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    static func runPython(_ directory: String, hints: Bool, file: StaticString = #filePath, line: UInt = #line) throws -> PythonOutput {
        guard let python = Self.findPython() else {
            XCTFail("python3 is not installed (not found on PATH): SecondReaderTests runs the independent format reader Tests/FormatReader/cask_reader.py with it. Install Python 3 (CI machines have it).", file: file, line: line)
            throw ReaderFailure(message: "python3 missing")
        }
        let scratch = TemporaryDirectory("cask-second-reader-out")
        let outPath = scratch.appending("stdout"), errPath = scratch.appending("stderr")
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        let out = try XCTUnwrap(FileHandle(forWritingAtPath: outPath))
        let err = try XCTUnwrap(FileHandle(forWritingAtPath: errPath))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [Self.script, directory, "--json"] + (hints ? [] : ["--no-hints"])
        process.standardOutput = out
        process.standardError = err
        try process.run()
        process.waitUntilExit()
        try out.close()
        try err.close()
        let stdout = try String(contentsOfFile: outPath, encoding: .utf8)
        let stderr = try String(contentsOfFile: errPath, encoding: .utf8)
        guard process.terminationStatus == 0 else {
            XCTFail("cask_reader.py exited with \(process.terminationStatus): \(stderr)", file: file, line: line)
            throw ReaderFailure(message: "cask_reader.py failed: \(stderr)")
        }
        var result = PythonOutput()
        for lineText in stdout.split(separator: "\n") where !lineText.isEmpty {
            let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(lineText.utf8)) as? [String: Any], String(lineText))
            let key = try XCTUnwrap(Self.bytes(hex: object["key_hex"] as? String), String(lineText))
            result.order.append(key)
            if let valueHex = object["value_hex"] as? String {
                result.values[key] = try XCTUnwrap(Self.bytes(hex: valueHex), String(lineText))
            } else {
                result.unreadable[key] = object["error"] as? String ?? "?"
            }
        }
        let summaryLine = stderr.split(separator: "\n").last.map(String.init) ?? "{}"
        result.summary = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(summaryLine.utf8)) as? [String: Any], stderr)
        return result
    }

    static func bytes(hex: String?) -> [UInt8]? {
        guard let hex, hex.utf8.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(hex.utf8.count / 2)
        var iterator = hex.utf8.makeIterator()
        while let high = iterator.next(), let low = iterator.next() {
            guard let h = hexDigit(high), let l = hexDigit(low) else { return nil }
            bytes.append(h << 4 | l)
        }
        return bytes
    }

    static func hexDigit(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        default: return nil
        }
    }

    // MARK: - Reading with the Swift store

    struct SwiftOutput {
        var values: [[UInt8]: [UInt8]] = [:]
        /// Keys listed by `keys()` whose `get` threw, with the error.
        var unreadable: [[UInt8]: String] = [:]
        var report: RecoveryReport
    }

    static func readWithSwift(_ directory: String) throws -> SwiftOutput {
        let store = try CaskStore.open(at: directory, options: .init(durability: .os, readOnly: true))
        var result = SwiftOutput(report: store.recoveryReport)
        for key in try store.keys() {
            do {
                if let value = try store.get(key) { result.values[key] = value }
            } catch {
                result.unreadable[key] = "\(error)"
            }
        }
        try store.close()
        return result
    }

    /// A copy of the store's segment (and, when `hints`, hint) files, so neither reader touches the original.
    static func copyStore(_ source: String, hints: Bool) throws -> TemporaryDirectory {
        let copy = TemporaryDirectory("cask-second-reader-copy")
        for name in try FileManager.default.contentsOfDirectory(atPath: source)
        where name.hasSuffix(".cask") || name.hasSuffix(".dict") || name == CompactionManifest.fileName || (hints && name.hasSuffix(".hint")) {
            try FileManager.default.copyItem(atPath: source + "/" + name, toPath: copy.appending(name))
        }
        return copy
    }

    static func describe(_ key: [UInt8]) -> String {
        key.map { String(format: "%02x", $0) }.joined()
    }

    /// Both readers on a copy of `source`, with hints and without; returns the two comparisons.
    @discardableResult
    static func compareReaders(_ source: String, label: String, file: StaticString = #filePath, line: UInt = #line) throws -> [(python: PythonOutput, swift: SwiftOutput)] {
        var results: [(python: PythonOutput, swift: SwiftOutput)] = []
        for hints in [true, false] {
            let copy = try Self.copyStore(source, hints: hints)
            let python = try Self.runPython(copy.path, hints: hints, file: file, line: line)
            let swift = try Self.readWithSwift(copy.path)
            let what = "\(label), \(hints ? "with" : "without") hints"
            XCTAssertEqual(python.order, python.order.sorted { $0.lexicographicallyPrecedes($1) }, "\(what): keys not sorted by bytes", file: file, line: line)
            XCTAssertEqual(python.order.count, Set(python.order).count, "\(what): a key printed twice", file: file, line: line)
            XCTAssertEqual(python.values.count, swift.values.count, "\(what): live key counts differ", file: file, line: line)
            for (key, value) in swift.values where python.values[key] != value {
                XCTFail("\(what): key \(Self.describe(key)): Swift has \(value.count) bytes, Python has \(python.values[key].map { "\($0.count) bytes" } ?? (python.unreadable[key] ?? "nothing"))", file: file, line: line)
            }
            for key in python.values.keys where swift.values[key] == nil {
                XCTFail("\(what): key \(Self.describe(key)) only the Python reader sees (Swift: \(swift.unreadable[key] ?? "absent"))", file: file, line: line)
            }
            XCTAssertEqual(Set(python.unreadable.keys), Set(swift.unreadable.keys), "\(what): unreadable keys differ: Python \(python.unreadable), Swift \(swift.unreadable)", file: file, line: line)
            XCTAssertEqual(python.hintsIgnored, swift.report.invalidHints.count, "\(what): \(python.summary["hints_ignored"] ?? "") vs \(swift.report.invalidHints)", file: file, line: line)
            XCTAssertEqual(python.segments, swift.report.segments, what, file: file, line: line)
            if hints {
                XCTAssertEqual(python.hintsUsed, swift.report.segmentsFromHints, "\(what): segments loaded from hints", file: file, line: line)
            } else {
                XCTAssertEqual(python.hintsUsed, 0, what, file: file, line: line)
                XCTAssertEqual(python.recordsFromHints, 0, what, file: file, line: line)
            }
            results.append((python, swift))
        }
        return results
    }

    // MARK: - Tests

    func testGoldenFixture() throws {
        let expectedStore = TemporaryDirectory("cask-second-reader-golden")
        let expected = try GoldenFixtureTests.write(into: expectedStore.path)
        let results = try Self.compareReaders(Self.fixture, label: "golden fixture")
        for (python, swift) in results {
            XCTAssertTrue(swift.report.isClean, "\(swift.report)")
            XCTAssertTrue(python.damaged.isEmpty && !python.tornTail, "\(python.summary)")
            XCTAssertTrue(python.unreadable.isEmpty, "\(python.unreadable)")
            XCTAssertEqual(python.values.count, expected.count)
            for (key, value) in expected {
                XCTAssertEqual(python.values[Array(key.utf8)], value, key)
            }
        }
        XCTAssertEqual(results[0].python.hintsUsed, 2, "the fixture's two hints should both be valid: \(results[0].python.summary)")
    }

    func testGoldenFixtureVersion2() throws {
        let expectedStore = TemporaryDirectory("cask-second-reader-golden-v2")
        let expected = try GoldenFixtureTests.writeVersion2(into: expectedStore.path)
        for (python, swift) in try Self.compareReaders(GoldenFixtureTests.fixtureV2, label: "golden fixture, version 2") {
            XCTAssertTrue(swift.report.isClean, "\(swift.report)")
            XCTAssertTrue(python.damaged.isEmpty && !python.tornTail && python.unreadable.isEmpty, "\(python.summary)")
            XCTAssertEqual(python.values.count, expected.count)
            for (key, value) in expected { XCTAssertEqual(python.values[Array(key.utf8)], value, key) }
        }
    }

    /// A random store with many small segments, binary keys, compressible and incompressible values,
    /// overwrites and deletes, written in three sessions: the last one writes no hints, so the last
    /// hinted segment is covered only in part and the segments after it have none.
    static func makeRandomStore(at directory: String, seed: UInt64) throws -> [[UInt8]: [UInt8]] {
        var rng = SeededGenerator.fromEnvironment(fallback: seed)
        print("SecondReaderTests random store seed \(rng.seed) (set CASK_TEST_SEED to replay)")
        var model: [[UInt8]: [UInt8]] = [:]
        let keys: [[UInt8]] = (0..<700).map { i in
            // Binary keys of 1 ... 40 bytes, a few sharing prefixes, one of every length 1 and 2.
            let length = i < 4 ? 1 + i % 2 : Int.random(in: 1...40, using: &rng)
            var key = rng.bytes(length)
            key[0] = UInt8(i & 0xFF)
            return key
        }
        func value(_ rng: inout SeededGenerator) -> [UInt8] {
            switch Int.random(in: 0..<10, using: &rng) {
            case 0: return []
            case 1: return rng.bytes(Int.random(in: 1..<32, using: &rng))
            case 2...4: return rng.bytes(Int.random(in: 32...900, using: &rng))  // incompressible
            case 5: return Array(repeating: UInt8.random(in: 0...255, using: &rng), count: Int.random(in: 32...3000, using: &rng))
            default:  // compressible text with some noise
                let words = ["cask", "segment", "hint", "record", "lz4", "seq", "tombstone", "crc32c"]
                var text: [UInt8] = []
                let target = Int.random(in: 32...2500, using: &rng)
                while text.count < target {
                    text += Array(words[Int.random(in: 0..<words.count, using: &rng)].utf8) + [UInt8.random(in: 32...40, using: &rng)]
                }
                return text
            }
        }
        for session in 0..<3 {
            var options = CaskStore.Options()
            options.maxSegmentSize = 16 << 10
            options.writeHints = session < 2
            let store = try CaskStore.open(at: directory, options: options)
            let operations = session == 2 ? 40 : 2000
            for _ in 0..<operations {
                let key = keys[Int.random(in: 0..<keys.count, using: &rng)]
                if Int.random(in: 0..<100, using: &rng) < 5 {
                    // An atomic batch of puts and deletes.
                    var batch = WriteBatch()
                    for _ in 0..<Int.random(in: 1...4, using: &rng) {
                        let member = keys[Int.random(in: 0..<keys.count, using: &rng)]
                        if Bool.random(using: &rng) {
                            let v = value(&rng)
                            batch.put(member, v)
                            model[member] = v
                        } else {
                            batch.delete(member)
                            model[member] = nil
                        }
                    }
                    try store.write(batch)
                    continue
                }
                if Int.random(in: 0..<100, using: &rng) < 18 {
                    let existed = try store.delete(key)
                    XCTAssertEqual(existed, model.removeValue(forKey: key) != nil)
                } else {
                    let v = value(&rng)
                    try store.put(key, v)
                    model[key] = v
                }
            }
            try store.close()
        }
        return model
    }

    func testRandomStore() throws {
        let directory = TemporaryDirectory("cask-second-reader-random")
        let model = try Self.makeRandomStore(at: directory.path, seed: 0x5EC0_4D)
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        let segmentCount = files.filter { $0.hasSuffix(".cask") }.count
        let hintCount = files.filter { $0.hasSuffix(".hint") }.count
        XCTAssertGreaterThan(segmentCount, 20, "expected many segments")
        XCTAssertGreaterThan(hintCount, 10, "expected hints")
        let results = try Self.compareReaders(directory.path, label: "random store")
        for (python, swift) in results {
            XCTAssertTrue(swift.report.isClean, "\(swift.report)")
            XCTAssertTrue(python.damaged.isEmpty && !python.tornTail, "\(python.summary)")
            XCTAssertEqual(python.values, model, "the Python reader disagrees with what was written")
            XCTAssertEqual(swift.values, model, "the Swift store disagrees with what was written")
        }
        let withHints = results[0].python
        XCTAssertGreaterThan(withHints.hintsUsed, 10, "\(withHints.summary)")
        XCTAssertGreaterThan(withHints.recordsFromHints, 0, "\(withHints.summary)")
        // The last session wrote no hints: its records are found by scanning after a hint's covered length.
        XCTAssertGreaterThan(withHints.summary["records_scanned"] as? Int ?? 0, 0, "\(withHints.summary)")
    }

    /// A store with a trained dictionary: segments of both versions, records compressed against it
    /// (written so, and compressed again by a compaction), overwrites and deletes; then the same store
    /// with its dictionary file gone, whose dictionary records both readers must refuse alike.
    func testStoreWithDictionaries() throws {
        let directory = TemporaryDirectory("cask-second-reader-dictionary")
        var options = CaskStore.Options.manualCompaction(maxSegmentSize: 256 << 10)
        options.dictionaries = DictionaryOptions(enabled: true, trainingSampleBytes: 64 << 10)
        let store = try CaskStore.open(at: directory.path, options: options)
        var model: [[UInt8]: [UInt8]] = [:]
        var n = 0
        func put() throws {
            let key = Array("user/\(n % 1500)".utf8), value = DictionaryTests.profile(n)
            try store.put(key, value)
            model[key] = value
            n += 1
        }
        let deadline = Date().addingTimeInterval(60)
        while store.dictionaryForNewSegments == nil && Date() < deadline { try put() }
        for _ in 0..<1500 { try put() }
        for k in stride(from: 0, to: 1500, by: 11) {
            try store.delete("user/\(k)")
            model[Array("user/\(k)".utf8)] = nil
        }
        _ = try store.compact()
        for _ in 0..<300 { try put() }
        try store.close()
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        XCTAssertEqual(names.filter { $0.hasSuffix(".dict") }, ["0000000001.dict"])
        for (python, swift) in try Self.compareReaders(directory.path, label: "store with a dictionary") {
            XCTAssertTrue(swift.report.isClean, "\(swift.report)")
            XCTAssertTrue(python.damaged.isEmpty && python.unreadable.isEmpty, "\(python.summary)")
            XCTAssertEqual(python.values, model)
        }
        try FileManager.default.removeItem(atPath: directory.appending("0000000001.dict"))
        for (python, _) in try Self.compareReaders(directory.path, label: "dictionary file removed") {
            XCTAssertGreaterThan(python.unreadable.count, model.count / 2, "\(python.summary)")
        }
    }

    /// A compacted store (output segments have higher ids but older records, so the active segment
    /// is not the highest id), and the same store as a crash after the manifest leaves it: inputs
    /// and outputs side by side with `COMPACTION` listing the inputs.
    func testCompactedStoreAndAnInterruptedCompaction() throws {
        let directory = TemporaryDirectory("cask-second-reader-compacted")
        let before = TemporaryDirectory("cask-second-reader-before")
        var model = try Self.makeRandomStore(at: directory.path, seed: 0xC0_4D)
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) {
            try FileManager.default.copyItem(atPath: directory.appending(name), toPath: before.appending(name))
        }
        var options = CaskStore.Options()
        options.maxSegmentSize = 16 << 10
        let store = try CaskStore.open(at: directory.path, options: options)
        let result = try store.compact()
        XCTAssertGreaterThan(result.segmentsCompacted, 5)
        try store.put([0xC0], [1, 2, 3])  // appended to the active segment, whose id is below the outputs'
        model[[0xC0]] = [1, 2, 3]
        try store.close()
        for (python, swift) in try Self.compareReaders(directory.path, label: "compacted store") {
            XCTAssertTrue(python.damaged.isEmpty && !python.tornTail, "\(python.summary)")
            XCTAssertEqual(python.values, model)
            XCTAssertEqual(swift.values, model)
        }

        // Put the older half of the replaced segments back, with the manifest listing them all: the
        // puts they hold lost their tombstones (in the newer half, or dropped by the compaction), so
        // a reader that does not honour the manifest brings deleted keys back.
        let present = Set(try FileManager.default.contentsOfDirectory(atPath: directory.path))
        let replaced = try FileManager.default.contentsOfDirectory(atPath: before.path)
            .filter { $0.hasSuffix(".cask") && !present.contains($0) }.map { UInt64($0.dropLast(5))! }.sorted()
        XCTAssertGreaterThan(replaced.count, 2)
        for id in replaced.prefix(replaced.count / 2) {
            try FileManager.default.copyItem(atPath: before.appending(SegmentName.segment(id)), toPath: directory.appending(SegmentName.segment(id)))
        }
        try Data(CompactionManifest.encode(inputs: replaced)).write(to: URL(fileURLWithPath: directory.appending(CompactionManifest.fileName)))
        for (python, swift) in try Self.compareReaders(directory.path, label: "interrupted compaction") {
            XCTAssertTrue(python.damaged.isEmpty, "\(python.summary)")
            XCTAssertEqual(python.values, model, "the Python reader read segments the manifest retired")
            XCTAssertEqual(swift.values, model)
        }
        // A writable open finishes the job.
        try CaskStore.open(at: directory.path, options: options).close()
        let after = Set(try FileManager.default.contentsOfDirectory(atPath: directory.path))
        XCTAssertFalse(after.contains(CompactionManifest.fileName))
        XCTAssertTrue(replaced.allSatisfy { !after.contains(SegmentName.segment($0)) })
        for (python, swift) in try Self.compareReaders(directory.path, label: "after finishing") {
            XCTAssertEqual(python.values, model)
            XCTAssertEqual(swift.values, model)
        }
    }

    func testCorruptedSealedSegment() throws {
        let directory = TemporaryDirectory("cask-second-reader-damage")
        let model = try Self.makeRandomStore(at: directory.path, seed: 0xDA4A6E)
        let segments = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".cask") }.sorted()
        XCTAssertGreaterThan(segments.count, 3)

        // 1. A byte in the middle of a sealed segment in the middle of the store.
        let victim = segments[segments.count / 2]
        let middle = try Self.corrupt(directory.appending(victim), at: nil)
        try checkDamage(directory.path, victim: victim, offset: middle, label: "\(victim)@\(middle)")

        // 2. A byte inside the newest value of a live key, stored raw in another sealed segment: with
        //    hints both readers must list the key and fail to read it; without, both must fall back to
        //    the key's previous record (or to nothing).
        let sealed = segments.dropLast().filter { $0 != victim }
        var target: (key: [UInt8], file: String, offset: Int)?
        search: for (key, value) in model.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) where value.count >= 64 && Set(value).count > 32 {
            for name in sealed {
                let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: directory.appending(name))))
                if let at = Self.find(value, in: bytes) {
                    target = (key, name, at + value.count / 2)
                    break search
                }
            }
        }
        let hit = try XCTUnwrap(target, "no raw live value found in a sealed segment")
        _ = try Self.corrupt(directory.appending(hit.file), at: hit.offset)
        let results = try checkDamage(directory.path, victim: hit.file, offset: hit.offset, label: "live value \(hit.file)@\(hit.offset)")
        XCTAssertNotNil(results[0].python.unreadable[hit.key], "with hints the damaged live record should be listed but unreadable")
        XCTAssertNotEqual(results[1].python.values[hit.key], model[hit.key], "without hints the damaged value must not be returned")
    }

    func testTornTailOfLastSegment() throws {
        let directory = TemporaryDirectory("cask-second-reader-torn")
        _ = try Self.makeRandomStore(at: directory.path, seed: 0x7042)
        let last = try XCTUnwrap(try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".cask") }.sorted().last)
        let handle = try XCTUnwrap(FileHandle(forUpdatingAtPath: directory.appending(last)))
        let length = try handle.seekToEnd()
        try handle.truncate(atOffset: length - 3)
        try handle.close()
        for (python, swift) in try Self.compareReaders(directory.path, label: "torn \(last)") {
            let torn = try XCTUnwrap(python.summary["torn_tail"] as? [String: Any], "\(python.summary)")
            XCTAssertEqual(torn["file"] as? String, last)
            XCTAssertEqual(torn["end"] as? Int, Int(length) - 3)
            XCTAssertTrue(python.damaged.isEmpty, "\(python.summary)")
            // A read-only Swift store reports the torn tail as its last corrupt range and cuts nothing.
            XCTAssertTrue(swift.report.truncations.isEmpty, "\(swift.report)")
            let range = try XCTUnwrap(swift.report.damagedRanges.last, "\(swift.report)")
            XCTAssertEqual(URL(fileURLWithPath: range.file).lastPathComponent, last)
            XCTAssertEqual(Int(range.offset), torn["start"] as? Int, "\(range) vs \(torn)")
        }
    }

    /// Space a writer reserved (zeros to the end of the last segment, as a crash leaves it) is
    /// neither records nor damage to either reader; a torn record before it is a torn tail to both.
    func testReservedSpaceAfterTheLastRecord() throws {
        let directory = TemporaryDirectory("cask-second-reader-reserved")
        _ = try Self.makeRandomStore(at: directory.path, seed: 0x7043)
        let last = try XCTUnwrap(try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".cask") }.sorted().last)
        let path = directory.appending(last)
        let length = try StoreFiles.fileSize(path)
        // Up to 2 MiB of zeros is reserved space (FORMAT.md); one byte more is lost records.
        for zeros in [70_000, (1 << 20) + 1, 2 << 20, (2 << 20) + 1] {
            try StoreFiles.truncate(path, to: length)
            try StoreFiles.append(path, [UInt8](repeating: 0, count: zeros))
            let reserved = zeros <= 2 << 20
            for (python, swift) in try Self.compareReaders(directory.path, label: "\(zeros) zeros after \(last)") {
                XCTAssertEqual(!python.tornTail && python.damaged.isEmpty, reserved, "\(zeros) zeros: \(python.summary)")
                XCTAssertEqual(swift.report.isClean, reserved, "\(zeros) zeros: \(swift.report)")
            }
        }
        try StoreFiles.truncate(path, to: length)
        // A torn record (its first half) with the reserved zeros after it.
        let records = try StoreFiles.records(ofSegment: path)
        let torn = try XCTUnwrap(records.last)
        try StoreFiles.truncate(path, to: torn.offset + torn.length / 2)
        try StoreFiles.append(path, [UInt8](repeating: 0, count: 5_000))
        XCTAssertEqual(length, torn.offset + torn.length)
        for (python, swift) in try Self.compareReaders(directory.path, label: "torn before reserved \(last)") {
            let tail = try XCTUnwrap(python.summary["torn_tail"] as? [String: Any], "\(python.summary)")
            XCTAssertEqual(tail["start"] as? Int, torn.offset)
            let range = try XCTUnwrap(swift.report.damagedRanges.last, "\(swift.report)")
            XCTAssertEqual(Int(range.offset), torn.offset, "\(range)")
        }
    }

    /// Flips a byte of the file (in the middle when `offset` is nil); returns its offset.
    static func corrupt(_ path: String, at offset: Int?) throws -> Int {
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let at = offset ?? bytes.count / 2
        bytes[at] ^= 0x5A
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return at
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard needle.count <= haystack.count, let first = needle.first else { return nil }
        for start in 0...(haystack.count - needle.count) where haystack[start] == first && haystack[start..<start + needle.count].elementsEqual(needle) {
            return start
        }
        return nil
    }

    /// Compares the readers on a store with one damaged byte in sealed segment `victim`. Without
    /// hints both scan that segment and must report the same single damaged range around the byte.
    @discardableResult
    func checkDamage(_ directory: String, victim: String, offset: Int, label: String, file: StaticString = #filePath, line: UInt = #line) throws -> [(python: PythonOutput, swift: SwiftOutput)] {
        let results = try Self.compareReaders(directory, label: "damaged \(label)", file: file, line: line)
        let (python, swift) = results[1]
        let pythonRanges = python.damaged.filter { $0.file == victim }
        let swiftRanges = swift.report.damagedRanges.filter { URL(fileURLWithPath: $0.file).lastPathComponent == victim }
        XCTAssertEqual(pythonRanges.count, 1, "\(label): \(python.summary)", file: file, line: line)
        XCTAssertEqual(swiftRanges.count, 1, "\(label): \(swift.report)", file: file, line: line)
        if let p = pythonRanges.first, let s = swiftRanges.first {
            XCTAssertTrue(p.start <= offset && offset < p.end, "\(label): \(p) should contain the damaged byte", file: file, line: line)
            XCTAssertEqual(Int(s.offset), p.start, "\(label): damaged range start: Swift \(s), Python \(p)", file: file, line: line)
            XCTAssertEqual(Int(s.offset + s.length), p.end, "\(label): damaged range end: Swift \(s), Python \(p)", file: file, line: line)
        }
        XCTAssertFalse(python.tornTail, "\(label): damage in a sealed segment is not a torn tail", file: file, line: line)
        return results
    }
}
