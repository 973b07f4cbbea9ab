import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// Keys written with an expiry read as absent once it passes — everywhere, across reopens and
/// compactions, and without bringing back an older value.
final class ExpiryTests: XCTestCase {
    private func options() -> CaskStore.Options { .manualCompaction(maxSegmentSize: 4096) }

    private func assertAbsent(_ store: CaskStore, _ key: String, _ context: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertNil(try store.get(key), context, file: file, line: line)
        XCTAssertFalse(try store.contains(key), context, file: file, line: line)
        XCTAssertFalse((try? store.keys())?.contains(Array(key.utf8)) ?? true, context, file: file, line: line)
    }

    func testExpiredKeyIsAbsentEverywhereAndAcrossReopen() throws {
        let dir = TemporaryDirectory("cask-expiry")
        let store = try CaskStore.open(at: dir.path, options: options())
        try store.put("session", Array("token".utf8), expiresAfter: .milliseconds(300))
        try store.put("forever", [1])
        try store.put("later", [2], expiresAfter: .seconds(3600))
        XCTAssertEqual(try store.get("session"), Array("token".utf8))
        XCTAssertEqual(store.count, 3)
        usleep(400_000)
        assertAbsent(store, "session", "after expiry")
        XCTAssertEqual(store.count, 2)
        XCTAssertEqual(try store.get("later"), [2])
        try store.close()
        for hints in [true, false] {
            if !hints {
                for name in try FileManager.default.contentsOfDirectory(atPath: dir.path) where name.hasSuffix(".hint") {
                    try FileManager.default.removeItem(atPath: dir.appending(name))
                }
            }
            let reopened = try CaskStore.open(at: dir.path, options: options())
            assertAbsent(reopened, "session", "reopened, hints \(hints)")
            XCTAssertEqual(reopened.count, 2)
            XCTAssertEqual(try reopened.get("later"), [2])
            try reopened.close()
        }
    }

    /// Durations at the ends of `Duration`'s range: one too long for the record's milliseconds
    /// (`.seconds(.max)`, a plausible "never") is the last time a record can hold — it trapped on
    /// overflow — and a negative one expires at once. Through every call that takes one.
    func testExpiriesAtTheEndsOfDurationsRange() throws {
        let dir = TemporaryDirectory("cask-expiry-range")
        defer { dir.remove() }
        let store = try CaskStore.open(at: dir.path, options: options())
        for (n, far) in [Duration.seconds(Int64.max), .seconds(Int64.max / 1000), .seconds(Int64.max / 1000 - 1), .milliseconds(Int64.max)].enumerated() {
            try store.put("put-\(n)", [UInt8(n)], expiresAfter: far)
            try store.set(n, forKey: "set-\(n)", expiresAfter: far)
            var batch = WriteBatch()
            batch.put("batch-\(n)", [UInt8(n)], expiresAfter: far)
            try store.write(batch)
            try store.suspendingPutForTest("task-\(n)", [UInt8(n)], expiresAfter: far)
        }
        for (n, date) in [Date.distantFuture, Date(timeIntervalSince1970: .greatestFiniteMagnitude), Date(timeIntervalSince1970: .infinity)].enumerated() {
            try store.set(n, forKey: "date-\(n)", expiresAt: date)
            XCTAssertEqual(try store.get(Int.self, forKey: "date-\(n)"), n)
        }
        try store.set(0, forKey: "date-past", expiresAt: .distantPast)
        XCTAssertNil(try store.get(Int.self, forKey: "date-past"))
        try store.put("negative", [9], expiresAfter: .seconds(-5))
        try store.put("zero", [9], expiresAfter: .zero)
        for reopen in [false, true] {
            if reopen { try store.close() }
            let current = reopen ? try CaskStore.open(at: dir.path, options: options()) : store
            for n in 0..<4 {
                for key in ["put-\(n)", "batch-\(n)", "task-\(n)"] { XCTAssertEqual(try current.get(key), [UInt8(n)], "\(key), reopened: \(reopen)") }
                XCTAssertEqual(try current.get(Int.self, forKey: "set-\(n)"), n, "reopened: \(reopen)")
            }
            assertAbsent(current, "negative", "reopened: \(reopen)")
            assertAbsent(current, "zero", "reopened: \(reopen)")
            if reopen { try current.close() }
        }
    }

    /// Deleting a key whose expiry passed is deleting an absent key: it returns false and writes
    /// nothing, as for a missing one; before the expiry it is an ordinary delete.
    func testDeletingAnExpiredKeyIsDeletingAMissingOne() throws {
        let dir = TemporaryDirectory("cask-expiry-delete")
        defer { dir.remove() }
        let store = try CaskStore.open(at: dir.path, options: options())
        try store.put("session", [1], expiresAfter: .milliseconds(150))
        try store.put("live", [2], expiresAfter: .seconds(3600))
        XCTAssertTrue(try store.delete("live"), "not expired yet")
        usleep(250_000)
        let before = try store.statistics().segmentBytes
        XCTAssertFalse(try store.contains("session"))
        XCTAssertFalse(try store.delete("session"), "an expired key did not exist")
        XCTAssertEqual(try store.statistics().segmentBytes, before, "nothing written")
        XCTAssertFalse(try store.delete("never"))
        try store.close()
        let reopened = try CaskStore.open(at: dir.path, options: options())
        assertAbsent(reopened, "session", "reopened")
        assertAbsent(reopened, "live", "reopened")
        try reopened.close()
    }

