import Foundation
import XCTest
import Cask
import CaskTestSupport

/// Checks FORMAT.md against the code: `Tests/FormatReader/cask_reader.py` is a second reader written
/// from FORMAT.md alone (Python: the standard library, and the `cryptography` package for encrypted
/// stores). These tests run it on stores the Swift code wrote and require both readers to see the
/// same live keys and values, with and without hints, and after damage; encrypted stores of both
/// algorithms too (the tests at the end of the file).
final class SecondReaderTests: XCTestCase {
    static let testsDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    static let script = testsDirectory.deletingLastPathComponent().appendingPathComponent("FormatReader/cask_reader.py").path
    static let fixture = testsDirectory.appendingPathComponent("Fixtures/golden-v1").path
    /// The file that makes a store encrypted (FORMAT.md, "The `ENCRYPTION` file").
    static let encryptionFile = "ENCRYPTION"

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
        /// Every damaged range with its kind (FORMAT.md, "Reading a store", rule 6), the torn tail included.
        var damageWithKinds: [DamageSummary] {
            var ranges = (summary["damaged"] as? [[String: Any]] ?? []).map {
                DamageSummary(file: $0["file"] as? String ?? "", start: $0["start"] as? Int ?? -1, end: $0["end"] as? Int ?? -1, kind: $0["kind"] as? String ?? "?")
            }
            if let tail = summary["torn_tail"] as? [String: Any] {
                ranges.append(DamageSummary(file: tail["file"] as? String ?? "", start: tail["start"] as? Int ?? -1, end: tail["end"] as? Int ?? -1, kind: "torn-tail"))
            }
            if let torn = summary["torn_segment"] as? [String: Any] {  // a torn creation: the whole file
                ranges.append(DamageSummary(file: torn["file"] as? String ?? "", start: 0, end: torn["length"] as? Int ?? -1, kind: "torn-tail"))
            }
            return ranges
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

    /// A damaged range as both readers name it: file name, bounds and kind.
    struct DamageSummary: Hashable, CustomStringConvertible {
        var file: String
        var start: Int
        var end: Int
        var kind: String
        var description: String { "\(kind) \(file) \(start)..<\(end)" }
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    /// Runs the Python reader with `arguments` after the script (and `environment` added to this
    /// process's); returns its exit status, standard output and standard error.
    static func runPythonProcess(_ arguments: [String], environment: [String: String] = [:], file: StaticString = #filePath, line: UInt = #line) throws -> (status: Int32, stdout: String, stderr: String) {
        guard let python = Self.findPython() else {
            XCTFail("python3 is not installed (not found on PATH): SecondReaderTests runs the independent format reader Tests/FormatReader/cask_reader.py with it. Install Python 3 (CI machines have it), and its `cryptography` package for the encrypted stores.", file: file, line: line)
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
        process.arguments = [Self.script] + arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardOutput = out
        process.standardError = err
        try process.run()
        process.waitUntilExit()
        try out.close()
        try err.close()
        return (process.terminationStatus, try String(contentsOfFile: outPath, encoding: .utf8), try String(contentsOfFile: errPath, encoding: .utf8))
    }

    /// The Python reader on `directory` (with `key`, for an encrypted store): its live keys and summary.
    static func runPython(_ directory: String, hints: Bool, key: [UInt8]? = nil, file: StaticString = #filePath, line: UInt = #line) throws -> PythonOutput {
        let arguments = [directory, "--json"] + (hints ? [] : ["--no-hints"]) + (key.map { ["--key", Self.hex($0)] } ?? [])
        let (status, stdout, stderr) = try Self.runPythonProcess(arguments, file: file, line: line)
        guard status == 0 else {
            XCTFail("cask_reader.py exited with \(status): \(stderr)", file: file, line: line)
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

    static func readWithSwift(_ directory: String, key: [UInt8]? = nil) throws -> SwiftOutput {
        var options = CaskStore.Options(durability: .os, readOnly: true)
        if let key { options.encryption = .key(key) }
        let store = try CaskStore.open(at: directory, options: options)
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
        where name.hasSuffix(".cask") || name.hasSuffix(".dict") || name == CompactionManifest.fileName || name == Self.encryptionFile
            || (hints && name.hasSuffix(".hint")) {
            try FileManager.default.copyItem(atPath: source + "/" + name, toPath: copy.appending(name))
        }
        return copy
    }

    static func describe(_ key: [UInt8]) -> String {
        key.map { String(format: "%02x", $0) }.joined()
    }

    /// Both readers on a copy of `source`, with hints and without: the same live keys and values,
    /// and, where `damage` is true, the same damaged ranges with the same kinds (the read-only
    /// open's report, torn tails included); returns the two comparisons.
    @discardableResult
    static func compareReaders(
        _ source: String, label: String, key: [UInt8]? = nil, damage: Bool = true, file: StaticString = #filePath, line: UInt = #line
    ) throws -> [(python: PythonOutput, swift: SwiftOutput)] {
        var results: [(python: PythonOutput, swift: SwiftOutput)] = []
        for hints in [true, false] {
            let copy = try Self.copyStore(source, hints: hints)
            let python = try Self.runPython(copy.path, hints: hints, key: key, file: file, line: line)
            let swift = try Self.readWithSwift(copy.path, key: key)
            XCTAssertEqual(python.summary["encrypted"] as? Bool, key != nil, "\(label): \(python.summary)", file: file, line: line)
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
            if damage {
                let swiftRanges = Set(swift.report.damagedRanges.map {
                    DamageSummary(file: URL(fileURLWithPath: $0.file).lastPathComponent, start: Int($0.offset), end: Int($0.offset + $0.length), kind: $0.kind.rawValue)
                })
                XCTAssertEqual(Set(python.damageWithKinds), swiftRanges, "\(what): damage differs: Python \(python.summary), Swift \(swift.report)", file: file, line: line)
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
    /// hinted segment is covered only in part and the segments after it have none. With `expiries`,
    /// some puts expire (in the past: the key reads as absent; or in 2^50 ms) and the second session
    /// compacts the store half way; `encryption` is the store's.
    /// `operations`: of each of the first two sessions (the third writes 40, without hints).
    static func makeRandomStore(
        at directory: String, seed: UInt64, encryption: Encryption = .none, expiries: Bool = false, operations sessionOperations: Int = 2000
    ) throws -> [[UInt8]: [UInt8]] {
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
            options.encryption = encryption
            let store = try CaskStore.open(at: directory, options: options)
            let operations = session == 2 ? 40 : sessionOperations
            for operation in 0..<operations {
                let key = keys[Int.random(in: 0..<keys.count, using: &rng)]
                if expiries {
                    if session == 1 && operation == operations / 2 {
                        XCTAssertGreaterThan(try store.compact().segmentsCompacted, 0, "the compaction of the random store")
                    }
                    if Int.random(in: 0..<100, using: &rng) < 4 {
                        let v = value(&rng), expired = Bool.random(using: &rng)
                        try store.put(key, v, expiresAtMilliseconds: expired ? 1_000 : 1 << 50)
                        model[key] = expired ? nil : v
                        continue
                    }
                }
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
                    let modelled = model.removeValue(forKey: key) != nil
                    // (`delete` of a key whose newest put has expired returns true: not compared.)
                    if !expiries { XCTAssertEqual(existed, modelled) }
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

// MARK: - Encrypted stores (FORMAT.md, "Encryption")

extension SecondReaderTests {
    static let storeKey: [UInt8] = (0..<32).map { UInt8(truncatingIfNeeded: 0xA0 + $0 * 7) }
    static let otherKey: [UInt8] = (0..<32).map { UInt8(truncatingIfNeeded: 0x11 + $0 * 3) }

    /// The algorithms this machine's libsodium runs (AES-256-GCM needs AES-NI); the Python reader
    /// runs both anywhere.
    static var algorithms: [EncryptionAlgorithm] {
        EncryptionAlgorithm.allCases.filter(\.isAvailable)
    }

    static func checkAlgorithms(file: StaticString = #filePath, line: UInt = #line) throws -> [EncryptionAlgorithm] {
        if !EncryptionAlgorithm.aes256gcm.isAvailable {
            print("SecondReaderTests: AES-256-GCM is not available on this CPU (no AES-NI): only ChaCha20-Poly1305 stores are written")
        }
        XCTAssertTrue(algorithms.contains(.xchacha20poly1305), file: file, line: line)
        return algorithms
    }

    static func crc32c(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        bytes.withUnsafeBytes { CRC32C.checksum(of: $0) }
    }

    /// Flips the byte at `offset` of the file and writes the crc32c of `covered` (which holds the
    /// byte) at `crcOffset`, so that the checksum holds and only the authentication can tell.
    static func flip(_ path: String, at offset: Int, mask: UInt8 = 0x5A, fixingCRCAt crcOffset: Int, of covered: Range<Int>) throws {
        var bytes = try StoreFiles.read(path)
        bytes[offset] ^= mask
        let crc = crc32c(bytes[covered])
        for i in 0..<4 { bytes[crcOffset + i] = UInt8(truncatingIfNeeded: crc >> (8 * UInt32(i))) }
        try StoreFiles.write(path, bytes)
    }

    /// The records and damage `CaskStore.inspect` finds in one segment.
    static func inspect(_ directory: String, segment: UInt64, key: [UInt8]) throws -> [InspectedRecord] {
        var records: [InspectedRecord] = []
        try CaskStore.inspect(at: directory, segment: segment, encryption: .key(key)) { item in
            if case .record(let record) = item { records.append(record) }
        }
        return records
    }

    /// Both readers on a copy of `source`: the same live keys and values (compareReaders), and,
    /// where `damage` is true, the same damaged ranges with the same kinds.
    @discardableResult
    static func compareEncrypted(_ source: String, label: String, key: [UInt8] = storeKey, damage: Bool = true, file: StaticString = #filePath, line: UInt = #line) throws -> [(python: PythonOutput, swift: SwiftOutput)] {
        try Self.compareReaders(source, label: label, key: key, damage: damage, file: file, line: line)
    }

    func testEncryptedRandomStores() throws {
        for algorithm in try Self.checkAlgorithms() {
            let directory = TemporaryDirectory("cask-second-reader-encrypted")
            let model = try Self.makeRandomStore(at: directory.path, seed: 0xE4C_0001, encryption: .key(Self.storeKey, algorithm: algorithm), expiries: true)
            let files = try FileManager.default.contentsOfDirectory(atPath: directory.path)
            XCTAssertTrue(files.contains(Self.encryptionFile), "\(files)")
            XCTAssertGreaterThan(files.filter { $0.hasSuffix(".hint") }.count, 10, "expected hints")
            // The values must not be on disk in the clear.
            let sample = try XCTUnwrap(model.values.first { $0.count >= 64 && Set($0).count > 32 })
            for name in files where name.hasSuffix(".cask") {
                XCTAssertNil(Self.find(sample, in: try StoreFiles.read(directory.appending(name))), "a value in the clear in \(name)")
            }
            let results = try Self.compareEncrypted(directory.path, label: "encrypted random store (\(algorithm))")
            for (python, swift) in results {
                XCTAssertTrue(swift.report.isClean, "\(swift.report)")
                XCTAssertTrue(python.damaged.isEmpty && !python.tornTail, "\(python.summary)")
                XCTAssertEqual(python.summary["algorithm"] as? String, algorithm == .aes256gcm ? "AES-256-GCM" : "ChaCha20-Poly1305")
                XCTAssertEqual(python.values, model, "the Python reader disagrees with what was written")
                XCTAssertEqual(swift.values, model, "the Swift store disagrees with what was written")
            }
            XCTAssertGreaterThan(results[0].python.hintsUsed, 10, "\(results[0].python.summary)")
            XCTAssertGreaterThan(results[0].python.summary["records_scanned"] as? Int ?? 0, 0, "\(results[0].python.summary)")
        }
    }

    /// An encrypted store with a trained dictionary (version 2 dictionary file, segments that name it
    /// by id and salt, records compressed against it and sealed), then the dictionary file with a
    /// flipped byte (its checksum broken; then its checksum fixed, so only its tag fails), and gone.
    func testEncryptedStoreWithADictionary() throws {
        for algorithm in try Self.checkAlgorithms() {
            let directory = TemporaryDirectory("cask-second-reader-encrypted-dictionary")
            var options = CaskStore.Options.manualCompaction(maxSegmentSize: 256 << 10)
            options.dictionaries = DictionaryOptions(enabled: true, trainingSampleBytes: 32 << 10)
            options.encryption = .key(Self.storeKey, algorithm: algorithm)
            let store = try CaskStore.open(at: directory.path, options: options)
            var model: [[UInt8]: [UInt8]] = [:]
            var n = 0
            func put() throws {
                let key = Array("user/\(n % 700)".utf8), value = DictionaryTests.profile(n)
                try store.put(key, value)
                model[key] = value
                n += 1
            }
            let deadline = Date().addingTimeInterval(60)
            while store.dictionaryForNewSegments == nil && Date() < deadline { try put() }
            XCTAssertNotNil(store.dictionaryForNewSegments, "no dictionary trained")
            for _ in 0..<700 { try put() }
            for k in stride(from: 0, to: 700, by: 11) {
                try store.delete("user/\(k)")
                model[Array("user/\(k)".utf8)] = nil
            }
            _ = try store.compact()
            for _ in 0..<200 { try put() }
            try store.close()
            let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
            XCTAssertEqual(names.filter { $0.hasSuffix(".dict") }, ["0000000001.dict"])
            for (python, swift) in try Self.compareEncrypted(directory.path, label: "encrypted store with a dictionary (\(algorithm))") {
                XCTAssertTrue(swift.report.isClean, "\(swift.report)")
                XCTAssertTrue(python.damaged.isEmpty && python.unreadable.isEmpty, "\(python.summary)")
                XCTAssertEqual(python.values, model)
            }
            let dictionary = directory.appending("0000000001.dict")
            let original = try StoreFiles.read(dictionary)
            XCTAssertEqual(Array(original[0..<12]), Array("CASKDCT\0".utf8) + [2, 0, 64, 0], "a version 2 dictionary file")
            let contentEnd = original.count, middle = 64 + (contentEnd - 64) / 2
            let damages: [(String, () throws -> Void)] = [
                ("a flipped byte in the sealed content", { _ = try Self.corrupt(dictionary, at: middle) }),
                ("a flipped byte in the sealed content, its checksum fixed", { try Self.flip(dictionary, at: middle, fixingCRCAt: 56, of: 64..<contentEnd) }),
                ("a flipped byte in the header's salt, its checksum fixed", { try Self.flip(dictionary, at: 45, fixingCRCAt: 60, of: 0..<60) }),
                ("the file removed", { try FileManager.default.removeItem(atPath: dictionary) }),
            ]
            for (what, damage) in damages {
                try StoreFiles.write(dictionary, original)
                try damage()
                for (python, swift) in try Self.compareEncrypted(directory.path, label: "dictionary: \(what) (\(algorithm))") {
                    XCTAssertGreaterThan(python.unreadable.count, model.count / 4, "\(what): \(python.summary)")
                    XCTAssertEqual(Set(python.unreadable.keys), Set(swift.unreadable.keys), what)
                    XCTAssertTrue(python.damaged.isEmpty, "\(what): \(python.summary)")
                }
            }
        }
    }

    /// Damage in encrypted stores of both algorithms, each case on a fresh copy of one store: both
    /// readers must report the same ranges with the same kinds, and read the same keys and values.
    func testDamagedEncryptedStores() throws {
        for algorithm in try Self.checkAlgorithms() {
            let original = TemporaryDirectory("cask-second-reader-encrypted-damage")
            let encryption = Encryption.key(Self.storeKey, algorithm: algorithm)
            // A smaller store than the other tests' (each scenario below has both readers read it twice).
            let model = try Self.makeRandomStore(at: original.path, seed: 0xDA4A_0E4C, encryption: encryption, expiries: true, operations: 700)
            let ids = try StoreFiles.segmentIDs(in: original.path)
            let hinted = ids.dropLast().filter { FileManager.default.fileExists(atPath: StoreFiles.hintPath(original.path, $0)) }
            XCTAssertGreaterThan(hinted.count, 6, "\(ids)")
            let victim = hinted[hinted.count / 2], neighbour = hinted[hinted.count / 2 + 1]
            let victimName = SegmentName.segment(victim)
            let records = try Self.inspect(original.path, segment: victim, key: Self.storeKey)
            var newest: [[UInt8]: UInt64] = [:]
            for id in ids {
                for record in try Self.inspect(original.path, segment: id, key: Self.storeKey) where record.type != .batch {
                    newest[record.key] = max(newest[record.key] ?? 0, record.seq)
                }
            }
            // A put of the victim segment, past its first record: its key's newest record, live.
            let put = try XCTUnwrap(records.dropFirst().first {
                $0.type == .put && $0.valueBytes >= 8 && model[$0.key] != nil && newest[$0.key] == $0.seq && $0.expiresAtMilliseconds == nil
            }, "no live put in \(victimName)")
            let start = Int(put.offset), end = start + Int(put.bytes)

            func scenario(_ what: String, _ damage: (String) throws -> Void) throws -> [(python: PythonOutput, swift: SwiftOutput)] {
                let directory = TemporaryDirectory("cask-second-reader-encrypted-damaged")
                try StoreFiles.copy(from: original.path, to: directory.path)
                try damage(directory.path)
                return try Self.compareEncrypted(directory.path, label: "\(what) (\(algorithm))")
            }
            /// Without hints, one damaged range in `file` holding `offset`, of `kind`.
            func assertOneRange(_ results: [(python: PythonOutput, swift: SwiftOutput)], in file: String, holding offset: Int, kind: String, _ what: String, line: UInt = #line) {
                let ranges = results[1].python.damageWithKinds.filter { $0.file == file }
                XCTAssertEqual(ranges.count, 1, "\(what): \(results[1].python.summary)", line: line)
                if let range = ranges.first {
                    XCTAssertTrue(range.start <= offset && offset < range.end && range.kind == kind, "\(what): \(range)", line: line)
                }
            }

            // A record: a byte of its sealed payload (the checksum fails), the same byte with the
            // checksum fixed (the tag fails), a byte of its header with the checksum fixed (the
            // header is associated data).
            // Cases that only a checksum decides (and those that do not depend on the algorithm) run
            // with one algorithm; those the authentication decides with both.
            let everyCase = algorithm == .xchacha20poly1305
            var results: [(python: PythonOutput, swift: SwiftOutput)]
            if everyCase {
                results = try scenario("a record's payload byte") { try _ = Self.corrupt($0 + "/" + victimName, at: end - 17) }
                assertOneRange(results, in: victimName, holding: end - 17, kind: "record", "payload byte")
                XCTAssertNotNil(results[0].python.unreadable[put.key], "with its hint the damaged record is its key's: \(results[0].python.summary)")
            }
            results = try scenario("a record's payload byte, the checksum fixed") {
                try Self.flip($0 + "/" + victimName, at: end - 17, fixingCRCAt: start, of: (start + 4)..<end)
            }
            assertOneRange(results, in: victimName, holding: end - 17, kind: "record", "payload byte, checksum fixed")
            XCTAssertNotNil(results[0].python.unreadable[put.key], "\(results[0].python.summary)")
            XCTAssertNotEqual(results[1].python.values[put.key], model[put.key])
            results = try scenario("a record's tag byte, the checksum fixed") {
                try Self.flip($0 + "/" + victimName, at: end - 3, fixingCRCAt: start, of: (start + 4)..<end)
            }
            assertOneRange(results, in: victimName, holding: end - 3, kind: "record", "tag byte, checksum fixed")
            results = try scenario("a record's seq, the checksum fixed") {
                try Self.flip($0 + "/" + victimName, at: start + 6, mask: 0x02, fixingCRCAt: start, of: (start + 4)..<end)
            }
            assertOneRange(results, in: victimName, holding: start + 6, kind: "record", "seq, checksum fixed")

            // A segment header: a byte of its salt (the checksum fails), then with the checksum
            // fixed (the tag fails): the whole segment is damage, its hint unused.
            let victimLength = try StoreFiles.fileSize(StoreFiles.segmentPath(original.path, victim))
            for fixed in everyCase ? [false, true] : [true] {
                results = try scenario("a segment header's salt byte\(fixed ? ", the checksum fixed" : "")") {
                    let path = $0 + "/" + victimName
                    if fixed { try Self.flip(path, at: 60, fixingCRCAt: 104, of: 0..<104) } else { _ = try Self.corrupt(path, at: 60) }
                }
                for (python, _) in results {
                    XCTAssertEqual(python.damageWithKinds, [DamageSummary(file: victimName, start: 0, end: victimLength, kind: "segment-header")], "\(python.summary)")
                }
            }
            // A hint: a byte of a block (the block's checksum fails), the same with the block's
            // checksum fixed (its tag fails), a header byte with the header's checksum fixed (the
            // header's tag fails): ignored, the segment scanned, nothing damaged.
            let hintPath = StoreFiles.hintPath(original.path, victim)
            let hint = try StoreFiles.read(hintPath)
            XCTAssertEqual(Array(hint[8..<12]), [4, 0, 96, 0], "a version 4 hint")
            let storedLength = Int(hint[100]) | Int(hint[101]) << 8 | Int(hint[102]) << 16 | Int(hint[103]) << 24
            let blockByte = 112 + storedLength / 2
            let hintDamages: [(String, (String) throws -> Void)] = [
                ("a hint block byte", { _ = try Self.corrupt($0, at: blockByte) }),
                ("a hint block byte, the block checksum fixed", { try Self.flip($0, at: blockByte, fixingCRCAt: 108, of: 112..<(112 + storedLength)) }),
                ("a hint header byte (its salt), the header checksum fixed", { try Self.flip($0, at: 60, fixingCRCAt: 92, of: 0..<92) }),
                ("a hint header byte (its segment salt), the header checksum fixed", { try Self.flip($0, at: 44, fixingCRCAt: 92, of: 0..<92) }),
            ]
            for (what, damage) in hintDamages where everyCase || what.contains("fixed") {
                results = try scenario(what) { try damage(StoreFiles.hintPath($0, victim)) }
                XCTAssertEqual(results[0].python.hintsIgnored, 1, "\(what): \(results[0].python.summary)")
                for (python, swift) in results {
                    XCTAssertTrue(python.damageWithKinds.isEmpty, "\(what): \(python.summary)")
                    XCTAssertEqual(python.values, model, what)
                    XCTAssertEqual(swift.values, model, what)
                }
            }
            guard everyCase else { continue }
            // A batch member's tag byte in a sealed segment: the member is record damage, the rest
            // of its batch (members and commit record, adjacent) one uncommitted-batch range.
            var batchMember: (segment: UInt64, member: InspectedRecord)?
            search: for id in hinted {
                let inSegment = try Self.inspect(original.path, segment: id, key: Self.storeKey)
                for commit in inSegment where commit.type == .batch && (commit.committedSeqs?.count ?? 0) >= 2 {
                    if let first = inSegment.first(where: { $0.isBatchMember && $0.seq == commit.committedSeqs?.lowerBound }) {
                        batchMember = (id, first)
                        break search
                    }
                }
            }
            let (batchSegment, member) = try XCTUnwrap(batchMember, "no batch of two or more members in a hinted segment")
            results = try scenario("a batch member's tag byte") {
                _ = try Self.corrupt(StoreFiles.segmentPath($0, batchSegment), at: Int(member.offset) + member.bytes - 3)
            }
            XCTAssertEqual(results[1].python.damageWithKinds.map(\.kind).sorted(), ["record", "uncommitted-batch"], "\(results[1].python.summary)")
            // Segments renamed into each other's place, a segment of another store under the same
            // key, one of a store that is not encrypted: each is damage as a whole.
            results = try scenario("two segments swapped") { directory in
                let a = StoreFiles.segmentPath(directory, victim), b = StoreFiles.segmentPath(directory, neighbour)
                try FileManager.default.moveItem(atPath: a, toPath: a + ".swap")
                try FileManager.default.moveItem(atPath: b, toPath: a)
                try FileManager.default.moveItem(atPath: a + ".swap", toPath: b)
            }
            XCTAssertEqual(Set(results[1].python.damageWithKinds.map(\.file)), [victimName, SegmentName.segment(neighbour)], "\(results[1].python.summary)")
            XCTAssertTrue(results[1].python.damageWithKinds.allSatisfy { $0.kind == "segment-header" && $0.start == 0 }, "\(results[1].python.summary)")
            let unused = try XCTUnwrap((1..<victim).first { !ids.contains($0) }, "no unused segment id below \(victim)")
            for (what, other) in [("another store's segment, same key", encryption), ("a segment that is not encrypted", Encryption.none)] {
                let store = TemporaryDirectory("cask-second-reader-other-store")
                let writer = try CaskStore.open(at: store.path, options: { var o = CaskStore.Options.manualCompaction(); o.encryption = other; return o }())
                try writer.put("other/key", Array("a value of the other store".utf8))
                try writer.close()
                let foreign = try StoreFiles.read(StoreFiles.segmentPath(store.path, 1))
                results = try scenario(what) { try StoreFiles.write(StoreFiles.segmentPath($0, unused), foreign) }
                for (python, _) in results {
                    XCTAssertEqual(python.damageWithKinds, [DamageSummary(file: SegmentName.segment(unused), start: 0, end: foreign.count, kind: "segment-header")], "\(what): \(python.summary)")
                    XCTAssertNil(python.values[Array("other/key".utf8)], what)
                }
            }

            // A hint of an earlier file under the same id: a repair rewrites the damaged segment
            // under a new salt (and writes its hint again); the old hint put back, whose checksums
            // and tags hold and whose segment id is right, names the old salt and is refused.
            let oldHint = try StoreFiles.read(StoreFiles.hintPath(original.path, victim))
            let backup = TemporaryDirectory("cask-second-reader-repair-backup")
            try FileManager.default.removeItem(atPath: backup.path)
            results = try scenario("the hint of the segment before a repair rewrote it") { directory in
                _ = try Self.corrupt(directory + "/" + victimName, at: end - 17)
                _ = try CaskStore.repair(at: directory, backupDirectory: backup.path, encryption: encryption)
                let rewritten = try StoreFiles.read(StoreFiles.segmentPath(directory, victim))
                XCTAssertNotEqual(Array(rewritten[56..<72]), Array(oldHint[40..<56]), "the repair kept the segment's salt")
                try StoreFiles.write(StoreFiles.hintPath(directory, victim), oldHint)
            }
            XCTAssertEqual(results[0].python.hintsIgnored, 1, "\(results[0].python.summary)")
            let reason = (results[0].python.summary["hints_ignored"] as? [[String: Any]])?.first?["reason"] as? String ?? ""
            XCTAssertTrue(reason.contains("segment salt"), reason)
            XCTAssertTrue(results[0].python.damageWithKinds.isEmpty, "\(results[0].python.summary)")

            // The end of the store: the active segment torn (a torn tail), and a sealed segment that
            // lost its last record while its hint still lists it (a lost tail).
            let last = try XCTUnwrap(ids.last)
            let lastLength = try StoreFiles.fileSize(StoreFiles.segmentPath(original.path, last))
            results = try scenario("the active segment torn") { try StoreFiles.truncate(StoreFiles.segmentPath($0, last), to: lastLength - 3) }
            for (python, _) in results {
                let tail = python.damageWithKinds.filter { $0.kind == "torn-tail" }
                XCTAssertEqual(tail.map(\.file), [SegmentName.segment(last)], "\(python.summary)")
                XCTAssertEqual(tail.first?.end, lastLength - 3)
            }
            for (what, length) in [("the active segment's creation torn", 100), ("the active segment's header torn", 108)] {
                results = try scenario(what) { directory in
                    try StoreFiles.truncate(StoreFiles.segmentPath(directory, last), to: length)
                    if length == 108 { _ = try Self.corrupt(StoreFiles.segmentPath(directory, last), at: 60) }
                }
                XCTAssertEqual(results[1].python.damageWithKinds.map(\.kind), ["torn-tail"], "\(what): \(results[1].python.summary)")
            }
            results = try scenario("the active segment's header damaged") { try Self.flip(StoreFiles.segmentPath($0, last), at: 60, fixingCRCAt: 104, of: 0..<104) }
            XCTAssertEqual(results[1].python.damageWithKinds, [DamageSummary(file: SegmentName.segment(last), start: 0, end: lastLength, kind: "segment-header")], "\(results[1].python.summary)")
            let lastRecord = try XCTUnwrap(records.last)
            results = try scenario("a sealed segment that lost its last record") {
                try StoreFiles.truncate(StoreFiles.segmentPath($0, victim), to: Int(lastRecord.offset))
            }
            XCTAssertEqual(results[0].python.damageWithKinds, [DamageSummary(file: victimName, start: Int(lastRecord.offset), end: victimLength, kind: "record")], "\(results[0].python.summary)")
        }
    }

    /// The key reaches the Python reader by `--key`, `--key-file` (32 bytes, or 64 hexadecimal digits
    /// and a newline) or `CASK_KEY`; a wrong key, no key, a key for a plain store and a damaged
    /// `ENCRYPTION` file are refused (exit 3) with nothing read, as the Swift open refuses them.
    func testKeysThePythonReaderRefuses() throws {
        let directory = TemporaryDirectory("cask-second-reader-keys")
        var options = CaskStore.Options.manualCompaction()
        options.encryption = .key(Self.storeKey, algorithm: .xchacha20poly1305)
        let store = try CaskStore.open(at: directory.path, options: options)
        try store.put("secret", Array("a value only the key reads".utf8))
        try store.close()
        let expected = #"{"key_hex": "\#(Self.hex(Array("secret".utf8)))", "value_hex": "\#(Self.hex(Array("a value only the key reads".utf8)))"}"# + "\n"

        let keyFiles = TemporaryDirectory("cask-second-reader-key-files")
        try StoreFiles.write(keyFiles.appending("hex"), Array((Self.hex(Self.storeKey) + "\n").utf8))
        try StoreFiles.write(keyFiles.appending("raw"), Self.storeKey)
        for (how, arguments, environment) in [
            ("--key", ["--key", Self.hex(Self.storeKey)], [:]),
            ("--key-file with hexadecimal digits", ["--key-file", keyFiles.appending("hex")], [:]),
            ("--key-file with the 32 bytes", ["--key-file", keyFiles.appending("raw")], [:]),
            ("CASK_KEY", [], ["CASK_KEY": Self.hex(Self.storeKey).uppercased()]),
        ] as [(String, [String], [String: String])] {
            let run = try Self.runPythonProcess([directory.path] + arguments, environment: environment)
            XCTAssertEqual(run.status, 0, "\(how): \(run.stderr)")
            XCTAssertEqual(run.stdout, expected, how)
        }

        func refused(_ arguments: [String], _ environment: [String: String] = ["CASK_KEY": ""], saying: String, _ what: String, line: UInt = #line) throws {
            let run = try Self.runPythonProcess(arguments, environment: environment)
            XCTAssertEqual(run.status, 3, "\(what): \(run.stderr)", line: line)
            XCTAssertEqual(run.stdout, "", "\(what): nothing may be read", line: line)
            XCTAssertTrue(run.stderr.contains(saying), "\(what): \(run.stderr)", line: line)
        }
        try refused([directory.path, "--key", Self.hex(Self.otherKey)], saying: "wrong key", "another key")
        XCTAssertThrowsError(try Self.readWithSwift(directory.path, key: Self.otherKey)) { error in
            XCTAssertEqual(error as? CaskError, .wrongKey(path: directory.path))
        }
        try refused([directory.path], saying: "the store is encrypted", "no key")
        XCTAssertThrowsError(try Self.readWithSwift(directory.path)) { error in
            XCTAssertEqual(error as? CaskError, .encryptionKeyRequired(path: directory.path))
        }
        try refused([Self.fixture, "--key", Self.hex(Self.storeKey)], saying: "not encrypted", "a key for a plain store")
        XCTAssertThrowsError(try Self.readWithSwift(Self.fixture, key: Self.storeKey)) { error in
            XCTAssertEqual(error as? CaskError, .notEncrypted(path: Self.fixture))
        }

        // A damaged ENCRYPTION file (its checksum, then its key check with the checksum fixed),
        // and none at all beside encrypted segments.
        let path = directory.appending(Self.encryptionFile)
        let identity = try StoreFiles.read(path)
        for (what, damage) in [
            ("a flipped byte", { _ = try Self.corrupt(path, at: 20) }),
            ("a flipped key check, its checksum fixed", { try Self.flip(path, at: 50, fixingCRCAt: 64, of: 0..<64) }),
        ] as [(String, () throws -> Void)] {
            try StoreFiles.write(path, identity)
            try damage()
            try refused([directory.path, "--key", Self.hex(Self.storeKey)], saying: Self.encryptionFile, "ENCRYPTION: \(what)")
            XCTAssertThrowsError(try Self.readWithSwift(directory.path, key: Self.storeKey), what)
        }
        try FileManager.default.removeItem(atPath: path)
        try refused([directory.path], saying: "a segment of an encrypted store", "segments without ENCRYPTION")
        XCTAssertThrowsError(try Self.readWithSwift(directory.path))
    }

    /// Hints of every version: the fixtures with the hints Cask wrote before entries were
    /// delta-coded (versions 1 and 2), and a store holding both kinds — golden-v1 with its version 1
    /// hints, written on until new segments are sealed with version 3 hints. Both readers use every
    /// hint and agree.
    func testHintsOfEveryVersion() throws {
        func hintVersions(_ directory: String) throws -> Set<Int> {
            Set(try GoldenFixtureTests.files(in: directory).filter { $0.key.hasSuffix(".hint") }.map { Int($0.value[8]) | Int($0.value[9]) << 8 })
        }
        let store = TemporaryDirectory("cask-second-reader-hint-versions")
        try StoreFiles.copy(from: GoldenFixtureTests.fixture, to: store.path)
        try StoreFiles.copy(from: GoldenFixtureTests.olderHints("golden-v1-hints-v1"), to: store.path)
        XCTAssertEqual(try hintVersions(store.path), [1])
        let old = try Self.compareReaders(store.path, label: "golden fixture, version 1 hints")
        XCTAssertEqual(old[0].python.hintsUsed, 2, "\(old[0].python.summary)")
        XCTAssertTrue(old.allSatisfy { $0.swift.report.isClean }, "\(old.map { $0.swift.report })")

        let writer = try CaskStore.open(at: store.path, options: .manualCompaction(maxSegmentSize: 4096))
        for i in 0..<80 { try writer.put("more/\(i)", Array(String(repeating: "value \(i) ", count: 5).utf8)) }
        try writer.delete("user/42")
        try writer.close()
        XCTAssertEqual(try hintVersions(store.path), [1, 3], "the untouched segment keeps its version 1 hint")
        let mixed = try Self.compareReaders(store.path, label: "version 1 and 3 hints in one store")
        XCTAssertEqual(mixed[0].python.hintsUsed, mixed[0].swift.report.segments, "\(mixed[0].python.summary)")
        XCTAssertTrue(mixed.allSatisfy { $0.swift.report.isClean }, "\(mixed.map { $0.swift.report })")
        XCTAssertNil(mixed[0].python.values[Array("user/42".utf8)])
        XCTAssertEqual(mixed[0].python.values[Array("more/79".utf8)], Array(String(repeating: "value 79 ", count: 5).utf8))

        let encrypted = try Self.compareEncrypted(
            GoldenFixtureTests.olderHints("golden-v3-hints-v2"), label: "encrypted store, version 2 hints", key: GoldenFixtureTests.keyV3)
        XCTAssertEqual(try hintVersions(GoldenFixtureTests.olderHints("golden-v3-hints-v2")), [2])
        XCTAssertEqual(encrypted[0].python.hintsUsed, 2, "\(encrypted[0].python.summary)")
        XCTAssertTrue(encrypted.allSatisfy { $0.swift.report.isClean }, "\(encrypted.map { $0.swift.report })")
    }

    /// The checked-in encrypted store (Fixtures/golden-v3, GoldenFixtureTests.writeVersion3): both
    /// readers read what the operations that made it left.
    func testGoldenFixtureVersion3() throws {
        let expectedStore = TemporaryDirectory("cask-second-reader-golden-v3")
        let expected = try GoldenFixtureTests.writeVersion3(into: expectedStore.path)
        for (python, swift) in try Self.compareEncrypted(GoldenFixtureTests.fixtureV3, label: "golden fixture, version 3", key: GoldenFixtureTests.keyV3) {
            XCTAssertTrue(swift.report.isClean, "\(swift.report)")
            XCTAssertTrue(python.damageWithKinds.isEmpty && python.unreadable.isEmpty, "\(python.summary)")
            XCTAssertEqual(python.summary["algorithm"] as? String, "ChaCha20-Poly1305")
            XCTAssertEqual(python.values.count, expected.count)
            for (key, value) in expected { XCTAssertEqual(python.values[Array(key.utf8)], value, key) }
        }
    }
}
