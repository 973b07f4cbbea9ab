import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// `cask backup`: run as a user would, beside a process writing the store, and SIGKILLed part way.
final class ToolBackupTests: XCTestCase {
    private func cask(_ arguments: [String], file: StaticString = #filePath, line: UInt = #line) throws -> ToolTests.Run {
        try ToolTests.cask(arguments, file: file, line: line)
    }

    /// A store of `count` keys with values LZ4 cannot shrink (`length` bytes each), over segments of
    /// `segmentSize` bytes; returns its model.
    private func fill(_ path: String, count: Int, length: Int, segmentSize: Int64) throws -> [String: [UInt8]] {
        var options = CaskStore.Options()
        options.maxSegmentSize = segmentSize
        let store = try CaskStore.open(at: path, options: options)
        var random = SeededGenerator(seed: 2412)
        var model: [String: [UInt8]] = [:]
        for n in 0..<count {
            model["key/\(n)"] = random.bytes(length)
            try store.put("key/\(n)", model["key/\(n)"]!)
        }
        try store.close()
        return model
    }

    /// Beside an open writer (which holds the lock): the backup holds everything the writer wrote,
    /// `--verify` checks it, `--json` reports it; then what must be refused is, exit 1, naming the
    /// path, and nothing is left behind.
    func testBackupBesideAWriterAndWhatItRefuses() throws {
        let dir = TemporaryDirectory("cask-tool-backup")
        defer { dir.remove() }
        let source = dir.appending("store")
        var model = try fill(source, count: 300, length: 200, segmentSize: 16 << 10)
        var options = CaskStore.Options()
        options.maxSegmentSize = 16 << 10
        let writer = try CaskStore.open(at: source, options: options)
        for n in 0..<50 {
            model["late/\(n)"] = Array("late \(n)".utf8)
            try writer.put("late/\(n)", model["late/\(n)"]!)
        }

        let run = try cask(["backup", source, dir.appending("backup"), "--verify"])
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertTrue(run.out.contains("350 keys"), run.out)
        XCTAssertTrue(run.out.contains("verified: every record intact, opens clean"), run.out)
        let copy = try CaskStore.open(at: dir.appending("backup"), options: .readOnly)
        assertStore(copy, matches: model, "the backup")
        try copy.close()

        let json = try cask(["backup", source, dir.appending("backup-2"), "--copy", "--json"])
        XCTAssertEqual(json.status, 0, json.err)
        let report = try XCTUnwrap(JSONSerialization.jsonObject(with: json.stdout) as? [String: Any])
        XCTAssertEqual(report["keys"] as? Int, 350)
        XCTAssertEqual(report["segmentsLinked"] as? Int, 0)
        XCTAssertNil(report["verificationProblems"])
        try writer.close()

        for (target, words) in [
            (dir.appending("backup"), ["exists", dir.appending("backup")]),
            (source + "/inside", ["inside the store", source + "/inside"]),
            (dir.appending("missing/backup"), ["must exist", dir.appending("missing")]),
        ] {
            let refused = try cask(["backup", source, target])
            XCTAssertEqual(refused.status, 1, target)
            for word in words { XCTAssertTrue(refused.err.contains(word), "\(target): \(refused.err)") }
        }
        let missing = try cask(["backup", dir.appending("nothing"), dir.appending("backup-3")])
        XCTAssertEqual(missing.status, 1)
        XCTAssertTrue(missing.err.contains(dir.appending("nothing")), missing.err)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted(), ["backup", "backup-2", "store"])
        XCTAssertFalse(try FileManager.default.contentsOfDirectory(atPath: source).contains { !$0.hasSuffix(".cask") && !$0.hasSuffix(".hint") && $0 != "LOCK" })
    }

    /// `cask backup --copy --verify` SIGKILLed at a random moment, 100 times: the store's files are
    /// as they were, and each destination either does not exist or is a complete backup that equals
    /// the store; what a kill leaves is only a `DEST.incomplete-<pid>-<n>` directory.
    func testKilledBackupsLeaveTheStoreAloneAndNoHalfBackup() throws {
        let dir = TemporaryDirectory("cask-tool-backup")
        defer { dir.remove() }
        let source = dir.appending("store")
        let model = try fill(source, count: 2000, length: 4000, segmentSize: 1 << 20)
        func listing() throws -> [String: Int] {
            var sizes: [String: Int] = [:]
            for name in try FileManager.default.contentsOfDirectory(atPath: source) { sizes[name] = try StoreFiles.fileSize(source + "/" + name) }
            return sizes
        }
        let before = try StoreFiles.snapshot(source), sizesBefore = try listing()
        guard FileManager.default.isExecutableFile(atPath: ToolTests.toolPath) else { return XCTFail("no cask binary: \(ToolTests.toolPath)") }

        // How long one backup takes here: the kills land anywhere from before the open to after the end.
        let started = Date()
        XCTAssertEqual(try cask(["backup", source, dir.appending("timed"), "--copy", "--verify"]).status, 0)
        let duration = Date().timeIntervalSince(started)
        try FileManager.default.removeItem(atPath: dir.appending("timed"))

        var random = SeededGenerator.fromEnvironment(fallback: 24_1205)
        var complete = 0, interrupted = 0
        for round in 0..<100 {
            let target = dir.appending("backup-\(round)")
            let process = Process()
            process.executableURL = URL(fileURLWithPath: ToolTests.toolPath)
            process.arguments = ["backup", source, target, "--copy", "--verify"]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            usleep(UInt32(Double.random(in: 0...(duration * 1.2), using: &random) * 1_000_000))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()

            XCTAssertEqual(try listing(), sizesBefore, "round \(round): the store's files changed")
            let left = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasPrefix("backup-\(round)") }
            for name in left where name != "backup-\(round)" {
                XCTAssertTrue(name.hasPrefix("backup-\(round).incomplete-\(process.processIdentifier)-"), "round \(round): \(name)")
                interrupted += 1
                try FileManager.default.removeItem(atPath: dir.appending(name))
            }
            if left.contains("backup-\(round)") {
                complete += 1
                let copy = try CaskStore.open(at: target, options: .readOnly)
                XCTAssertTrue(copy.recoveryReport.isClean, "round \(round): \(copy.recoveryReport)")
                if round % 10 == 0 { assertStore(copy, matches: model, "round \(round)") } else { XCTAssertEqual(copy.count, model.count) }
                try copy.close()
                try FileManager.default.removeItem(atPath: target)
            }
        }
        XCTAssertEqual(try StoreFiles.snapshot(source), before, "the store's bytes changed")
        XCTAssertGreaterThan(interrupted, 5, "too few kills landed inside a backup to test anything (\(complete) completed)")
        XCTAssertGreaterThan(complete, 0, "no backup completed: the kills all came too early")
    }
}
