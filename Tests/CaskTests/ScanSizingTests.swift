import XCTest
@testable import Cask
import CaskTestSupport

/// Recovery sizes the index ahead of a scan of segments without hints: once, early, for the whole
/// scan; for the keys the records are projected to add, not for the records; and the room that
/// overwritten keys did not need is given back at the end.
final class ScanSizingTests: XCTestCase {
    /// Feeds `records` records of `length` bytes through a sizing and into a recovering index, as
    /// recovery does (the record counted, then indexed); key `i % keys`. Returns the table's slot
    /// count after each record.
    private func scan(records: Int, keys: Int, length: Int, bytesToScan: Int64, into index: KeyIndex) -> [Int] {
        var sizing = ScanSizing(bytesToScan: bytesToScan, index: index)
        var slotCounts: [Int] = []
        slotCounts.reserveCapacity(records)
        for i in 0..<records {
            sizing.noteScanned(length: length)
            let key = Array("key-\(i % keys)".utf8)
            let location = RecordLocation(segmentID: 1, offset: UInt32(40 + i * length), length: UInt32(length))
            _ = key.withUnsafeBytes { index.recover($0, location, seq: UInt64(i + 1), isDelete: false) }
            slotCounts.append(index.slotCount)
        }
        return slotCounts
    }

    func testTheIndexIsSizedOnceForTheWholeScan() {
        let index = KeyIndex(hasher: KeyHasher(seed: 7))
        index.beginRecovery()
        let records = 200_000
        let slotCounts = scan(records: records, keys: records, length: 100, bytesToScan: Int64(records * 100), into: index)
        // The first checkpoint is the 4,096th record: from then on the table does not change.
        let sized = slotCounts[4095]
        XCTAssertEqual(Set(slotCounts[4095...]), [sized], "the table grew again after the projection")
        XCTAssertGreaterThanOrEqual(sized * 7, records * 8, "room for every record at the maximum load")
        XCTAssertLessThan(sized, records * 3 / 2, "no more than the projection and its margin")
        index.endRecovery()
        XCTAssertEqual(index.count, records)
    }

    /// 20,000 keys written ten times over: the first 20,000 records are new keys, so the first
    /// checkpoints size the table for every record; the end shrinks it to its keys.
    func testRoomForOverwrittenKeysIsGivenBack() {
        let index = KeyIndex(hasher: KeyHasher(seed: 8))
        index.beginRecovery()
        let records = 200_000, keys = 20_000
        let slotCounts = scan(records: records, keys: keys, length: 64, bytesToScan: Int64(records * 64), into: index)
        XCTAssertGreaterThanOrEqual(slotCounts.last! * 7, records * 8)
        index.endRecovery()
        XCTAssertEqual(index.count, keys)
        XCTAssertLessThan(index.slotCount, keys * 2, "the table keeps the scan's size")
        XCTAssertGreaterThanOrEqual(index.slotCount * 7, keys * 8)
        for i in 0..<keys {
            let location = Array("key-\(i)".utf8).withUnsafeBytes { index.lookup($0) }
            XCTAssertEqual(location?.offset, UInt32(40 + (records - keys + i) * 64), "key-\(i)")
        }
    }

    /// A scan of a few keys written again and again: the records since each checkpoint take
    /// almost no slot, and almost nothing is reserved for the records to come.
    func testAFewKeysOverwrittenOverAndOverReserveLittle() {
        let index = KeyIndex(hasher: KeyHasher(seed: 10))
        index.beginRecovery()
        let records = 200_000, keys = 100
        let slotCounts = scan(records: records, keys: keys, length: 64, bytesToScan: Int64(records * 64), into: index)
        XCTAssertLessThan(slotCounts.max()!, 20_000, "sized for records that took no slot")
        index.endRecovery()
        XCTAssertEqual(index.count, keys)
    }

    /// With nothing declared to scan (only hinted segments, whose tails are scanned), nothing is reserved.
    func testNothingToScanReservesNothing() {
        let index = KeyIndex(hasher: KeyHasher(seed: 9))
        index.beginRecovery()
        let slotCounts = scan(records: 5_000, keys: 5_000, length: 100, bytesToScan: 0, into: index)
        XCTAssertLessThan(slotCounts.last!, 5_000 * 2, "grown as inserts need, not reserved")
        index.endRecovery()
    }
}
