import Dispatch
import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// `store.suspending`: writes, syncs and compactions for Swift concurrency. A durable write
/// suspends its task until a sync covers it, instead of blocking one of the cooperative pool's few
/// threads through the `fdatasync`; it is acknowledged only once durable, shares syncs with every
/// other writer, blocking ones included, and gets the failure of the sync that should have
/// covered it.
final class SuspendingTests: XCTestCase {
    typealias Rule = FaultInjectingFileSystem.Rule

    private static func value(_ n: Int) -> [UInt8] { Array("value of \(n) ".utf8) + [UInt8](repeating: UInt8(n & 0xFF), count: n % 300) }

    /// Four times as many durable writers as the pool has threads wait for a sync that is held
    /// inside `fdatasync`: with writes that block their thread, every thread of the pool would wait
    /// there and nothing else in the process could run. Here other tasks run to completion
    /// meanwhile; no write returns before the held sync is over; then all return, having shared at
    /// most two syncs.
    func testDurableWritersLeaveTheCooperativePoolFree() async throws {
        let dir = TemporaryDirectory("cask-suspending")
        defer { dir.remove() }
        let fileSystem = FaultInjectingFileSystem()
        let store = try CaskStore.open(at: dir.path, options: .manualCompaction(.fsync, fileSystem: fileSystem))
        let gate = FaultInjectingFileSystem.Gate()
        fileSystem.inject(Rule(.fdatasync, pathSuffix: ".cask", .nth(1), .pause(gate)))
        let syncsBefore = fileSystem.count(.fdatasync)

        // If the pool is blocked after all, the test cannot go on: open the gate and fail.
        let stalled = Lock(false), done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            if done.wait(timeout: .now() + 20) == .timedOut {
                stalled.withLock { $0 = true }
                gate.open()
            }
        }
        let writers = 4 * ProcessInfo.processInfo.activeProcessorCount
        let acknowledged = Lock(0)
        let acknowledge: @Sendable (Result<Int, CaskError>) -> Void = { _ in acknowledged.withLock { $0 += 1 } }
        let puts = Task { try await SuspendingTests.put(0..<writers, into: store, done: acknowledge) }
        let reached = Lock(false)
        await Self.onDispatchThread { reached.withLock { $0 = gate.waitUntilReached(seconds: 30) } }
        guard reached.withLock({ $0 }) else {
            gate.open()
            done.signal()
            _ = try? await puts.value
            return XCTFail("no write synced")
        }
        // Every write is in the store (readers see it) and waits for its sync.
        for n in 0..<writers {
            while try store.get("k\(n)") == nil { try await Task.sleep(for: .milliseconds(1)) }
        }
        let others = await withTaskGroup(of: Int.self) { group in
            for n in 0..<writers { group.addTask { n } }
            return await group.reduce(0, +)
        }
        XCTAssertEqual(others, writers * (writers - 1) / 2)
        XCTAssertEqual(acknowledged.withLock { $0 }, 0, "a write returned before the sync that covers it")
        XCTAssertFalse(stalled.withLock { $0 }, "the writers blocked the cooperative pool")

