import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// `changes(forKey:)` and `changes(prefix:)`: every committed change to what is watched, in commit
/// order, and nothing else; the streams end when the store closes.
final class ObservationTests: XCTestCase {
    private func collect(_ stream: AsyncStream<CaskStore.Change>) -> (Task<[CaskStore.Change], Never>) {
        Task {
            var changes: [CaskStore.Change] = []
            for await change in stream { changes.append(change) }
            return changes
        }
    }

    func testKeyAndPrefixStreamsSeeTheirChangesInOrder() async throws {
        let dir = TemporaryDirectory("cask-observe")
        let store = try CaskStore.open(at: dir.path)
        let user = collect(store.changes(forKey: Array("user".utf8)))
        let drafts = collect(store.changes(prefix: Array("drafts/ada/".utf8)))
        try store.put("user", [1])
        try store.put("drafts/ada/1", [2])
        try store.put("drafts/bob/1", [3])
        try store.delete("user")
        try store.delete("missing")  // no change: nothing written
        var batch = WriteBatch()
        batch.put("drafts/ada/2", [4])
        batch.delete("drafts/ada/1")
        batch.put("user", [5])
        try store.write(batch)
        try store.close()
        let userChanges = await user.value
        let draftChanges = await drafts.value
        XCTAssertEqual(userChanges.map(\.kind), [.put, .delete, .put])
        XCTAssertEqual(draftChanges.map { String(decoding: $0.key, as: UTF8.self) }, ["drafts/ada/1", "drafts/ada/2", "drafts/ada/1"])
        XCTAssertEqual(draftChanges.map(\.kind), [.put, .put, .delete])
        let seqs = (userChanges + draftChanges).map(\.seq).sorted()
        XCTAssertEqual(Set(seqs).count, seqs.count)
    }

    func testConcurrentWritersAreObservedInCommitOrder() async throws {
        let dir = TemporaryDirectory("cask-observe-order")
        let store = try CaskStore.open(at: dir.path)
        let all = collect(store.changes(prefix: [UInt8]()))
        DispatchQueue.concurrentPerform(iterations: 4) { writer in
            for i in 0..<250 {
                try! store.put("w\(writer)/k\(i % 10)", [UInt8(i & 0xFF)])
                if i % 7 == 0 { try! store.delete("w\(writer)/k\(i % 10)") }
            }
        }
        try store.close()
        let changes = await all.value
        XCTAssertEqual(changes.count, 4 * (250 + 36))
        XCTAssertEqual(changes.map(\.seq), changes.map(\.seq).sorted(), "changes out of commit order")
        // The last change of each key is what a reopened store holds.
        var last: [[UInt8]: CaskStore.Change] = [:]
        for change in changes { last[change.key] = change }
        let reopened = try CaskStore.open(at: dir.path)
        for (key, change) in last {
            XCTAssertEqual(try reopened.contains(key), change.kind == .put, String(decoding: key, as: UTF8.self))
        }
        try reopened.close()
    }

    func testExpiryIsObserved() async throws {
        let dir = TemporaryDirectory("cask-observe-expiry")
        let store = try CaskStore.open(at: dir.path)
        let session = collect(store.changes(forKey: Array("session".utf8)))
        try store.put("session", [1], expiresAfter: .milliseconds(50))
        try store.put("other", [2], expiresAfter: .milliseconds(50))
        try await Task.sleep(for: .milliseconds(400))
        try store.close()
        let changes = await session.value
        XCTAssertEqual(changes.map(\.kind), [.put, .expire])
    }

    func testAnOverwrittenExpiringValueIsNotReportedExpired() async throws {
        let dir = TemporaryDirectory("cask-observe-expiry-overwritten")
        let store = try CaskStore.open(at: dir.path)
        let session = collect(store.changes(forKey: Array("session".utf8)))
        try store.put("session", [1], expiresAfter: .milliseconds(50))
        try store.put("session", [2])
        try await Task.sleep(for: .milliseconds(300))
        try store.close()
        let changes = await session.value
        XCTAssertEqual(changes.map(\.kind), [.put, .put])
    }

