import Foundation
import Synchronization  // Atomic
import XCTest
@testable import Cask
import CaskTestSupport

/// Many threads on the same keys at once. Values describe themselves (key, writer, version,
/// checksum), so a reader can tell a torn or mixed-up value from a real one.
///
/// Run under the thread sanitizer too:
/// `swift test --sanitize=thread --scratch-path /tmp/cask-build-tsan --filter ConcurrencyTests`
final class ConcurrencyTests: XCTestCase {
    static let keyCount = 16

    func testReadersWritersAndDeletersOnTheSameKeysOS() throws {
        try readersWritersAndDeleters(.os)
    }

    func testReadersWritersAndDeletersOnTheSameKeysBuffered() throws {
        try readersWritersAndDeleters(.buffered)
    }

    func testReadersWritersAndDeletersOnTheSameKeysFsync() throws {
        try readersWritersAndDeleters(.fsync, operationsPerWriter: 300)
    }

    /// The same with compactions running all along, on demand and automatic.
    func testReadersWritersAndDeletersWhileCompacting() throws {
        try readersWritersAndDeleters(.os, compacting: true)
    }

    /// The same on an encrypted store: gets without the lock open records in buffers of their own,
    /// compactions seal every record they copy again, and rotations start segments under new salts.
    func testReadersWritersAndDeletersWhileCompactingEncrypted() throws {
        try readersWritersAndDeleters(.os, compacting: true, encryption: .key(EncryptionTests.key))
    }

    /// Compactions moving keys beside readers, encrypted.
    func testReadersWhileCompactionsMoveManyKeysEncrypted() throws {
        try readersWhileCompactionsMoveManyKeys(encryption: .key(EncryptionTests.key))
    }

    /// Compactions that move thousands of keys while readers read them: a compaction switches the
    /// index to the copies beside readers (``KeyIndex/switchLocation(_:from:to:)``), so a reader
    /// must see each key whole at its old or its new copy, never an error, never an older version,
    /// never nothing. One writer overwrites every key in rounds, so that each compaction has most
    /// of the store to move; readers also walk the index (`keys()`) now and then.
    func testReadersWhileCompactionsMoveManyKeys() throws {
        try readersWhileCompactionsMoveManyKeys(encryption: .none)
    }

