import Foundation
import Synchronization
import XCTest
@testable import Cask
import CaskTestSupport

/// Read-only opens and `verify` beside a live writer (issue 22, items 11 and 12): each sees a prefix
/// of the writer's commits — never part of a batch, never an older state than one seen before — and
/// no damage but, at most, a torn tail where a write is still in progress.
final class LiveReaderTests: XCTestCase {
    /// Every batch writes all of `keys` with one version; the writer compacts now and then.
    func testReadersBesideABatchingAndCompactingWriterSeeWholeCommits() throws {
        let directory = TemporaryDirectory("cask-live-reader")
        var options = CaskStore.Options(durability: .os)
        options.maxSegmentSize = 64 << 10
        options.automaticCompaction = false
        let store = try CaskStore.open(at: directory.path, options: options)
        let keys = (0..<8).map { "key-\($0)" }
        @Sendable func batch(_ version: Int) -> WriteBatch {
            var batch = WriteBatch()
            for key in keys { batch.put(key, Array("\(version)-".utf8) + [UInt8](repeating: UInt8(version % 251), count: 90)) }
            return batch
        }
        try store.write(batch(0))
        let done = Atomic<Bool>(false)
        let writerFailure = Mutex<String?>(nil)
        let writer = Thread {
            var version = 1
            while !done.load(ordering: .relaxed) {
                do {
                    try store.write(batch(version))
                    if version % 100 == 0 { _ = try store.compact() }
                    usleep(50)  // Keeps the store small enough for 1,000 opens in a few seconds.
                } catch {
                    writerFailure.withLock { $0 = "\(error)" }
                    return
                }
                version += 1
            }
        }
        writer.start()
        defer { done.store(true, ordering: .relaxed) }

        var readOnly = CaskStore.Options()
        readOnly.readOnly = true
        readOnly.createIfMissing = false
        var lastSeen = 0
        var races = 0
        let deadline = Date().addingTimeInterval(60)
        while races < 1_000 && Date() < deadline {
            races += 1
            if races % 4 == 0 {
                let report = try CaskStore.verify(at: directory.path)
                let inside = report.damagedRanges.filter { $0.kind != .tornTail }
                XCTAssertTrue(inside.isEmpty, "race \(races): verify beside the writer: \(inside)")
                continue
            }
            let reader = try CaskStore.open(at: directory.path, options: readOnly)
            var versions: Set<Int> = []
            for key in keys {
                guard let value = try reader.get(key) else { continue }
                versions.insert(Int(String(decoding: value.prefix { $0 != UInt8(ascii: "-") }, as: UTF8.self)) ?? -1)
            }
            try reader.close()
            XCTAssertEqual(versions.count, 1, "race \(races): a read-only open saw parts of several batches: \(versions.sorted())")
            if let version = versions.first {
                XCTAssertGreaterThanOrEqual(version, lastSeen, "race \(races): an older state than one seen before")
                lastSeen = max(lastSeen, version)
            }
            if versions.count != 1 { break }
        }
        done.store(true, ordering: .relaxed)
        while !writer.isFinished { usleep(1000) }
        XCTAssertNil(writerFailure.withLock { $0 })
        XCTAssertGreaterThan(lastSeen, 0, "the readers saw the writer's progress")
        try store.close()
        XCTAssertTrue(try CaskStore.verify(at: directory.path).isClean)
    }
}
