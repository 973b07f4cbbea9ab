import XCTest
@testable import Cask
import CaskTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The read path's segment lookup checked against a `Dictionary` model, with ids added and
/// retired in any order.
final class SegmentTableTests: XCTestCase {
    private func file(_ id: UInt32) -> SegmentFile {
        SegmentFile(id: UInt64(id), path: "/dev/null", fd: open("/dev/null", O_RDONLY), length: 0, fileSystem: PosixFileSystem())
    }

    func testAddsAndRetiresInAnyOrderAgainstADictionary() {
        var rng = SeededGenerator.fromEnvironment(fallback: 0x5E6)
        let table = SegmentTable()
        var model: [UInt32: SegmentFile] = [:]
        func check(_ context: String) {
            for id in 0..<70 as Range<UInt32> {
                XCTAssertTrue(table[id] === model[id], "id \(id), \(context)")
            }
            XCTAssertNil(table[UInt32.max], context)
            XCTAssertEqual(table.isEmpty, model.isEmpty, context)
        }
        check("empty")
        for step in 0..<3_000 {
            // Mostly growing ids, as a store hands them out, with older ones retired at random.
            let id = Bool.random(using: &rng) ? UInt32.random(in: 0..<64, using: &rng) : UInt32(step % 64)
            if Int.random(in: 0..<100, using: &rng) < 55 {
                let new = file(id)
                table[id] = new
                model[id] = new
            } else {
                table[id] = nil
                model[id] = nil
            }
            if step % 100 == 0 { check("step \(step)") }
        }
        check("end")
        // Retire everything from the bottom (as compaction does), then start again far above.
        for id in 0..<64 as Range<UInt32> { table[id] = nil; model[id] = nil }
        check("emptied")
        let high = file(1_000_000)
        table[1_000_000] = high
        XCTAssertTrue(table[1_000_000] === high)
        XCTAssertNil(table[999_999])
        XCTAssertNil(table[0])
    }

    /// The read path's lookup (`writtenMappedBytes`, which gets run without the lock) against a model: a record is served
    /// exactly when its segment is held and mapped, and it ends within both the mapping and the
    /// longest written length the table was told of (or the file had when it was added).
    func testWrittenMappedBytesFollowTheFilesAndTheirWrittenLengths() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let size = 8192
        let path = directory.appending("bytes")
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) })))
        var rng = SeededGenerator.fromEnvironment(fallback: 0xE47)
        let table = SegmentTable()
        // The model: for each held id, its file and the bytes readable from its mapping (nil: unmapped).
        var model: [UInt32: (file: SegmentFile, readable: Int64?)] = [:]
        func check(_ context: String) {
            for id in 0..<20 as Range<UInt32> {
                for _ in 0..<8 {
                    let offset = UInt32.random(in: 0..<UInt32(size), using: &rng)
                    let length = UInt32.random(in: 1...UInt32(size) - offset, using: &rng)
                    let bytes = table.writtenMappedBytes(RecordLocation(segmentID: id, offset: offset, length: length))
                    let expected = model[id].flatMap { held in held.readable.map { Int64(offset) + Int64(length) <= $0 } } ?? false
                    XCTAssertEqual(bytes != nil, expected, "id \(id) offset \(offset) length \(length), \(context)")
                    guard let bytes, let held = model[id] else { continue }
                    XCTAssertEqual(bytes.baseAddress, held.file.mapping.map { $0 + Int(offset) }, context)
                    XCTAssertEqual(bytes.count, Int(length), context)
                    XCTAssertEqual(bytes.last, UInt8(truncatingIfNeeded: (Int(offset) + Int(length) - 1) &* 7), context)
                }
            }
        }
        for step in 0..<600 {
            let id = UInt32.random(in: 0..<18, using: &rng)
            switch Int.random(in: 0..<100, using: &rng) {
            case 0..<40:
                // Mapped whole, mapped in part, or read with `pread`; written to any length.
                let mapLength = [size, size / 2, 0].randomElement(using: &rng)!
                let written = Int64.random(in: 0...Int64(size), using: &rng)
                let file = SegmentFile(id: UInt64(id), path: path, fd: open(path, O_RDONLY), length: written,
                                       fileSystem: PosixFileSystem(), mapLength: mapLength)
                table[id] = file
                model[id] = (file, file.mapping == nil ? nil : min(written, Int64(mapLength)))
            case 40..<60:
                table[id] = nil
                model[id] = nil
            default:
                let length = Int64.random(in: 0...Int64(size), using: &rng)
                table.noteWritten(id, length: length)
                if let held = model[id], let readable = held.readable {
                    model[id] = (held.file, max(readable, min(length, Int64(held.file.mappedLength))))
                }
            }
            if step % 20 == 0 { check("step \(step)") }
        }
        check("end")
    }
}