        gate.open()
        try await puts.value
        done.signal()
        XCTAssertEqual(acknowledged.withLock { $0 }, writers)
        XCTAssertLessThanOrEqual(fileSystem.count(.fdatasync) - syncsBefore, 2, "the waiting writers did not share a sync")
        try store.close()
        let reopened = try CaskStore.open(at: dir.path, options: .readOnly)
        assertStore(reopened, matches: Dictionary(uniqueKeysWithValues: (0..<writers).map { ("k\($0)", Self.value($0)) }), "reopened")
    }

    /// 1000 tasks write durably while two threads make blocking durable puts and a task sleeps
    /// 1 ms at a time: every write lands, the writers share syncs (each takes 2 ms, as on a disk
    /// that syncs in 2 ms), and the sleeper's wake-up delays are printed (timing is the
    /// benchmark's to judge: `fillsync_tasks`).
    func testThousandsOfDurableTasksBesideBlockingWriters() async throws {
        let dir = TemporaryDirectory("cask-suspending")
        defer { dir.remove() }
        let fileSystem = FaultInjectingFileSystem()
        fileSystem.inject(Rule(.fdatasync, pathSuffix: ".cask", .after(0), .delay(microseconds: 2000)))
        let store = try CaskStore.open(at: dir.path, options: .manualCompaction(.fsync, fileSystem: fileSystem))
        let syncsBefore = fileSystem.count(.fdatasync)

        let tasks = 1000, blockingPuts = 100
        // Threads of their own, as blocking calls should have: not Dispatch's, which on Linux are
        // the cooperative pool's too.
        let blocking = DispatchGroup()
        for thread in 0..<2 {
            blocking.enter()
            Thread {
                for n in 0..<blockingPuts { try! store.put("blocking/\(thread)/\(n)", Self.value(n)) }
                blocking.leave()
            }.start()
        }
        let sleeping = Lock(true)
        let sleeper = Task { () -> [Duration] in
            var overruns: [Duration] = []
            let clock = ContinuousClock()
            while sleeping.withLock({ $0 }) {
                let start = clock.now
                try? await Task.sleep(for: .milliseconds(1))
                overruns.append(clock.now - start - .milliseconds(1))
            }
            return overruns
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for n in 0..<tasks {
                group.addTask { try await store.suspending.put("task/\(n)", Self.value(n)) }
            }
            try await group.waitForAll()
        }
        sleeping.withLock { $0 = false }
        let overruns = await sleeper.value.sorted()
        await Self.onDispatchThread { blocking.wait() }
        let syncs = fileSystem.count(.fdatasync) - syncsBefore
        if !overruns.isEmpty {
            print("1 ms sleeps beside \(tasks) durable tasks: \(overruns.count), median overrun \(overruns[overruns.count / 2]), worst \(overruns.last!); \(syncs) syncs")
        }
        XCTAssertLessThan(syncs, (tasks + 2 * blockingPuts) / 2, "the writers did not share syncs")

        var model: [String: [UInt8]] = [:]
        for n in 0..<tasks { model["task/\(n)"] = Self.value(n) }
        for thread in 0..<2 { for n in 0..<blockingPuts { model["blocking/\(thread)/\(n)"] = Self.value(n) } }
        assertStore(store, matches: model, "open")
        try store.close()
        let reopened = try CaskStore.open(at: dir.path, options: .readOnly)
        assertStore(reopened, matches: model, "reopened")
    }

    /// Eight tasks write durably, one key after another, until the power goes out (as the 200th
    /// write returns; segments of 64 KiB, so that writes also seal segments): every write that
    /// returned is in the store as the disk holds it after the cut — only what was synced — and
    /// each task's write in flight at the cut failed.
    func testEveryAcknowledgedWriteSurvivesAPowerCut() async throws {
        let work = TemporaryDirectory("cask-suspending-powerloss", base: PowerLossTests.memoryBacked)
        defer { work.remove() }
        let directory = work.appending("store")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        let fileSystem = try PowerLossFileSystem(directory: directory)
        var options = CaskStore.Options.manualCompaction(.fsync, maxSegmentSize: 64 << 10, fileSystem: fileSystem)
        options.writeHints = false
        let store = try CaskStore.open(at: directory, options: options)

        let writers = 8
        let acknowledged = Lock<[String: [UInt8]]>([:]), attempted = Lock<[String: [UInt8]]>([:])
        let failures = await withTaskGroup(of: CaskError?.self) { group in
            for writer in 0..<writers {
                group.addTask {
                    for n in 0... {
                        let key = "w\(writer)/\(n)", value = Self.value(n * writers + writer)
                        attempted.withLock { $0[key] = value }
                        do throws(CaskError) { try await store.suspending.put(key, value) } catch { return error }
                        if acknowledged.withLock({ $0[key] = value; return $0.count }) == 200 { fileSystem.cutPowerNow() }
                    }
                    return nil
                }
            }
            return await group.reduce(into: [CaskError?]()) { $0.append($1) }
        }
        XCTAssertEqual(failures.count, writers)
        XCTAssertTrue(failures.allSatisfy { $0 != nil })
        try? store.close()

        let image = work.appending("image")
        try fileSystem.writeCrashImage(to: image, .syncedOnly)
        let reopened = try CaskStore.open(at: image, options: .readOnly)
        let survivors = acknowledged.withLock { $0 }
        XCTAssertGreaterThanOrEqual(survivors.count, 200)
        for (key, value) in survivors {
            XCTAssertEqual(try reopened.get(key), value, "acknowledged \(key) lost in the cut")
        }
        for (key, value) in attempted.withLock({ $0 }) where survivors[key] == nil {
            let held = try reopened.get(key)
            XCTAssertTrue(held == nil || held == value, "\(key) holds what was never written")
        }
        XCTAssertEqual(try reopened.count, try reopened.keys().count)
        XCTAssertLessThanOrEqual(try reopened.count, attempted.withLock { $0.count })
    }

    /// A failed `fdatasync` fails every suspended write it should have covered and every write and
    /// sync after it, suspending or not, with the same error; reads go on.
    func testAFailedSyncFailsEverySuspendedWriter() async throws {
        let dir = TemporaryDirectory("cask-suspending")
        defer { dir.remove() }
        let fileSystem = FaultInjectingFileSystem()
        let store = try CaskStore.open(at: dir.path, options: .manualCompaction(.fsync, fileSystem: fileSystem))
        try await store.suspending.put("before", [1])
        let segment = try XCTUnwrap(try FileManager.default.contentsOfDirectory(atPath: dir.path).first { $0.hasSuffix(".cask") })
        let failure = CaskError.syncFailed(path: dir.appending(segment), errno: .ioError)
        fileSystem.fail(.fdatasync, pathSuffix: ".cask", with: .ioError)

        let errors = await withTaskGroup(of: CaskError?.self) { group in
            for n in 0..<50 {
                group.addTask {
                    do throws(CaskError) {
                        try await store.suspending.put("k\(n)", Self.value(n))
                        return nil
                    } catch {
                        return error
                    }
                }
            }
            return await group.reduce(into: [CaskError?]()) { $0.append($1) }
        }
        XCTAssertEqual(errors, Array(repeating: failure, count: 50))
        await assertThrows(failure) { () throws(CaskError) in try await store.suspending.put("after", [2]) }
        await assertThrows(failure) { () throws(CaskError) in try await store.suspending.sync() }
        XCTAssertThrowsError(try store.put("after", [2])) { XCTAssertEqual($0 as? CaskError, failure) }
        XCTAssertEqual(try store.get("before"), [1])
        XCTAssertThrowsError(try store.close())
    }

    /// Every suspending call does what its blocking twin does: puts with and without expiry,
    /// deletes, objects and typed keys, batches, `sync()` (an `fdatasync` even in `.os` mode),
    /// `compact()`; in every durability mode; the same errors for bad keys and values (nothing
    /// written), a read-only store and a closed one.
    func testSuspendingCallsDoWhatTheBlockingOnesDo() async throws {
        struct Draft: Codable, Equatable, Sendable {
            var title: String
            var words: Int
        }
        let title = CaskStore.Key<String?>("title", default: nil)
        for durability in Durability.allCases {
            let dir = TemporaryDirectory("cask-suspending")
            defer { dir.remove() }
            let fileSystem = FaultInjectingFileSystem()
            var options = CaskStore.Options.manualCompaction(durability, fileSystem: fileSystem)
            options.maxValueSize = 1000
            let store = try CaskStore.open(at: dir.path, options: options)
            let suspending = store.suspending

            try await suspending.put("a", [1, 2, 3])
            try await suspending.put(Array("b".utf8), [4])
            try await suspending.put("short-lived", [5], expiresAfter: .milliseconds(1))
            try await suspending.set(Draft(title: "Hello", words: 2), forKey: "draft/1")
            try await suspending.set(Draft(title: "Gone", words: 1), forKey: "draft/2")
            try await suspending.set(Draft?.none, forKey: "draft/2")
            try await suspending.set("Cask", for: title)
            var batch = WriteBatch()
            batch.put("c", [6])
            batch.delete("a")
            try await suspending.write(batch)
            try await suspending.write(WriteBatch())
            let deletedB = try await suspending.delete("b")
            let deletedMissing = try await suspending.delete("missing")
            XCTAssertTrue(deletedB)
            XCTAssertFalse(deletedMissing)
            try await Task.sleep(for: .milliseconds(5))

            XCTAssertNil(try store.get("a"), "\(durability)")
            XCTAssertNil(try store.get("b"), "\(durability)")
            XCTAssertEqual(try store.get("c"), [6], "\(durability)")
            XCTAssertNil(try store.get("short-lived"), "\(durability): the expiry was lost")
            XCTAssertEqual(try store.get(Draft.self, forKey: "draft/1"), Draft(title: "Hello", words: 2), "\(durability)")
            XCTAssertFalse(try store.contains("draft/2"), "\(durability)")
            XCTAssertEqual(try store.value(for: title), "Cask", "\(durability)")
            let removed = try await suspending.removeValue(for: title)
            XCTAssertTrue(removed)
            XCTAssertNil(try store.value(for: title), "\(durability)")

            let syncsBefore = fileSystem.count(.fdatasync)
            try await suspending.sync()
            XCTAssertGreaterThan(fileSystem.count(.fdatasync), syncsBefore, "\(durability): sync() synced nothing")
            let compaction = try await suspending.compact()
            XCTAssertGreaterThan(compaction.recordsDropped, 0, "\(durability)")
            XCTAssertEqual(try store.get("c"), [6], "\(durability)")

            await assertThrows(.emptyKey) { () throws(CaskError) in try await suspending.put("", [1]) }
            let long = String(repeating: "k", count: Limits.maxKeyLength + 1)
            await assertThrows(.keyTooLong(length: long.utf8.count, limit: Limits.maxKeyLength)) { () throws(CaskError) in
                try await suspending.put(long, [1])
            }
            await assertThrows(.valueTooLarge(length: 1001, limit: 1000)) { () throws(CaskError) in
                try await suspending.put("big", [UInt8](repeating: 0, count: 1001))
            }
            var bad = WriteBatch()
            bad.put("fine", [1])
            bad.put("", [2])
            await assertThrows(.emptyKey) { () throws(CaskError) in try await suspending.write(bad) }
            XCTAssertNil(try store.get("fine"), "\(durability): half a refused batch was written")
            try store.close()

            let readOnly = try CaskStore.open(at: dir.path, options: .readOnly)
            XCTAssertEqual(try readOnly.get("c"), [6], "\(durability)")
            await assertThrows(.readOnly(path: readOnly.directory)) { () throws(CaskError) in try await readOnly.suspending.put("x", [1]) }
            await assertThrows(.readOnly(path: readOnly.directory)) { () throws(CaskError) in try await readOnly.suspending.delete("c") }
            await assertThrows(.readOnly(path: readOnly.directory)) { () throws(CaskError) in try await readOnly.suspending.compact() }
            try await readOnly.suspending.sync()  // nothing to sync, as for the blocking call
            try readOnly.close()
            await assertThrows(.closed(path: readOnly.directory)) { () throws(CaskError) in try await readOnly.suspending.put("x", [1]) }
            await assertThrows(.closed(path: store.directory)) { () throws(CaskError) in try await store.suspending.put("x", [1]) }
            await assertThrows(.closed(path: store.directory)) { () throws(CaskError) in try await store.suspending.sync() }
        }
    }

    // MARK: Helpers

    /// Puts `k<n>` = `value(n)` for every `n` of `keys`, each from a task of its own, suspending;
    /// tells `done` of each write that returned or failed. Throws the first failure.
    private static func put(
        _ keys: Range<Int>, into store: CaskStore, done: @escaping @Sendable (Result<Int, CaskError>) -> Void
    ) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for n in keys {
                group.addTask {
                    do throws(CaskError) {
                        try await store.suspending.put("k\(n)", Self.value(n))
                        done(.success(n))
                    } catch {
                        done(.failure(error))
                        throw error
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    private func assertThrows<T>(
        _ expected: CaskError, _ body: () async throws(CaskError) -> T, file: StaticString = #filePath, line: UInt = #line
    ) async {
        do throws(CaskError) {
            _ = try await body()
            XCTFail("no error; expected \(expected)", file: file, line: line)
        } catch {
            XCTAssertEqual(error, expected, file: file, line: line)
        }
    }

    /// Runs `body`, which blocks, on a Dispatch thread rather than one of the cooperative pool's.
    private static func onDispatchThread(_ body: @escaping @Sendable () -> Void) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                body()
                continuation.resume()
            }
        }
    }
}