    /// A stream opened after the expiring put, or after the store was reopened, still gets the
    /// `.expire` (issue 23, item 2: it never came); an expiry that passed before the stream
    /// existed is not news to it. The notice carries the seq of the put that expired.
    func testExpiryReachesStreamsOpenedAfterThePutAndAfterAReopen() async throws {
        let dir = TemporaryDirectory("cask-observe-expiry-later")
        defer { dir.remove() }
        var store = try CaskStore.open(at: dir.path)
        try store.put("session", [1], expiresAfter: .milliseconds(150))
        try store.put("gone", [2], expiresAfter: .milliseconds(1))
        try await Task.sleep(for: .milliseconds(20))
        let later = collect(store.changes(prefix: [UInt8]()))
        try await Task.sleep(for: .milliseconds(500))
        try store.close()
        var changes = await later.value
        XCTAssertEqual(changes.map(\.kind), [.expire])
        XCTAssertEqual(changes.map { String(decoding: $0.key, as: UTF8.self) }, ["session"])
        XCTAssertEqual(changes.first?.seq, 1)

        // Written before a close, expiring after the reopen.
        store = try CaskStore.open(at: dir.path)
        try store.put("token", [3], expiresAfter: .milliseconds(300))
        try store.close()
        store = try CaskStore.open(at: dir.path)
        let reopened = collect(store.changes(forKey: Array("token".utf8)))
        try await Task.sleep(for: .milliseconds(700))
        try store.close()
        changes = await reopened.value
        XCTAssertEqual(changes.map(\.kind), [.expire])
    }

    /// Two streams opened at once on a store that had none: the second must not discard, as old
    /// news, an expiry that passed after the first was registered (issue 23, gap 6). The
    /// interleaving is forced: the state lock is held while stream B is being opened, stream A is
    /// registered meanwhile (as a first stream that got past its own check would be), and the
    /// expiry passes before the lock is let go. B used to decide "nobody watches" before waiting
    /// for the lock, and then took A's notice away.
    func testASecondFirstStreamDoesNotSwallowANoticeDueToTheFirst() async throws {
        let dir = TemporaryDirectory("cask-observe-expiry-first")
        defer { dir.remove() }
        let store = try CaskStore.open(at: dir.path)
        try store.put("session", [1], expiresAfter: .milliseconds(60))
        let locked = DispatchSemaphore(value: 0)
        let holder = Thread {
            store.state.write { _ in
                locked.signal()
                Thread.sleep(forTimeInterval: 0.25)
            }
        }
        holder.start()
        locked.wait()
        let second = Lock<AsyncStream<CaskStore.Change>?>(nil)
        let opening = Thread { second.withLock { $0 = store.changes(prefix: [UInt8]()) } }
        opening.start()
        try await Task.sleep(for: .milliseconds(30))  // B is waiting for the lock
        let (first, continuation) = AsyncStream<CaskStore.Change>.makeStream()
        let id = store.observers.add(ObserverRegistry.Filter(bytes: [], isPrefix: true), continuation)
        let firstChanges = collect(first)
        while second.withLock({ $0 == nil }) { try await Task.sleep(for: .milliseconds(10)) }
        let secondChanges = collect(second.withLock { $0! })
        try await Task.sleep(for: .milliseconds(200))
        store.observers.remove(id)
        continuation.finish()
        try store.close()
        let delivered = await firstChanges.value
        XCTAssertEqual(delivered.map(\.kind), [.expire], "the first stream's notice")
        XCTAssertEqual(delivered.first?.seq, 1)
        _ = await secondChanges.value
    }

    /// A compaction that drops an expired record before the expiry timer ran (the timer waits
    /// behind other background work: here, a stalled queue) gives the notice itself; forgotten by
    /// the index, the key would never get one.
    func testACompactionThatDropsAnExpiredKeyGivesItsNotice() async throws {
        let dir = TemporaryDirectory("cask-observe-expiry-compacted")
        var options = CaskStore.Options.manualCompaction()
        options.idleCompactionDelay = 0
        let store = try CaskStore.open(at: dir.path, options: options)
        let session = collect(store.changes(forKey: Array("session".utf8)))
        try store.put("session", [1], expiresAfter: .milliseconds(100))
        try store.put("keep", [2])
        try store.put("keep", [3])  // a dead record: the segment is worth compacting
        let stalled = DispatchSemaphore(value: 0)
        store.background.async { stalled.wait() }
        try await Task.sleep(for: .milliseconds(300))
        let result = try store.compact()
        XCTAssertEqual(result.recordsDropped, 2, "the expired put and the overwritten value")
        try await Task.sleep(for: .milliseconds(100))
        stalled.signal()
        try store.close()
        let changes = await session.value
        XCTAssertEqual(changes.map(\.kind), [.put, .expire])
        XCTAssertEqual(changes.last?.seq, 1)
    }

    /// Stale notices (keys overwritten many times with an expiry) do not pile up: the pending
    /// notices stay within about twice the keys that expire.
    func testOverwrittenExpiriesDoNotPileUp() throws {
        var table = ExpiryTable()
        for seq in 1...50_000 as ClosedRange<UInt64> {
            let key = Array("k\(seq % 10)".utf8)
            key.withUnsafeBytes { table.set($0, expiresAt: 1_000_000 + seq, seq: seq) }
        }
        XCTAssertLessThanOrEqual(table.pendingNotices, 2 * 10 + 1024 + 1)
        XCTAssertEqual(table.nextNoticeTime(), 1_000_000 + 49_991)
        let due = table.takeNotices(dueBy: 2_000_000)
        XCTAssertEqual(due.map(\.seq), Array(49_991...50_000))
        XCTAssertNil(table.nextNoticeTime())
        XCTAssertTrue(table.takeNotices(dueBy: 3_000_000).isEmpty, "each notice is given once")
    }