    private func readersWhileCompactionsMoveManyKeys(encryption: Encryption) throws {
        let dir = TemporaryDirectory("cask-concurrency-switch")
        defer { dir.remove() }
        var options = CaskStore.Options(durability: .os)
        options.maxSegmentSize = 64 << 10
        options.automaticCompaction = false
        options.encryption = encryption
        let store = try CaskStore.open(at: dir.path, options: options)
        let keyCount = 3_000, rounds = 4, readers = 2
        for key in 0..<keyCount { try store.put(Self.key(key), SelfDescribingValue.make(key: key, writer: 0, version: 1, padding: 40)) }
        let writerDone = Atomic(false), compactorDone = Atomic(false)
        let moved = Atomic(0)
        let problems = Problems()

        runThreads(2 + readers) { thread in
            var random = SeededGenerator(seed: UInt64(thread) &+ 501)
            switch thread {
            case 0:
                // Writer: rounds of overwrites of every key, in random order.
                for version in 2...UInt64(rounds + 1) {
                    for key in (0..<keyCount).shuffled(using: &random) {
                        let value = SelfDescribingValue.make(key: key, writer: 0, version: version, padding: 40)
                        do { try store.put(Self.key(key), value) } catch { problems.add("writer: put failed: \(error)") }
                    }
                }
                writerDone.store(true, ordering: .releasing)
            case 1:
                // Compactor: while the writer runs, then twice more on the settled store.
                var settledRuns = 0
                while settledRuns < 2 {
                    if writerDone.load(ordering: .acquiring) { settledRuns += 1 }
                    do { moved.add(try store.compact().recordsCopied, ordering: .relaxed) } catch { problems.add("compact failed: \(error)") }
                }
                compactorDone.store(true, ordering: .releasing)
            default:
                // Reader: random keys until the compactions are done; versions never go back.
                var seen = [UInt64](repeating: 1, count: keyCount)
                var reads = 0
                while !compactorDone.load(ordering: .acquiring) {
                    let key = Int.random(in: 0..<keyCount, using: &random)
                    reads += 1
                    if reads % 5_000 == 0, (try? store.keys().count) != keyCount { problems.add("reader: keys() did not list every key") }
                    let value: [UInt8]?
                    do { value = try store.get(Self.key(key)) } catch {
                        problems.add("reader: get failed: \(error)")
                        continue
                    }
                    guard let value, let decoded = SelfDescribingValue.decode(value), decoded.key == key else {
                        problems.add("reader: \(Self.key(key)) missing, torn or foreign")
                        continue
                    }
                    if decoded.version < seen[key] {
                        problems.add("reader: \(Self.key(key)) went back from v\(seen[key]) to v\(decoded.version)")
                    }
                    seen[key] = decoded.version
                }
            }
        }
        problems.assertNone()
        // Compactions moved keys while the readers read. (Not necessarily every key: a compaction
        // takes only segments holding dead records, and a segment the last round filled holds none.)
        XCTAssertGreaterThan(moved.load(ordering: .relaxed), 0)

        let final = SelfDescribingValue.make(key: 0, writer: 0, version: UInt64(rounds + 1), padding: 40)
        XCTAssertEqual(try store.get(Self.key(0)), final)
        for key in 0..<keyCount {
            XCTAssertEqual(try store.get(Self.key(key)).flatMap(SelfDescribingValue.decode)?.version, UInt64(rounds + 1), Self.key(key))
        }
        let statistics = try store.statistics()
        XCTAssertEqual(statistics.segments.reduce(0) { $0 + $1.liveRecords }, keyCount, "live records after the switches")
        try store.close()
        let reopened = try CaskStore.open(at: dir.path, options: options)
        XCTAssertTrue(reopened.recoveryReport.isClean, "\(reopened.recoveryReport)")
        XCTAssertEqual(reopened.count, keyCount)
        try reopened.close()
    }

