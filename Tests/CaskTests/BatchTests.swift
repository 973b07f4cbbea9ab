import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// Atomic batches: all of a batch or nothing, after any cut of the file, any reopen, any compaction.
final class BatchTests: XCTestCase {
    private func options() -> CaskStore.Options { .manualCompaction(maxSegmentSize: 64 << 10) }

    private func batchOf(_ keys: [String], version: UInt8) -> WriteBatch {
        var batch = WriteBatch()
        for key in keys { batch.put(key, Array(repeating: version, count: 40)) }
        return batch
    }

    func testBatchAppliesInOrderAndSurvivesReopen() throws {
        let dir = TemporaryDirectory("cask-batch")
        let store = try CaskStore.open(at: dir.path, options: options())
        try store.put("gone", [9])
        var batch = WriteBatch()
        batch.put("a", [1])
        batch.put("b", [2])
        batch.delete("gone")
        batch.put("a", [3])  // later operations win within a batch too
        try store.write(batch)
        XCTAssertEqual(try store.get("a"), [3])
        XCTAssertEqual(try store.get("b"), [2])
        XCTAssertNil(try store.get("gone"))
        try store.write(WriteBatch())  // an empty batch writes nothing
        try store.close()
        for hints in [true, false] {
            if !hints {
                for name in try FileManager.default.contentsOfDirectory(atPath: dir.path) where name.hasSuffix(".hint") {
                    try FileManager.default.removeItem(atPath: dir.appending(name))
                }
            }
            let reopened = try CaskStore.open(at: dir.path, options: options())
            XCTAssertTrue(reopened.recoveryReport.isClean, "\(reopened.recoveryReport)")
            XCTAssertEqual(try reopened.get("a"), [3])
            XCTAssertEqual(try reopened.get("b"), [2])
            XCTAssertNil(try reopened.get("gone"))
            XCTAssertEqual(reopened.count, 2)
            try reopened.close()
        }
    }

    /// A batch whose commit record no longer agrees with its members (its count changed, the
    /// checksum made to hold: found by the store-image fuzzer) is not whole: a read of the segment
    /// applies none of it, while an open trusting the segment's hint, which cannot carry the count,
    /// would apply all of it. `verify` therefore names the hint as disagreeing with its segment,
    /// and a repair leaves a store that verifies clean and reads as the segment does.
    func testAHintListingABatchItsSegmentFindsNotWholeIsInvalid() throws {
        let dir = TemporaryDirectory("cask-batch-hint")
        defer { dir.remove() }
        let store = try CaskStore.open(at: dir.path, options: options())
        try store.put("before", [1])
        var batch = WriteBatch()
        batch.put("a", [2])
        batch.put("b", [3])
        try store.write(batch)
        try store.put("after", [4])
        try store.close()
        XCTAssertTrue(FileManager.default.fileExists(atPath: StoreFiles.hintPath(dir.path, 1)))
        XCTAssertTrue(try CaskStore.verify(at: dir.path).isClean)

        // The commit record's value, the count 2 as a one-byte varint, becomes 3.
        var commit: InspectedRecord?
        try CaskStore.inspect(at: dir.path) { item in
            if case .record(let record) = item, record.type == .batch { commit = record }
        }
        let found = try XCTUnwrap(commit)
        let path = StoreFiles.segmentPath(dir.path, 1)
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let start = Int(found.offset), end = start + found.bytes
        XCTAssertEqual(bytes[end - 1], 2)
        bytes[end - 1] = 3
        StoreFiles.rechecksumRecord(&bytes, at: start, length: found.bytes)
        try Data(bytes).write(to: URL(fileURLWithPath: path))

        let verification = try CaskStore.verify(at: dir.path)
        XCTAssertEqual(verification.invalidHints.map(\.file), [StoreFiles.hintPath(dir.path, 1)], "\(verification)")
        XCTAssertTrue(verification.invalidHints.first?.reason.contains("a batch that is not whole") ?? false, "\(verification)")

        let report = try CaskStore.repair(at: dir.path)
        XCTAssertTrue(try CaskStore.verify(at: dir.path).isClean, "\(report)")
        let repaired = try CaskStore.open(at: dir.path, options: options())
        defer { try? repaired.close() }
        XCTAssertEqual(try repaired.get("before"), [1])
        XCTAssertEqual(try repaired.get("after"), [4])
        XCTAssertNil(try repaired.get("a"))
        XCTAssertNil(try repaired.get("b"))
    }