    /// `observe` yields the value now, then after every change — put, delete, expiry — with no gap
    /// between the first read and the changes (issue 23, item 11), and ends when the store closes.
    func testObserveYieldsTheCurrentValueThenEveryChange() async throws {
        let dir = TemporaryDirectory("cask-observe-value")
        defer { dir.remove() }
        let store = try CaskStore.open(at: dir.path)
        try store.set(Profile.sample(1), forKey: "current-user")
        var values = store.observe(Profile.self, forKey: "current-user").makeAsyncIterator()
        var next = try await values.next()
        XCTAssertEqual(next, .some(Profile.sample(1)), "the value when observing began")
        try store.set(Profile.sample(2), forKey: "current-user")
        next = try await values.next()
        XCTAssertEqual(next, .some(Profile.sample(2)))
        try store.delete("current-user")
        next = try await values.next()
        XCTAssertEqual(next, .some(nil))
        try store.set(Profile.sample(3), forKey: "current-user", expiresAfter: .milliseconds(50))
        next = try await values.next()
        XCTAssertEqual(next, .some(Profile.sample(3)))
        next = try await values.next()
        XCTAssertEqual(next, .some(nil), "expired")
        // A value that does not decode ends the stream with the error.
        try store.put("current-user", Array("not a profile".utf8))
        do {
            _ = try await values.next()
            XCTFail("a value that does not decode ends the stream")
        } catch {
            guard case .objectDecodingFailed = error as? CaskError else { return XCTFail("\(error)") }
        }
        // Writers racing the start: every stream's first value or a later one shows each write.
        var streams: [AsyncThrowingStream<Int?, any Error>] = []
        let writer = Task.detached {
            for i in 1...200 { try store.set(i, forKey: "counter") }
        }
        for _ in 0..<20 { streams.append(store.observe(Int.self, forKey: "counter")) }
        try await writer.value
        for stream in streams {
            var last: Int?? = nil
            for try await value in stream {
                last = value
                if value == 200 { break }
            }
            XCTAssertEqual(last, .some(200), "every stream comes to the last write")
        }
        // Closing the store ends a stream.
        let ending = store.observe(Int.self, forKey: "counter")
        try store.close()
        var count = 0
        for try await _ in ending { count += 1 }
        XCTAssertEqual(count, 1, "the first value, then the end")
    }

    /// In `.buffered` mode the first value and the later ones come out of the write buffer (reading
    /// them under the writer mutex, as the first version did, deadlocked).
    func testObserveAValueStillInTheWriteBuffer() async throws {
        let dir = TemporaryDirectory("cask-observe-buffered")
        defer { dir.remove() }
        let store = try CaskStore.open(at: dir.path, options: CaskStore.Options(durability: .buffered))
        try store.set(41, forKey: "answer")
        var values = store.observe(Int.self, forKey: "answer").makeAsyncIterator()
        var next = try await values.next()
        XCTAssertEqual(next, .some(41))
        try store.set(42, forKey: "answer")
        next = try await values.next()
        XCTAssertEqual(next, .some(42))
        try store.close()
    }

    /// Review findings: a record applied twice by recovery (same time and seq) gives one notice, and
    /// a rebuild of the heap keeps a notice that is due but not given yet.
    func testExpiryNoticesAreGivenOnceAndSurviveARebuild() {
        var table = ExpiryTable()
        let key = Array("token".utf8)
        key.withUnsafeBytes { table.set($0, expiresAt: 100, seq: 7) }
        key.withUnsafeBytes { table.set($0, expiresAt: 100, seq: 7) }
        XCTAssertEqual(table.takeNotices(dueBy: 200).map(\.seq), [7])
        XCTAssertTrue(table.takeNotices(dueBy: 1_000).isEmpty)
        let late = Array("late".utf8)
        late.withUnsafeBytes { table.set($0, expiresAt: 500, seq: 8) }  // already past: due at the next take
        let other = Array("other".utf8)
        for seq in 9...1_200 as ClosedRange<UInt64> { other.withUnsafeBytes { table.set($0, expiresAt: 5_000 + seq, seq: seq) } }
        XCTAssertLessThanOrEqual(table.pendingNotices, 2 * 3 + 1024 + 1)
        XCTAssertEqual(table.takeNotices(dueBy: 1_000).map { String(decoding: $0.key, as: UTF8.self) }, ["late"])
    }
}