    /// 3 writers, 1 deleter and 3 readers on 16 keys, with rotations. Readers check every value is
    /// whole and that, per (key, writer), versions never go backwards. At the end, the store
    /// reopened holds exactly what the last reads saw.
    private func readersWritersAndDeleters(
        _ durability: Durability, operationsPerWriter: Int = 1500, compacting: Bool = false, encryption: Encryption = .none
    ) throws {
        let dir = TemporaryDirectory("cask-concurrency")
        defer { dir.remove() }
        var options = CaskStore.Options(durability: durability)
        options.encryption = encryption
        options.maxSegmentSize = 32 << 10
        options.bufferSize = 4 << 10
        options.flushInterval = 0.005
        if compacting {
            options.compactionDeadRatio = 0.3
            options.compactionMinDeadBytes = 0
        }
        let store = try CaskStore.open(at: dir.path, options: options)
        let writers = 3, readers = compacting ? 2 : 3
        let writersDone = Atomic(0)
        let problems = Problems()

        runThreads(writers + 1 + readers + (compacting ? 1 : 0)) { thread in
            var random = SeededGenerator(seed: UInt64(thread) &+ 77)
            if thread < writers {
                // Writer: versions 1, 2, 3, ... of its own, on every key.
                for version in 1...operationsPerWriter {
                    let key = Int.random(in: 0..<Self.keyCount, using: &random)
                    let value = SelfDescribingValue.make(key: key, writer: thread, version: UInt64(version),
                                                         padding: Int.random(in: 0..<300, using: &random))
                    do { try store.put(Self.key(key), value) } catch { problems.add("writer \(thread): put failed: \(error)") }
                }
                writersDone.add(1, ordering: .releasing)
            } else if compacting && thread == writers + 1 + readers {
                // Compactor, until the writers are done.
                while writersDone.load(ordering: .acquiring) < writers {
                    do { try store.compact() } catch { problems.add("compact failed: \(error)") }
                    usleep(1_000)
                }
            } else if thread == writers {
                // Deleter, until the writers are done.
                while writersDone.load(ordering: .acquiring) < writers {
                    let key = Int.random(in: 0..<Self.keyCount, using: &random)
                    do { try store.delete(Self.key(key)) } catch { problems.add("deleter: delete failed: \(error)") }
                    usleep(200)
                }
            } else {
                // Reader, until the writers are done (and one pass after).
                var seen = [[UInt64]](repeating: [UInt64](repeating: 0, count: writers), count: Self.keyCount)
                var reads = 0
                var finalPass = false
                while true {
                    finalPass = writersDone.load(ordering: .acquiring) == writers
                    for _ in 0..<Self.keyCount {
                        let key = Int.random(in: 0..<Self.keyCount, using: &random)
                        reads += 1
                        let value: [UInt8]?
                        do { value = try store.get(Self.key(key)) } catch {
                            problems.add("reader: get failed: \(error)")
                            continue
                        }
                        guard let value else { continue }
                        guard let decoded = SelfDescribingValue.decode(value) else {
                            problems.add("reader: \(Self.key(key)) holds a torn or foreign value of \(value.count) bytes")
                            continue
                        }
                        guard decoded.key == key, decoded.writer < writers else {
                            problems.add("reader: \(Self.key(key)) holds the value of key \(decoded.key) from writer \(decoded.writer)")
                            continue
                        }
                        if decoded.version < seen[key][decoded.writer] {
                            problems.add("reader: \(Self.key(key)) went back from v\(seen[key][decoded.writer]) to v\(decoded.version) of writer \(decoded.writer)")
                        }
                        seen[key][decoded.writer] = decoded.version
                        _ = try? store.contains(Self.key(key))
                    }
                    if reads % 64 == 0 { _ = try? store.keys() }
                    if finalPass { break }
                }
            }
        }
        problems.assertNone()

        var final: [String: [UInt8]] = [:]
        for key in 0..<Self.keyCount { final[Self.key(key)] = try store.get(Self.key(key)) }
        XCTAssertEqual(store.count, final.count)
        try store.close()
        let reopened = try CaskStore.open(at: dir.path, options: options)
        XCTAssertTrue(reopened.recoveryReport.isClean, "\(reopened.recoveryReport)")
        for key in 0..<Self.keyCount { XCTAssertEqual(try reopened.get(Self.key(key)), final[Self.key(key)], Self.key(key)) }
        XCTAssertEqual(reopened.count, final.count)
        try reopened.close()
    }

    /// 8 writers in `.fsync` mode share `fdatasync`s (group commit), and each put returns only
    /// once its own record is covered by a completed sync.
    func testGroupCommitWithEightWriters() throws {
        let dir = TemporaryDirectory("cask-group-commit")
        defer { dir.remove() }
        let fileSystem = FaultInjectingFileSystem()
        // A slow disk: while one sync runs, the other writers queue behind it.
        fileSystem.inject(.init(.fdatasync, .after(0), .delay(microseconds: 2_000)))
        var options = CaskStore.Options(durability: .fsync)
        options.maxSegmentSize = 64 << 10
        options.fileSystem = fileSystem
        let store = try CaskStore.open(at: dir.path, options: options)
        let writers = 8, putsPerWriter = 60
        let problems = Problems()
        fileSystem.clearTrace()

        runThreads(writers) { writer in
            for n in 0..<putsPerWriter {
                let value = SelfDescribingValue.make(key: n, writer: writer, version: UInt64(n + 1), padding: 200)
                do {
                    try store.put("w\(writer)-\(n)", value)
                } catch {
                    problems.add("writer \(writer): put failed: \(error)")
                    continue
                }
                if !fileSystem.isLastWriteOfCurrentThreadDurable() {
                    problems.add("writer \(writer): put \(n) returned before its record was synced")
                }
            }
        }
        problems.assertNone()
        let puts = writers * putsPerWriter
        let syncs = fileSystem.count(.fdatasync)
        print("group commit: \(puts) puts, \(syncs) fdatasyncs (including rotations and hints)")
        XCTAssertLessThan(syncs, puts, "writers did not share fdatasyncs")
        assertGroupCommitIsIdle(store)
        try store.close()

        let reopened = try CaskStore.open(at: dir.path)
        XCTAssertEqual(reopened.count, puts)
        for writer in 0..<writers {
            for n in 0..<putsPerWriter {
                XCTAssertEqual(try reopened.get("w\(writer)-\(n)"),
                               SelfDescribingValue.make(key: n, writer: writer, version: UInt64(n + 1), padding: 200))
            }
        }
        try reopened.close()
    }