    func testAnInvalidOperationFailsTheWholeBatchUnwritten() throws {
        let dir = TemporaryDirectory("cask-batch-invalid")
        let store = try CaskStore.open(at: dir.path, options: options())
        var batch = WriteBatch()
        batch.put("fine", [1])
        batch.put([UInt8](), [2])
        XCTAssertThrowsError(try store.write(batch)) { XCTAssertEqual($0 as? CaskError, .emptyKey) }
        XCTAssertNil(try store.get("fine"))
        XCTAssertEqual(try store.statistics().segmentBytes, Int64(SegmentHeader.length))
        try store.close()
    }

    /// The file cut at every byte of a batch (a crash while it was written): after reopening, the
    /// batch is either entirely there (cut after its commit record) or entirely absent, the cut is
    /// reported, and what was written before stays.
    func testTornBatchIsAllOrNothingAtEveryCut() throws {
        let template = TemporaryDirectory("cask-batch-torn")
        let store = try CaskStore.open(at: template.path, options: options())
        try store.put("before", [7])
        try store.write(batchOf(["x", "y", "z"], version: 1))
        let batchStart = try store.statistics().segments[0].fileBytes
        try store.write(batchOf(["x", "y", "z"], version: 2))
        try store.close()
        let segment = template.appending("0000000001.cask")
        let full = try Data(contentsOf: URL(fileURLWithPath: segment))
        for cut in Int(batchStart)...full.count {
            let copy = TemporaryDirectory("cask-batch-cut")
            try full.prefix(cut).write(to: URL(fileURLWithPath: copy.appending("0000000001.cask")))
            let reopened = try CaskStore.open(at: copy.path, options: options())
            let values = try ["x", "y", "z"].map { try reopened.get($0) }
            let expected: UInt8 = cut == full.count ? 2 : 1
            XCTAssertEqual(values, Array(repeating: Array(repeating: expected, count: 40), count: 3), "cut at \(cut) of \(full.count)")
            XCTAssertEqual(try reopened.get("before"), [7])
            XCTAssertEqual(reopened.recoveryReport.truncations.isEmpty, cut == full.count || cut == Int(batchStart), "cut at \(cut): \(reopened.recoveryReport)")
            XCTAssertTrue(reopened.recoveryReport.damagedRanges.isEmpty, "cut at \(cut): \(reopened.recoveryReport)")
            // The store goes on normally behind the cut.
            try reopened.put("after", [8])
            try reopened.close()
            let again = try CaskStore.open(at: copy.path, options: options())
            XCTAssertTrue(again.recoveryReport.isClean, "cut at \(cut): \(again.recoveryReport)")
            XCTAssertEqual(try again.get("after"), [8])
            XCTAssertEqual(try again.get("x"), Array(repeating: expected, count: 40))
            try again.close()
        }
    }

    /// Compaction copies committed members as ordinary records (without their commit record).
    func testCompactionKeepsBatchedValues() throws {
        let dir = TemporaryDirectory("cask-batch-compaction")
        var options = options()
        options.maxSegmentSize = 4096
        let store = try CaskStore.open(at: dir.path, options: options)
        var model: [String: [UInt8]] = [:]
        for round in 0..<30 {
            var batch = WriteBatch()
            for i in 0..<5 {
                let key = "k\((round * 3 + i) % 40)"
                let value = Array(repeating: UInt8(round), count: 60 + i)
                batch.put(key, value)
                model[key] = value
            }
            if round % 4 == 0 {
                batch.delete("k\(round % 40)")
                model["k\(round % 40)"] = nil
            }
            try store.write(batch)
        }
        let result = try store.compact()
        XCTAssertGreaterThanOrEqual(result.segmentsCompacted, 2)
        for (key, value) in model { XCTAssertEqual(try store.get(key), value, key) }
        try store.close()
        let reopened = try CaskStore.open(at: dir.path, options: options)
        XCTAssertTrue(reopened.recoveryReport.isClean, "\(reopened.recoveryReport)")
        XCTAssertEqual(reopened.count, model.count)
        for (key, value) in model { XCTAssertEqual(try reopened.get(key), value, key) }
        XCTAssertEqual(try CaskStore.verify(at: dir.path).isClean, true)
        try reopened.close()
    }