    func testPutWithoutExpiryMakesTheKeyPermanentAgain() throws {
        let dir = TemporaryDirectory("cask-expiry-permanent")
        let store = try CaskStore.open(at: dir.path, options: options())
        try store.put("k", [1], expiresAfter: .milliseconds(200))
        try store.put("k", [2])
        usleep(300_000)
        XCTAssertEqual(try store.get("k"), [2])
        XCTAssertTrue(try store.contains("k"))
        try store.close()
        let reopened = try CaskStore.open(at: dir.path, options: options())
        XCTAssertEqual(try reopened.get("k"), [2])
        XCTAssertEqual(reopened.count, 1)
        try reopened.close()
    }

    /// An expired put hides the older value of its key like a delete: compacting only the segment
    /// holding the expired put must not bring the older value back.
    func testCompactionDropsExpiredRecordsWithoutResurrectingOlderValues() throws {
        let dir = TemporaryDirectory("cask-expiry-compaction")
        var options = options()
        options.compactionDeadRatio = 0.3
        options.compactionMinDeadBytes = 0
        let store = try CaskStore.open(at: dir.path, options: options)
        var random = SeededGenerator(seed: 4)
        try store.put("user", Array("old profile".utf8))
        // Seven anchors fill the first segment; the eighth starts the second, with the expiring put.
        for i in 0..<8 { try store.put("anchor-\(i)", random.bytes(500)) }
        try store.put("user", Array("short-lived".utf8), expiresAfter: .milliseconds(200))
        let segments = try store.statistics().segments
        XCTAssertEqual(segments.count, 2)
        XCTAssertEqual(segments.first?.minSeq, 1, "the first segment holds the old value")
        for _ in 0..<4 { for i in 0..<40 { try store.put("filler-\(i)", random.bytes(100)) } }
        usleep(300_000)
        assertAbsent(store, "user", "expired")
        let compactor = store.compactor()
        _ = store.compactionGate.withLock { _ in try? compactor.run(.policy) }
        assertAbsent(store, "user", "after a partial compaction")
        try store.close()
        var reopened = try CaskStore.open(at: dir.path, options: options)
        assertAbsent(reopened, "user", "reopened after a partial compaction")
        let result = try reopened.compact()
        XCTAssertGreaterThan(result.recordsDropped, 0)
        assertAbsent(reopened, "user", "after a full compaction")
        try reopened.close()
        reopened = try CaskStore.open(at: dir.path, options: options)
        assertAbsent(reopened, "user", "reopened after a full compaction")
        XCTAssertEqual(reopened.count, 48)
        try reopened.close()
    }

    /// A store whose records have all expired (a search history) is compacted like one whose records
    /// were overwritten: by `compact()`, and on its own once idle. Expired records count as dead to
    /// the choice of segments; before, they counted as live and such a store grew without bound.
    func testExpiredRecordsAreReclaimed() throws {
        for automatic in [false, true] {
            let dir = TemporaryDirectory("cask-expiry-reclaim")
            defer { dir.remove() }
            var options = automatic ? CaskStore.Options() : options()
            if automatic { options.idleCompactionDelay = 0.3 }
            let store = try CaskStore.open(at: dir.path, options: options)
            var random = SeededGenerator(seed: 7)
            for i in 0..<500 { try store.put("search/\(i)", random.bytes(100), expiresAfter: .milliseconds(100)) }
            try store.put("settings", [1])
            let before = try store.statistics().segmentBytes
            if automatic {
                usleep(800_000)  // the entries expire, then the writes have paused for the idle delay
                store.waitForBackgroundWork()
            } else {
                usleep(200_000)
                let result = try store.compact()
                XCTAssertGreaterThanOrEqual(result.recordsDropped, 500, "\(result)")
            }
            let after = try store.statistics()
            XCTAssertEqual(after.keys, 1, "automatic: \(automatic)")
            XCTAssertLessThan(after.segmentBytes * 10, before, "automatic: \(automatic): \(before) -> \(after.segmentBytes) bytes")
            XCTAssertEqual(try store.get("settings"), [1])
            try store.close()
        }
    }

    func testCodableValuesExpireToo() throws {
        struct Session: Codable, Equatable, Sendable { var user: String; var token: [UInt8] }
        let dir = TemporaryDirectory("cask-expiry-codable")
        let store = try CaskStore.open(at: dir.path, options: options())
        let session = Session(user: "ada", token: [1, 2, 3])
        try store.set(session, forKey: "session", expiresAfter: .milliseconds(200))
        try store.set(session, forKey: "json-session", expiresAt: Date().addingTimeInterval(0.2), coder: .json)
        XCTAssertEqual(try store.get(Session.self, forKey: "session"), session)
        XCTAssertEqual(try store.get(Session.self, forKey: "json-session", coder: .json), session)
        usleep(300_000)
        XCTAssertNil(try store.get(Session.self, forKey: "session"))
        XCTAssertNil(try store.get(Session.self, forKey: "json-session", coder: .json))
        try store.close()
        let reopened = try CaskStore.open(at: dir.path, options: options())
        XCTAssertNil(try reopened.get(Session.self, forKey: "session"))
        XCTAssertEqual(reopened.count, 0)
        try reopened.close()
    }
}

private extension CaskStore {
    /// The suspending put with an expiry, run to completion from synchronous test code.
    func suspendingPutForTest(_ key: String, _ value: [UInt8], expiresAfter duration: Duration) throws {
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var failure: Error?
        Task {
            do { try await self.suspending.put(key, value, expiresAfter: duration) } catch { failure = error }
            done.signal()
        }
        done.wait()
        if let failure { throw failure }
    }
}