    /// Group commit counts the writers on their way to a sync, so that a leader can wait for them:
    /// every kind of write must leave the count as it found it — puts and batches that are synced,
    /// deletes of missing keys (nothing written), puts that fail under the writer mutex (a full
    /// disk), and writers whose sync fails — or every later sync would wait for writers that never
    /// come.
    func testGroupCommitCountsEveryWriterOut() throws {
        let dir = TemporaryDirectory("cask-group-commit-count")
        defer { dir.remove() }
        let fileSystem = FaultInjectingFileSystem()
        fileSystem.inject(.init(.fdatasync, .after(0), .delay(microseconds: 500)))
        var options = CaskStore.Options(durability: .fsync)
        options.maxSegmentSize = 16 << 10
        options.fileSystem = fileSystem
        let store = try CaskStore.open(at: dir.path, options: options)
        let problems = Problems()
        runThreads(6) { writer in
            for n in 0..<40 {
                do {
                    switch n % 4 {
                    case 0, 1: try store.put("w\(writer)-\(n)", [UInt8](repeating: UInt8(n), count: 100))
                    case 2: if try store.delete("missing-\(writer)-\(n)") { problems.add("deleted a missing key") }
                    default:
                        var batch = WriteBatch()
                        batch.put("b\(writer)-\(n)", [1, 2, 3])
                        batch.delete("w\(writer)-\(n - 3)")
                        try store.write(batch)
                    }
                } catch {
                    problems.add("writer \(writer): \(error)")
                }
            }
        }
        problems.assertNone()
        assertGroupCommitIsIdle(store, "after puts, deletes of missing keys and batches")

        // Puts that fail under the writer mutex: a full disk (the fault-injecting file system has
        // no mapped writes, so every put is a pwrite).
        fileSystem.inject(.init(.pwrite, pathSuffix: ".cask", .after(0), .fail(.noSpace)))
        runThreads(4) { writer in
            for n in 0..<10 {
                do {
                    try store.put("full-\(writer)-\(n)", [9, 9])
                    problems.add("writer \(writer): a put on a full disk was acknowledged")
                } catch CaskError.diskFull {
                } catch {
                    problems.add("writer \(writer): \(error), not diskFull")
                }
            }
        }
        problems.assertNone()
        assertGroupCommitIsIdle(store, "after puts that failed on a full disk")

        // Writers whose sync fails. The first sync is slow, so that writers gather behind it; the
        // next one fails, with them waiting for it; from then on every put fails with its error.
        fileSystem.removeAllRules()
        fileSystem.inject(.init(.fdatasync, .nth(1), .delay(microseconds: 20_000)))
        fileSystem.inject(.init(.fdatasync, .after(1), .fail(.ioError)))
        // An atomic, not a Mutex: the thread sanitizer reported the Mutex captured by the threads'
        // closure as a Swift access race (once in many runs).
        let failed = Atomic(0)
        runThreads(4) { writer in
            for n in 0..<5 {
                do {
                    try store.put("lost-\(writer)-\(n)", [7])
                } catch {
                    failed.add(1, ordering: .relaxed)
                    if case .syncFailed = error as? CaskError {} else { problems.add("writer \(writer): \(error), not syncFailed") }
                }
            }
        }
        problems.assertNone()
        XCTAssertGreaterThan(failed.load(ordering: .relaxed), 0, "no put saw the failed sync")
        assertGroupCommitIsIdle(store, "after failed syncs")
        fileSystem.removeAllRules()
        _ = try? store.close()
    }

