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
}
