import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// A store whose segment header starts at the last sequence numbers (a base seq of 2^63 − 1 is
/// valid): writes use what is left, and a write that needs more is refused with
/// ``CaskError/limitReached(path:reason:)`` before a byte of it reaches the file.
final class SequenceNumberLimitTests: XCTestCase {
    /// A store holding one empty segment whose header's base seq is `baseSeq`.
    private func makeStore(baseSeq: UInt64) throws -> TemporaryDirectory {
        let directory = TemporaryDirectory("cask-seq-limit")
        let header = Data(SegmentHeader(segmentID: 1, baseSeq: baseSeq).encoded())
        try header.write(to: URL(fileURLWithPath: directory.appending(SegmentName.segment(1))))
        return directory
    }

    private func options() -> CaskStore.Options { .manualCompaction() }

    private func assertRefused(_ write: () throws(CaskError) -> Void, needing count: Int, left: UInt64, in path: String, line: UInt = #line) {
        do throws(CaskError) {
            try write()
            XCTFail("the write was accepted", line: line)
        } catch {
            XCTAssertEqual(error, .limitReached(
                path: path,
                reason: "sequence numbers are exhausted (a write needs \(count), \(left) of \(Limits.maxSeq) are left); copy the store into a new one ('cask export' then 'cask import') to go on writing"),
                line: line)
        }
    }

    func testTheLastSequenceNumbersAreUsedAndTheNextWriteIsRefusedBeforeAByteIsWritten() throws {
        let directory = try makeStore(baseSeq: Limits.maxSeq - 2)
        let segment = directory.appending(SegmentName.segment(1))
        let store = try CaskStore.open(at: directory.path, options: options())
        try store.put("a", Array("1".utf8))
        var batch = WriteBatch()
        batch.put("b", Array("2".utf8))
        batch.put("c", Array("3".utf8))
        // Two operations and a commit need 3 seqs; 2 are left.
        assertRefused({ () throws(CaskError) in try store.write(batch) }, needing: 3, left: 2, in: directory.path)
        try store.put("b", Array("2".utf8))
        try store.put("c", Array("3".utf8))  // seq 2^63 − 1, the last one
        assertRefused({ () throws(CaskError) in try store.put("d", Array("4".utf8)) }, needing: 1, left: 0, in: directory.path)
        assertRefused({ () throws(CaskError) in _ = try store.delete("a") }, needing: 1, left: 0, in: directory.path)
        try store.flush()
        XCTAssertEqual(try StoreFiles.records(ofSegment: segment).count, 3)
        XCTAssertEqual(try store.get("c"), Array("3".utf8))
        try store.close()
        XCTAssertEqual(try StoreFiles.records(ofSegment: segment).count, 3)

        // Reopened, the store holds all three and is clean; verify agrees; writes stay refused.
        let reopened = try CaskStore.open(at: directory.path, options: options())
        XCTAssertTrue(reopened.recoveryReport.isClean, "\(reopened.recoveryReport)")
        XCTAssertEqual(try reopened.get("a"), Array("1".utf8))
        XCTAssertEqual(try reopened.get("c"), Array("3".utf8))
        assertRefused({ () throws(CaskError) in try reopened.put("d", Array("4".utf8)) }, needing: 1, left: 0, in: directory.path)
        try reopened.close()
        XCTAssertTrue(try CaskStore.verify(at: directory.path).isClean)
    }

    /// With every seq used and the active segment full, an open starts a new segment: its header
    /// holds the last valid base seq, not one past it (which no reader would accept).
    func testANewSegmentAfterTheLastSequenceNumberHasAValidHeader() throws {
        let directory = try makeStore(baseSeq: Limits.maxSeq)
        var small = options()
        small.maxSegmentSize = 4 << 10
        let store = try CaskStore.open(at: directory.path, options: small)
        // Incompressible, so that the record fills the 4 KiB segment.
        let value = (0..<5000).map { _ in UInt8.random(in: 0...255) }
        try store.put("k", value)
        try store.close()
        let reopened = try CaskStore.open(at: directory.path, options: small)
        XCTAssertTrue(reopened.recoveryReport.isClean, "\(reopened.recoveryReport)")
        XCTAssertTrue(FileManager.default.fileExists(atPath: directory.appending(SegmentName.segment(2))))
        XCTAssertEqual(try reopened.get("k"), value)
        try reopened.close()
        let report = try CaskStore.verify(at: directory.path)
        XCTAssertTrue(report.isClean, "\(report)")
    }
}