    /// No writer counted as on its way to a sync, none waiting for one, no sync running.
    private func assertGroupCommitIsIdle(_ store: CaskStore, _ context: String = "", file: StaticString = #filePath, line: UInt = #line) {
        let (arriving, waiting, syncing) = store.groupCommit.state.withLock { sync, _ in (sync.arriving, sync.waiting.count, sync.syncing) }
        XCTAssertEqual(arriving, 0, "writers still counted as arriving \(context)", file: file, line: line)
        XCTAssertEqual(waiting, 0, "writers still counted as waiting \(context)", file: file, line: line)
        XCTAssertFalse(syncing, "a sync still marked as running \(context)", file: file, line: line)
    }

    /// `sync()` and `close()` race with readers and writers: every call either works or throws
    /// `CaskError.closed`; afterwards everything throws `.closed`; nothing crashes; every
    /// acknowledged put is there after reopening.
    func testSyncAndCloseRacingWithReadersAndWriters() throws {
        for durability in Durability.allCases {
            let dir = TemporaryDirectory("cask-close-race")
            defer { dir.remove() }
            var options = CaskStore.Options(durability: durability)
            options.maxSegmentSize = 16 << 10
            options.flushInterval = 0.002
            let store = try CaskStore.open(at: dir.path, options: options)
            for key in 0..<Self.keyCount {
                try store.put(Self.key(key), SelfDescribingValue.make(key: key, writer: 0, version: 1, padding: 100))
            }
            let acknowledged = Lock<[String: [UInt8]]>([:])
            for key in 0..<Self.keyCount {
                acknowledged.withLock { $0[Self.key(key)] = SelfDescribingValue.make(key: key, writer: 0, version: 1, padding: 100) }
            }
            let problems = Problems()
            let started = Atomic(0)
            let threads = 6

            runThreads(threads) { thread in
                var random = SeededGenerator(seed: UInt64(thread) &+ 5)
                started.add(1, ordering: .relaxed)
                switch thread {
                case 0:
                    // Syncs a while, then closes.
                    while started.load(ordering: .relaxed) < threads { usleep(100) }
                    for _ in 0..<20 {
                        do { try store.sync() } catch { problems.add("sync before close failed: \(error)") }
                        usleep(300)
                    }
                    do { try store.close() } catch { problems.add("close failed: \(error)") }
                case 1:
                    // Syncs until the store is closed.
                    while true {
                        do { try store.sync() } catch CaskError.closed { break } catch { problems.add("sync failed: \(error)"); break }
                    }
                case 2, 3:
                    // Writers: keys of their own (writer 2: even keys, writer 3: odd keys).
                    var version: UInt64 = 1
                    while true {
                        version += 1
                        let key = Int.random(in: 0..<(Self.keyCount / 2), using: &random) * 2 + thread - 2
                        let value = SelfDescribingValue.make(key: key, writer: thread - 2, version: version, padding: 100)
                        do {
                            try store.put(Self.key(key), value)
                            acknowledged.withLock { $0[Self.key(key)] = value }
                        } catch CaskError.closed {
                            break
                        } catch {
                            problems.add("put failed: \(error)")
                            break
                        }
                    }
                default:
                    // Readers, until the store is closed.
                    while true {
                        let key = Int.random(in: 0..<Self.keyCount, using: &random)
                        do {
                            guard let value = try store.get(Self.key(key)) else {
                                problems.add("reader: \(Self.key(key)) vanished")
                                continue
                            }
                            if SelfDescribingValue.decode(value)?.key != key { problems.add("reader: \(Self.key(key)) holds a bad value") }
                        } catch CaskError.closed {
                            break
                        } catch {
                            problems.add("get failed: \(error)")
                            break
                        }
                    }
                }
            }
            problems.assertNone("\(durability)")
            assertGroupCommitIsIdle(store, "after writers raced close (\(durability))")

            XCTAssertThrowsError(try store.get(Self.key(0))) { XCTAssertEqual($0 as? CaskError, .closed(path: store.directory)) }
            XCTAssertThrowsError(try store.put(Self.key(0), [1])) { XCTAssertEqual($0 as? CaskError, .closed(path: store.directory)) }
            XCTAssertThrowsError(try store.delete(Self.key(0))) { XCTAssertEqual($0 as? CaskError, .closed(path: store.directory)) }
            XCTAssertThrowsError(try store.sync()) { XCTAssertEqual($0 as? CaskError, .closed(path: store.directory)) }
            XCTAssertThrowsError(try store.contains(Self.key(0))) { XCTAssertEqual($0 as? CaskError, .closed(path: store.directory)) }
            XCTAssertThrowsError(try store.keys()) { XCTAssertEqual($0 as? CaskError, .closed(path: store.directory)) }
            XCTAssertNoThrow(try store.close(), "a second close does nothing")

            let reopened = try CaskStore.open(at: dir.path, options: options)
            XCTAssertTrue(reopened.recoveryReport.isClean, "\(durability): \(reopened.recoveryReport)")
            for (key, value) in acknowledged.withLock({ $0 }) {
                XCTAssertEqual(try reopened.get(key), value, "\(durability): \(key)")
            }
            try reopened.close()
        }
    }

