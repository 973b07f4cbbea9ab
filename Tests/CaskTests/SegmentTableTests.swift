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
        var table = SegmentTable()
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
}
