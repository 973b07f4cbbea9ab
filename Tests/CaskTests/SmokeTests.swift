import XCTest
@testable import Cask
import CaskTestSupport

final class SmokeTests: XCTestCase {
    func testPutGetReopenWithRotationAndDeletes() throws {
        let dir = TemporaryDirectory()
        var options = CaskStore.Options()
        options.maxSegmentSize = 64 << 10
        var model: [String: [UInt8]] = [:]
        var rng = SeededGenerator(seed: 1)
        for round in 0..<3 {
            let store = try CaskStore.open(at: dir.path, options: options)
            XCTAssertTrue(store.recoveryReport.isClean, "\(store.recoveryReport)")
            XCTAssertEqual(store.count, model.count, "round \(round)")
            for (key, value) in model { XCTAssertEqual(try store.get(key), value, key) }
            for i in 0..<3000 {
                let key = "k\(Int.random(in: 0..<1500, using: &rng))"
                if i % 5 == 0 {
                    XCTAssertEqual(try store.delete(key), model.removeValue(forKey: key) != nil)
                } else {
                    let value = rng.bytes(Int.random(in: 0..<200, using: &rng)) + Array(repeating: 7, count: 50)
                    try store.put(key, value)
                    model[key] = value
                }
            }
            for (key, value) in model { XCTAssertEqual(try store.get(key), value, key) }
            try store.close()
        }
        let store = try CaskStore.open(at: dir.path, options: options)
        XCTAssertGreaterThan(store.recoveryReport.segmentsFromHints, 0, "\(store.recoveryReport)")
        XCTAssertEqual(store.count, model.count)
        for (key, value) in model { XCTAssertEqual(try store.get(key), value, key) }
        let stats = try store.statistics()
        print(stats.keys, stats.liveBytes, stats.deadBytes, stats.segmentBytes, stats.indexOverheadPerKey, store.recoveryReport)
        try store.close()
    }

    func testBufferedModeReadsFromBuffer() throws {
        let dir = TemporaryDirectory()
        let store = try CaskStore.open(at: dir.path, options: .init(durability: .buffered))
        try store.put("a", [1, 2, 3])
        XCTAssertEqual(try store.get("a"), [1, 2, 3])
        try store.close()
        let again = try CaskStore.open(at: dir.path, options: .init(durability: .fsync))
        XCTAssertEqual(try again.get("a"), [1, 2, 3])
        try again.put("b", [4])
        try again.close()
    }

    func testSecondWriterIsLocked() throws {
        let dir = TemporaryDirectory()
        let store = try CaskStore.open(at: dir.path)
        XCTAssertThrowsError(try CaskStore.open(at: dir.path)) { error in
            XCTAssertEqual(error as? CaskError, .alreadyOpen(path: dir.path))
        }
        try store.close()
    }
}