    // MARK: Helpers

    static func key(_ index: Int) -> String { "key-\(index)" }

}

/// Problems seen by background threads, reported on the test's thread.
///
/// Test threads share state through Cask's pthread-based ``Lock``, not `Synchronization.Mutex`:
/// on Linux a contended `Mutex` changes hands by a PI futex inside the uninstrumented standard
/// library, invisible to the thread sanitizer, which then reports false races.
final class Problems: Sendable {
    private let list = Lock<[String]>([])

    func add(_ problem: String) { list.withLock { $0.append(problem) } }

    func assertNone(_ context: String = "", file: StaticString = #filePath, line: UInt = #line) {
        let problems = list.withLock { $0 }
        for problem in problems.prefix(20) { XCTFail("\(context) \(problem)", file: file, line: line) }
        if problems.count > 20 { XCTFail("\(context) ... and \(problems.count - 20) more", file: file, line: line) }
    }
}

/// A value that says what it is: `key u32, writer u32, version u64, padding length u32`, the
/// padding (bytes derived from the rest), then a 64-bit checksum of everything before it.
enum SelfDescribingValue {
    static func make(key: Int, writer: Int, version: UInt64, padding: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(20 + padding + 8)
        append(UInt64(UInt32(key)) | UInt64(UInt32(writer)) << 32, to: &bytes)
        append(version, to: &bytes)
        append(UInt64(padding), to: &bytes, count: 4)
        let fill = UInt8(truncatingIfNeeded: version &* 31 &+ UInt64(key))
        for index in 0..<padding { bytes.append(index % 7 == 0 ? fill : UInt8(truncatingIfNeeded: index &+ key)) }
        append(checksum(bytes[...]), to: &bytes)
        return bytes
    }

    static func decode(_ bytes: [UInt8]) -> (key: Int, writer: Int, version: UInt64)? {
        guard bytes.count >= 28 else { return nil }
        let body = bytes[0..<(bytes.count - 8)]
        guard read(bytes, at: bytes.count - 8, count: 8) == checksum(body) else { return nil }
        let padding = Int(read(bytes, at: 16, count: 4))
        guard bytes.count == 28 + padding else { return nil }
        let ids = read(bytes, at: 0, count: 8)
        return (Int(ids & 0xFFFF_FFFF), Int(ids >> 32), read(bytes, at: 8, count: 8))
    }

    private static func append(_ value: UInt64, to bytes: inout [UInt8], count: Int = 8) {
        for shift in 0..<count { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(shift)))) }
    }

    private static func read(_ bytes: [UInt8], at offset: Int, count: Int) -> UInt64 {
        var value: UInt64 = 0
        for shift in 0..<count { value |= UInt64(bytes[offset + shift]) << (8 * UInt64(shift)) }
        return value
    }

    /// FNV-1a, 64-bit.
    private static func checksum(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01B3
        }
        return hash
    }
}
