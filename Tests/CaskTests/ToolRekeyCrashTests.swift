import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// `cask rekey` SIGKILLed at random moments: it is as safe to interrupt as a compaction. At every
/// instant the store's directory is the whole store, as it was (plain, under the old key) or rekeyed
/// (under the new key) with every entry; what a kill leaves besides is one `<store>.cask-rekey-`
/// directory: the new store before the swap, or the old one after it, which the store's next
/// writable open deletes.
final class ToolRekeyCrashTests: XCTestCase {
    func testKilledRekeysLeaveTheOldStoreOrTheNewOneWhole() throws {
        guard FileManager.default.isExecutableFile(atPath: ToolTests.toolPath) else { return XCTFail("no cask binary: \(ToolTests.toolPath)") }
        let dir = TemporaryDirectory("cask-tool-rekey")
        defer { dir.remove() }
        let path = dir.appending("store")
        let keys = [EncryptionTests.key, EncryptionTests.otherKey]
        let keyFiles = try keys.enumerated().map { index, key in
            let file = dir.appending("key-\(index)")
            try Data(key.hexKeyFile.utf8).write(to: URL(fileURLWithPath: file))
            return file
        }
        var model: [String: [UInt8]] = [:]
        var random = SeededGenerator(seed: 26_1205)
        let store = try CaskStore.open(at: path, options: EncryptionTests.options(key: keys[0], maxSegmentSize: 256 << 10))
        for n in 0..<10_000 {
            model["key/\(n)"] = random.bytes(Int.random(in: 20...200, using: &random))
            try store.put("key/\(n)", model["key/\(n)"]!)
        }
        try store.close()

        // How long one rekey takes here: the kills land anywhere from before the open to after the end.
        var current = 0  // the key the store is under
        let started = Date()
        XCTAssertEqual(try ToolTests.cask(["rekey", path, "--key-file", keyFiles[0], "--new-key-file", keyFiles[1]]).status, 0)
        let duration = Date().timeIntervalSince(started)
        current = 1

        var before = 0, after = 0
        for round in 0..<24 {
            let next = 1 - current
            let process = Process()
            process.executableURL = URL(fileURLWithPath: ToolTests.toolPath)
            process.arguments = ["rekey", path, "--key-file", keyFiles[current], "--new-key-file", keyFiles[next]]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            usleep(UInt32(Double.random(in: 0...(duration * 1.2), using: &random) * 1_000_000))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()

            // The store opens under exactly one of the two keys, whole.
            let opened = keys.indices.compactMap { index -> (Int, CaskStore)? in
                var options = EncryptionTests.options(key: keys[index])
                options.readOnly = true
                return (try? CaskStore.open(at: path, options: options)).map { (index, $0) }
            }
            XCTAssertEqual(opened.count, 1, "round \(round): the store opens under \(opened.map(\.0))")
            guard let (under, reopened) = opened.first else { return }
            XCTAssertTrue(reopened.recoveryReport.isClean, "round \(round): \(reopened.recoveryReport)")
            if round % 8 == 0 { assertStore(reopened, matches: model, "round \(round)") } else { XCTAssertEqual(reopened.count, model.count, "round \(round)") }
            try reopened.close()
            let swapped = under != current
            if swapped {
                after += 1
                try CaskStore.open(at: path, options: EncryptionTests.options(key: keys[under])).close()
                XCTAssertFalse(FileManager.default.fileExists(atPath: path + "/" + SegmentName.rekeyMarker), "round \(round)")
            } else {
                before += 1
            }
            current = under
            // At most one directory beside it, named for the killed process: the new store, before
            // the swap; after it, the writable open deleted the old one.
            let left = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasPrefix("store.") }
            XCTAssertLessThanOrEqual(left.count, swapped ? 0 : 1, "round \(round): \(left)")
            for name in left {
                XCTAssertTrue(name.hasPrefix("store.cask-rekey-\(process.processIdentifier)-"), "round \(round): \(name)")
                try FileManager.default.removeItem(atPath: dir.appending(name))
            }
        }
        XCTAssertGreaterThan(before, 2, "too few kills landed before the swap")
        XCTAssertGreaterThan(after, 2, "too few rekeys got to the swap")
    }
}