    /// `set(_:forKey:)` in a batch encodes with the coder of the store it is written to, as
    /// `store.set` would (issue 23, item 4); a value that does not encode fails the whole batch
    /// before a byte is written.
    func testBatchSetsCodableValuesWithTheStoresCoder() throws {
        for coder in [ObjectCoder.binary, .json] {
            let dir = TemporaryDirectory("cask-batch-set")
            defer { dir.remove() }
            var options = options()
            options.objects.coder = coder
            let store = try CaskStore.open(at: dir.path, options: options)
            var batch = WriteBatch()
            batch.set(Profile.sample(1), forKey: "drafts/ada/1001")
            batch.put("raw", [1, 2])
            batch.set(["a", "b"], forKey: "tags", expiresAfter: .seconds(3600))
            try store.write(batch)
            XCTAssertEqual(try store.get(Profile.self, forKey: "drafts/ada/1001"), Profile.sample(1))
            XCTAssertEqual(try store.get([String].self, forKey: "tags"), ["a", "b"])
            try store.set(Profile.sample(1), forKey: "direct")
            if coder == .binary {
                XCTAssertEqual(try store.get("drafts/ada/1001"), try store.get("direct"), "the bytes store.set writes")
            } else {  // JSONEncoder's field order varies from call to call
                XCTAssertEqual(try store.get("drafts/ada/1001")?.first, UInt8(ascii: "{"), "JSON, the store's coder")
            }
            XCTAssertNotNil(try store.entry(Array("tags".utf8))?.expiresAtMilliseconds)

            var refused = WriteBatch()
            refused.put("before", [1])
            refused.set(Double.nan, forKey: "not-json")  // JSON has no NaN; the binary coder stores it
            if coder == .json {
                XCTAssertThrowsError(try store.write(refused)) { error in
                    guard case .objectEncodingFailed(let key, _, _, _) = error as? CaskError else { return XCTFail("\(error)") }
                    XCTAssertEqual(key, "not-json")
                }
                XCTAssertNil(try store.get("before"), "nothing of a refused batch is written")
            } else {
                try store.write(refused)
                XCTAssertEqual(try store.get(Double.self, forKey: "not-json")?.isNaN, true)
            }
            try store.close()
        }
    }

    /// `delete(prefix:)` removes one user's drafts in one batch and leaves every other key (item 9).
    func testDeletePrefixIsOneBatch() throws {
        let dir = TemporaryDirectory("cask-batch-delete-prefix")
        defer { dir.remove() }
        let store = try CaskStore.open(at: dir.path, options: options())
        for i in 0..<300 {
            try store.put("drafts/ada/\(i)", [1])
            try store.put("drafts/bob/\(i)", [2])
        }
        try store.put("drafts/ada", [3])  // not under "drafts/ada/"
        let before = try store.statistics().segments.reduce(0) { $0 + $1.records }
        XCTAssertEqual(try store.delete(prefix: "drafts/ada/"), 300)
        XCTAssertEqual(try store.count(prefix: Array("drafts/ada/".utf8)), 0)
        XCTAssertEqual(try store.count(prefix: Array("drafts/bob/".utf8)), 300)
        XCTAssertEqual(try store.get("drafts/ada"), [3])
        // 300 tombstones and one commit record: a batch.
        XCTAssertEqual(try store.statistics().segments.reduce(0) { $0 + $1.records } - before, 301)
        XCTAssertEqual(try store.delete(prefix: "drafts/ada/"), 0, "nothing left to delete writes nothing")
        try store.close()
        let reopened = try CaskStore.open(at: dir.path, options: options())
        XCTAssertEqual(try reopened.count(prefix: Array("drafts/ada/".utf8)), 0)
        XCTAssertEqual(try reopened.count(prefix: Array("drafts/bob/".utf8)), 300)
        try reopened.close()
    }
}
