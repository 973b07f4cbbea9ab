import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// A store that fits in one segment compacts itself (`Options.idleCompactionDelay`): the app
/// store of one logged-in user stays within twice its live bytes without a `compact()` call.
final class SmallStoreCompactionTests: XCTestCase {
    private func options(idleDelay: Double = 0.2) -> CaskStore.Options {
        var options = CaskStore.Options()
        options.idleCompactionDelay = idleDelay
        return options
    }

    /// The bytes of every file in the directory but `LOCK` (the writer's pid, 12 bytes): apparent
    /// sizes, what the store wrote.
    private func fileBytes(_ directory: String) throws -> Int64 {
        var total: Int64 = 0
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) where name != SegmentName.lockFile {
            var info = stat()
            XCTAssertEqual(lstat(directory + "/" + name, &info), 0, name)
            total += Int64(info.st_size)
        }
        return total
    }

    /// A user's profile of about 250 bytes, a fifth of it random (a session token).
    private func profile(_ login: Int, _ random: inout SeededGenerator) -> [UInt8] {
        let text = "{\"id\":7,\"name\":\"Ada Lovelace\",\"email\":\"ada@example.com\",\"locale\":\"en_GB\",\"theme\":\"dark\","
            + "\"plan\":\"pro\",\"avatar\":\"https://example.com/avatars/7.png\",\"logins\":\(login),\"flags\":[1,2,3,5,8,13],\"token\":\""
        return Array(text.utf8) + Array(random.bytes(24).map { UInt8(ascii: "a") + $0 % 26 }) + Array("\"}".utf8)
    }

    /// Waits, up to `seconds`, until `done` holds; false if it never did.
    private func eventually(_ seconds: Double = 20, _ done: () throws -> Bool) rethrows -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try done() { return true }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return try done()
    }

    // MARK: The logout scenario

    /// 10,000 login/logout cycles (a profile saved, then deleted), ending logged in: once the
    /// writes pause, the store compacts itself to at most twice its live bytes plus one segment
    /// header — segments and hint files counted — and the user reads back.
    func testLogoutCyclesStayWithinTwiceTheLiveBytes() throws {
        let dir = TemporaryDirectory("cask-small-logout")
        let store = try CaskStore.open(at: dir.path, options: options())
        var random = SeededGenerator.fromEnvironment(fallback: 12)
        var last: [UInt8] = []
        for login in 0..<10_000 {
            last = profile(login, &random)
            try store.put("current-user", last)
            if login < 9_999 { try store.delete("current-user") }
        }
        let written = try store.statistics()
        XCTAssertGreaterThan(written.deadBytes, 2_000_000, "the cycles wrote about 3 MB: \(written.deadBytes) dead")
        XCTAssertTrue(try eventually { try store.statistics().deadBytes == 0 }, "no compaction: \(String(describing: try? store.statistics()))")
        let live = try store.statistics().liveBytes
        XCTAssertEqual(try store.get("current-user"), last)
        try store.close()
        let onDisk = try fileBytes(dir.path)
        XCTAssertLessThanOrEqual(onDisk, 2 * live + Int64(SegmentHeader.length), "\(onDisk) bytes on disk for \(live) live")

        let reopened = try CaskStore.open(at: dir.path, options: options())
        XCTAssertTrue(reopened.recoveryReport.isClean, "\(reopened.recoveryReport)")
        XCTAssertEqual(try reopened.get("current-user"), last)
        XCTAssertEqual(try reopened.keys(), [Array("current-user".utf8)])
        try reopened.close()
    }

    /// Ending logged out, nothing is live: the tombstones go too, and one empty segment is left.
    func testLoggedOutStoreShrinksToOneEmptySegment() throws {
        let dir = TemporaryDirectory("cask-small-logged-out")
        let store = try CaskStore.open(at: dir.path, options: options())
        var random = SeededGenerator.fromEnvironment(fallback: 13)
        for login in 0..<2_000 {
            try store.put("current-user", profile(login, &random))
            try store.delete("current-user")
        }
        // One segment of its header alone: the key prefix it names ("current-user") is in it.
        let header = Int64(SegmentHeader.byteCount(encrypted: false, keyPrefixLength: "current-user".utf8.count))
        XCTAssertTrue(try eventually { try store.statistics().segmentBytes == header }, "\(String(describing: try? store.statistics()))")
        try store.close()
        XCTAssertEqual(try fileBytes(dir.path), header)
        let reopened = try CaskStore.open(at: dir.path, options: options())
        XCTAssertEqual(reopened.count, 0)
        XCTAssertNil(try reopened.get("current-user"))
        try reopened.close()
    }

    /// An app killed before its idle check leaves the store mostly dead: the next open compacts it
    /// once it has been idle, without a write.
    func testAnOpenFindingASmallStoreMostlyDeadCompactsIt() throws {
        let dir = TemporaryDirectory("cask-small-reopen")
        var random = SeededGenerator.fromEnvironment(fallback: 14)
        let first = try CaskStore.open(at: dir.path, options: options(idleDelay: 3600))
        for login in 0..<1_000 {
            try first.put("current-user", profile(login, &random))
            try first.put("current-user", Array("{\"id\":7}".utf8))
        }
        try first.close()
        let store = try CaskStore.open(at: dir.path, options: options())
        XCTAssertGreaterThan(try store.statistics().deadBytes, 100_000)
        XCTAssertTrue(try eventually { try store.statistics().deadBytes == 0 }, "\(String(describing: try? store.statistics()))")
        XCTAssertEqual(try store.get("current-user"), Array("{\"id\":7}".utf8))
        try store.close()
    }

    /// Writes without a pause: the store is compacted whenever its dead bytes pass 8 MiB and its
    /// live bytes, so it never grows to a whole segment (40 MiB of rewrites of 100 keys).
    func testContinuousRewritesStayBounded() throws {
        let dir = TemporaryDirectory("cask-small-burst")
        let store = try CaskStore.open(at: dir.path, options: options(idleDelay: 3600))
        var random = SeededGenerator.fromEnvironment(fallback: 15)
        var model: [[UInt8]: [UInt8]] = [:]
        var largest: Int64 = 0
        for round in 0..<400 {
            for key in 0..<100 {
                let k = Array("settings/\(key)".utf8), value = random.bytes(1_000)
                try store.put(k, value)
                model[k] = value
            }
            if round % 10 == 0 { largest = max(largest, try store.statistics().segmentBytes) }
        }
        XCTAssertTrue(try eventually { try store.statistics().deadBytes < CompactionWatch.burstStep * 2 }, "\(String(describing: try? store.statistics()))")
        // Compactions run in the background while writes go on, so the store can pass the step
        // by what is written during one; it never nears the 40 MiB written.
        XCTAssertLessThan(largest, 24 << 20, "the store grew to \(largest) bytes")
        assertStore(store, matches: model, "after the rewrites")
        try store.close()
        let reopened = try CaskStore.open(at: dir.path, options: options(idleDelay: 0))
        assertStore(reopened, matches: model, "after reopen")
        try reopened.close()
    }

    /// The policy leaves alone what it must: a store with little dead data, one larger than a
    /// segment (the seal-time policy's), and every store when the delay is 0 or automatic
    /// compaction is off.
    func testWhatIsNotCompacted() throws {
        var random = SeededGenerator.fromEnvironment(fallback: 16)
        func run(_ options: CaskStore.Options, keys: Int, rewrites: Int) throws -> CaskStore.Statistics {
            let dir = TemporaryDirectory("cask-small-untouched")
            let store = try CaskStore.open(at: dir.path, options: options)
            for round in 0...rewrites {
                for key in 0..<keys { try store.put(Array("k\(key)".utf8), random.bytes(round == 0 ? 100 : 200)) }
            }
            Thread.sleep(forTimeInterval: 0.6)
            defer { try? store.close() }
            return try store.statistics()
        }
        // Less dead than live: the 100-byte values are rewritten once, with 200 bytes.
        XCTAssertGreaterThan(try run(options(), keys: 200, rewrites: 1).deadBytes, 0)
        var off = options(idleDelay: 0)
        XCTAssertGreaterThan(try run(off, keys: 200, rewrites: 5).deadBytes, 0)
        off = options()
        off.automaticCompaction = false
        XCTAssertGreaterThan(try run(off, keys: 200, rewrites: 5).deadBytes, 0)
        var bigger = options()
        bigger.maxSegmentSize = 64 << 10  // the store spans several segments; their seals decide
        bigger.compactionMinDeadBytes = 1 << 40
        let spanning = try run(bigger, keys: 200, rewrites: 5)
        XCTAssertGreaterThan(spanning.segmentBytes, bigger.maxSegmentSize)
        XCTAssertGreaterThan(spanning.deadBytes, 0)
    }
}
