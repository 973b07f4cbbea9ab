import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// The public API's promises: what is refused and with which words, what is created and how, what
/// the accounting says. (Random workloads live in ModelTests; damage in Corruption/TornWrite tests.)
final class StoreAPITests: XCTestCase {
    private func mode(of path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as! NSNumber).intValue
    }

    func testCreatesDirectoryAndFilesPrivately() throws {
        let dir = TemporaryDirectory()
        let storePath = dir.appending("nested-store")
        let store = try CaskStore.open(at: storePath)
        try store.put("k", [1])
        try store.close()
        XCTAssertEqual(try mode(of: storePath), 0o700)
        let names = try FileManager.default.contentsOfDirectory(atPath: storePath)
        XCTAssertTrue(names.contains("0000000001.cask") && names.contains("0000000001.hint") && names.contains("LOCK"), "\(names)")
        for name in names { XCTAssertEqual(try mode(of: storePath + "/" + name), 0o600, name) }
    }

    func testRefusesBadKeysAndValuesWithoutWriting() throws {
        let dir = TemporaryDirectory()
        var options = CaskStore.Options()
        options.maxValueSize = 1000
        let store = try CaskStore.open(at: dir.path, options: options)
        try store.put("ok", [1, 2, 3])
        let before = try store.statistics().segmentBytes
        XCTAssertThrowsError(try store.put([UInt8](), [1])) { XCTAssertEqual($0 as? CaskError, .emptyKey) }
        XCTAssertThrowsError(try store.put([UInt8](repeating: 7, count: 65_536), [1])) {
            XCTAssertEqual($0 as? CaskError, .keyTooLong(length: 65_536, limit: 65_535))
        }
        XCTAssertThrowsError(try store.put("big", [UInt8](repeating: 0, count: 1001))) {
            XCTAssertEqual($0 as? CaskError, .valueTooLarge(length: 1001, limit: 1000))
            XCTAssertEqual("\($0)", "value is 1001 bytes, over the limit of 1000 bytes; nothing was written")
        }
        XCTAssertNoThrow(try store.put([UInt8](repeating: 7, count: 65_535), [UInt8](repeating: 1, count: 1000)))
        let after = try store.statistics()
        XCTAssertEqual(after.keys, 2)
        XCTAssertGreaterThan(after.segmentBytes, before)
        try store.close()
        let reopened = try CaskStore.open(at: dir.path, options: options)
        XCTAssertEqual(reopened.count, 2)
        XCTAssertEqual(try reopened.get([UInt8](repeating: 7, count: 65_535)), [UInt8](repeating: 1, count: 1000))
        try reopened.close()
    }

    func testClosedAndReadOnlyStoresRefuseWrites() throws {
        let dir = TemporaryDirectory()
        let store = try CaskStore.open(at: dir.path)
        try store.put("a", [1])
        try store.close()
        try store.close()  // closing twice is fine
        XCTAssertThrowsError(try store.get("a")) { XCTAssertEqual($0 as? CaskError, .closed(path: store.directory)) }
        XCTAssertThrowsError(try store.put("a", [2])) { XCTAssertEqual($0 as? CaskError, .closed(path: store.directory)) }
        XCTAssertThrowsError(try store.sync()) { XCTAssertEqual($0 as? CaskError, .closed(path: store.directory)) }

        let reader = try CaskStore.open(at: dir.path, options: .init(durability: .os, readOnly: true))
        XCTAssertEqual(try reader.get("a"), [1])
        XCTAssertThrowsError(try reader.put("a", [2])) {
            XCTAssertEqual($0 as? CaskError, .readOnly(path: reader.directory))
            XCTAssertEqual("\($0)", "store \(dir.path) is open read-only; open it for writing to change it")
        }
        XCTAssertThrowsError(try reader.delete("a")) { XCTAssertEqual($0 as? CaskError, .readOnly(path: reader.directory)) }
        // Writes that would change nothing are refused too (they returned as if done).
        XCTAssertThrowsError(try reader.write(WriteBatch())) { XCTAssertEqual($0 as? CaskError, .readOnly(path: reader.directory)) }
        XCTAssertThrowsError(try reader.delete(prefix: "nothing/")) { XCTAssertEqual($0 as? CaskError, .readOnly(path: reader.directory)) }
        // A writer can open alongside a read-only store; the reader keeps its snapshot.
        let writer = try CaskStore.open(at: dir.path)
        try writer.put("b", [3])
        XCTAssertNil(try reader.get("b"))
        try writer.close()
        try reader.close()
    }

    /// What stops an open from making the store's directory is its parent, or the path itself:
    /// the error says which (an empty path was "create directory failed on : No such file or
    /// directory", a parent that may not be written named the store and advised a read-only open).
    func testAStoreThatCannotBeCreatedSaysWhy() throws {
        XCTAssertThrowsError(try CaskStore.open(at: "")) {
            XCTAssertEqual("\($0)", #"directory is empty; give the store's directory, such as "./store""#)
        }
        let dir = TemporaryDirectory()
        let orphan = dir.appending("no-parent/store")
        XCTAssertThrowsError(try CaskStore.open(at: orphan)) {
            XCTAssertEqual($0 as? CaskError, .parentMissing(path: orphan, parent: dir.appending("no-parent")))
            XCTAssertEqual(
                "\($0)",
                "cannot create store directory \(orphan): its parent \(dir.appending("no-parent")) does not exist (an open creates the store's directory, not its parents)")
        }
        for errno in [Errno.permissionDenied, .readOnlyFileSystem] {
            let fileSystem = FaultInjectingFileSystem()
            fileSystem.inject(FaultInjectingFileSystem.Rule(.makeDirectory, .nth(1), .fail(errno)))
            var options = CaskStore.Options()
            options.fileSystem = fileSystem
            XCTAssertThrowsError(try CaskStore.open(at: dir.appending("store"), options: options)) {
                XCTAssertEqual($0 as? CaskError, .notWritable(path: dir.path, errno: errno))
                XCTAssertEqual("\($0)", "cannot write \(dir.path): \(errno); check its permissions, or open an existing store read-only")
            }
        }
        XCTAssertThrowsError(try CaskStore.open(at: dir.appending("absent"), options: .readOnly)) {
            XCTAssertEqual("\($0)", "store directory \(dir.appending("absent")) does not exist; check the path (a writable open with createIfMissing, the default, creates it; a read-only one never does)")
        }
    }

    func testMissingDirectory() throws {
        let dir = TemporaryDirectory()
        let missing = dir.appending("absent")
        var options = CaskStore.Options()
        options.createIfMissing = false
        XCTAssertThrowsError(try CaskStore.open(at: missing, options: options)) {
            XCTAssertEqual($0 as? CaskError, .directoryMissing(path: missing))
        }
        XCTAssertThrowsError(try CaskStore.open(at: missing, options: .init(durability: .os, readOnly: true))) {
            XCTAssertEqual($0 as? CaskError, .directoryMissing(path: missing))
        }
        // An existing directory that holds no store: a writable open that must not create one
        // refuses it and makes nothing there (no lock file); a read-only open reads it as empty.
        let own = dir.appending("own")
        try FileManager.default.createDirectory(atPath: own, withIntermediateDirectories: false)
        XCTAssertThrowsError(try CaskStore.open(at: own, options: options)) { XCTAssertEqual($0 as? CaskError, .notAStore(path: own)) }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: own), [])
        XCTAssertEqual(try CaskStore.open(at: own, options: .init(durability: .os, readOnly: true)).count, 0)
        // Every call that takes a store's path says the same (verify and inspect said `.io`).
        XCTAssertThrowsError(try CaskStore.verify(at: missing)) { XCTAssertEqual($0 as? CaskError, .directoryMissing(path: missing)) }
        XCTAssertThrowsError(try CaskStore.inspect(at: missing) { _ in }) { XCTAssertEqual($0 as? CaskError, .directoryMissing(path: missing)) }
        XCTAssertThrowsError(try CaskStore.repair(at: missing, dryRun: true)) { XCTAssertEqual($0 as? CaskError, .directoryMissing(path: missing)) }
        XCTAssertFalse(FileManager.default.fileExists(atPath: missing))
    }

    /// Options and arguments out of range are typed errors: they were preconditions, and an app
    /// that took them from its configuration crashed.
    func testOptionsAndArgumentsOutOfRangeAreTypedErrors() throws {
        let dir = TemporaryDirectory()
        for (size, value) in [("maxValueSize", 512 << 20), ("maxValueSize", -1)] {
            var options = CaskStore.Options()
            options.maxValueSize = value
            XCTAssertThrowsError(try CaskStore.open(at: dir.path, options: options)) {
                XCTAssertEqual($0 as? CaskError, .invalidArgument(name: "Options.\(size)", reason: "is \(value); it must be from 0 to \(Limits.maxValueLength) (256 MiB)"))
            }
        }
        for value: Int64 in [4095, 1 << 32] {
            var options = CaskStore.Options()
            options.maxSegmentSize = value
            XCTAssertThrowsError(try CaskStore.open(at: dir.path, options: options)) {
                guard case .invalidArgument(name: "Options.maxSegmentSize", _)? = $0 as? CaskError else { return XCTFail("\($0)") }
            }
        }
        // The rest, each at a value out of range (they trapped, spun or never flushed, far from where they were set).
        let outOfRange: [(String, (inout CaskStore.Options) -> Void)] = [
            ("bufferSize", { $0.bufferSize = -1 }),
            ("flushInterval", { $0.flushInterval = -1 }), ("flushInterval", { $0.flushInterval = .nan }),
            ("flushInterval", { $0.flushInterval = .infinity }),
            ("compactionDeadRatio", { $0.compactionDeadRatio = 2 }), ("compactionDeadRatio", { $0.compactionDeadRatio = 0 }),
            ("compactionDeadRatio", { $0.compactionDeadRatio = .nan }),
            ("compactionMinDeadBytes", { $0.compactionMinDeadBytes = -1 }),
            ("idleCompactionDelay", { $0.idleCompactionDelay = -1 }), ("idleCompactionDelay", { $0.idleCompactionDelay = .nan }),
            ("dictionaries.trainingSampleBytes", { $0.dictionaries.trainingSampleBytes = 0 }),
            ("objects.cache.maxEntries", { $0.objects.cache = .entries(0) }), ("objects.cache.maxEntries", { $0.objects.cache = .entries(-1) }),
            ("objects.cache.maxBytes", { $0.objects.cache = .bytes(-1) }),
        ]
        for (name, change) in outOfRange {
            var options = CaskStore.Options()
            change(&options)
            XCTAssertThrowsError(try CaskStore.open(at: dir.path, options: options), name) {
                guard case .invalidArgument(name: "Options.\(name)", let reason)? = $0 as? CaskError else { return XCTFail("\(name): \($0)") }
                XCTAssertTrue(reason.hasPrefix("is "), reason)
            }
        }
        var bounds = CaskStore.Options()
        (bounds.bufferSize, bounds.flushInterval, bounds.compactionDeadRatio, bounds.idleCompactionDelay) = (0, 0, 1, 0)
        bounds.objects.cache = .entries(1)
        try CaskStore.open(at: TemporaryDirectory().path, options: bounds).close()
        bounds.objects.cache = .bytes(1)
        try CaskStore.open(at: TemporaryDirectory().path, options: bounds).close()
        // The largest finite intervals: "never on a timer" (they trapped, converted to microseconds).
        var far = CaskStore.Options(durability: .buffered)
        (far.flushInterval, far.idleCompactionDelay) = (.greatestFiniteMagnitude, .greatestFiniteMagnitude)
        let farDirectory = TemporaryDirectory()
        let farStore = try CaskStore.open(at: farDirectory.path, options: far)
        try farStore.put("k", [1])
        try farStore.close()
        XCTAssertEqual(try CaskStore.open(at: farDirectory.path, options: .readOnly).get("k"), [1])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir.path), [], "nothing was written")
        let store = try CaskStore.open(at: dir.path)
        defer { try? store.close() }
        try store.put("k", [1])
        XCTAssertThrowsError(try store.keys(prefix: "", limit: -1)) {
            XCTAssertEqual("\($0)", "limit is -1; a listing's limit must be 0 or more")
        }
        XCTAssertEqual(try store.keys(prefix: "", limit: 0), [])
        var batch = WriteBatch()
        batch.put("short-lived", [2], expiresAfter: .seconds(3600))  // a String key, as elsewhere
        try store.write(batch)
        XCTAssertEqual(try store.get("short-lived"), [2])
    }

    func testLockedMessageNamesTheHolder() throws {
        let dir = TemporaryDirectory()
        let store = try CaskStore.open(at: dir.path)
        XCTAssertThrowsError(try CaskStore.open(at: dir.path)) {
            // The holder is this very process: the message does not send one looking for another.
            XCTAssertEqual($0 as? CaskError, .alreadyOpen(path: dir.path))
            XCTAssertEqual("\($0)", "store \(dir.path) is already open for writing in this process: use that CaskStore, or close it before opening another")
        }
        try store.close()
        XCTAssertNoThrow(try CaskStore.open(at: dir.path).close())  // released on close
    }

    func testKeysCountContainsAndAccounting() throws {
        let dir = TemporaryDirectory()
        let store = try CaskStore.open(at: dir.path)
        for key in ["b/2", "a", "b/10", "b/1", "c"] { try store.put(key, Array(key.utf8)) }
        try store.put([0xFF, 0x00], [9])
        XCTAssertEqual(store.count, 6)
        XCTAssertEqual(try store.keys().map { String(decoding: $0, as: UTF8.self) }.prefix(5), ["a", "b/1", "b/10", "b/2", "c"])
        XCTAssertEqual(try store.keys().last, [0xFF, 0x00])
        XCTAssertEqual(try store.keys(prefix: Array("b/".utf8)).count, 3)
        XCTAssertTrue(try store.contains("b/10"))
        XCTAssertFalse(try store.contains("b/3"))

        let fresh = try store.statistics()
        XCTAssertEqual(fresh.deadBytes, 0)
        try store.put("a", [UInt8](repeating: 1, count: 500))   // overwrite: the old record dies
        XCTAssertTrue(try store.delete("c"))                    // delete: the record and its tombstone are dead
        XCTAssertFalse(try store.delete("c"))                   // deleting a missing key writes nothing
        let after = try store.statistics()
        XCTAssertEqual(after.keys, 5)
        XCTAssertGreaterThan(after.deadBytes, 0)
        XCTAssertEqual(after.liveBytes + after.deadBytes + Int64(SegmentHeader.length) * Int64(after.segments.count), after.segmentBytes)
        try store.close()

        // The accounting is the same when rebuilt by recovery.
        let reopened = try CaskStore.open(at: dir.path)
        let recovered = try reopened.statistics()
        XCTAssertEqual(recovered.keys, after.keys)
        XCTAssertEqual(recovered.liveBytes, after.liveBytes)
        XCTAssertEqual(recovered.deadBytes, after.deadBytes)
        try reopened.close()
    }

    func testReopenAppendsToTheLastSegmentAndSequenceKeepsGrowing() throws {
        let dir = TemporaryDirectory()
        for round in 0..<5 {
            let store = try CaskStore.open(at: dir.path)
            try store.put("counter", Array("\(round)".utf8))
            try store.close()
        }
        let store = try CaskStore.open(at: dir.path)
        XCTAssertEqual(try store.get("counter"), Array("4".utf8))
        let stats = try store.statistics()
        XCTAssertEqual(stats.segments.count, 1, "small stores keep appending to one segment")
        XCTAssertEqual(stats.segments.first?.maxSeq, 5)
        try store.close()
    }

    func testEveryDurabilityModeSyncsAndReopens() throws {
        for durability in Durability.allCases {
            let dir = TemporaryDirectory()
            let store = try CaskStore.open(at: dir.path, options: .init(durability: durability))
            for i in 0..<100 { try store.put("k\(i)", Array(repeating: UInt8(i), count: i)) }
            try store.sync()
            try store.close()
            let reopened = try CaskStore.open(at: dir.path)
            XCTAssertEqual(reopened.count, 100, "\(durability)")
            XCTAssertEqual(try reopened.get("k42"), Array(repeating: 42, count: 42))
            try reopened.close()
        }
    }

    func testBufferedWritesReachTheOSOnTheirOwn() throws {
        let dir = TemporaryDirectory()
        var options = CaskStore.Options(durability: .buffered)
        options.flushInterval = 0.02
        let store = try CaskStore.open(at: dir.path, options: options)
        try store.put("k", [1, 2, 3])
        let segment = dir.appending("0000000001.cask")
        let deadline = Date().addingTimeInterval(5)
        var size = 0
        while Date() < deadline {
            size = (try FileManager.default.attributesOfItem(atPath: segment)[.size] as! NSNumber).intValue
            if size > SegmentHeader.length { break }
            usleep(5_000)
        }
        XCTAssertGreaterThan(size, SegmentHeader.length, "the flush timer wrote the buffered record")
        try store.close()
    }

    // MARK: withValue

    /// `withValue` hands `body` the same bytes `get` returns, from every place a record can be:
    /// the mapping, `pread`, the write buffer; compressed or not, small or past the stack buffer.
    func testWithValueSeesWhatGetReturns() throws {
        var rng = SeededGenerator(seed: 0x3177)
        let values: [[UInt8]] = [
            [], [7], rng.bytes(100), [UInt8](repeating: 3, count: 100),           // incompressible and compressible
            [UInt8](repeating: 9, count: 5_000), rng.bytes(3_000) + [UInt8](repeating: 1, count: 3_000),  // past 1 KiB
        ]
        for (durability, mapped) in [(Durability.os, true), (.os, false), (.buffered, true)] {
            let dir = TemporaryDirectory()
            defer { dir.remove() }
            var options = CaskStore.Options(durability: durability)
            options.memoryMapping = mapped
            options.flushInterval = 3600  // buffered: the records stay in the buffer
            let store = try CaskStore.open(at: dir.path, options: options)
            for (i, value) in values.enumerated() { try store.put("v\(i)", value) }
            let context = "\(durability), mapped: \(mapped)"
            if durability == .buffered {
                let size = try FileManager.default.attributesOfItem(atPath: dir.appending("0000000001.cask"))[.size] as! NSNumber
                XCTAssertEqual(size.intValue, SegmentHeader.length, "\(context): the records are still in the write buffer")
            }
            for (i, value) in values.enumerated() {
                XCTAssertEqual(try store.withValue("v\(i)") { Array($0) }, value, "\(context), value \(i)")
                XCTAssertEqual(try store.get("v\(i)"), value, "\(context), value \(i)")
            }
            var called = false
            XCTAssertNil(try store.withValue("absent") { _ in called = true })
            XCTAssertFalse(called, "body must not run for an absent key")
            try store.put(Array("soon".utf8), [1], expiresAtMilliseconds: 1)
            XCTAssertNil(try store.withValue("soon") { _ in called = true })
            XCTAssertFalse(called, "body must not run for an expired key")
            try store.close()
            XCTAssertThrowsError(try store.withValue("v1") { _ in }) { XCTAssertEqual($0 as? CaskError, .closed(path: store.directory)) }
        }
    }

    /// `body` runs under no lock: another thread can write (which takes the writer mutex and the
    /// index lock) while it runs, even for a record read out of the write buffer.
    func testWithValueBodyRunsUnderNoLock() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        var options = CaskStore.Options(durability: .buffered)
        options.flushInterval = 3600
        let store = try CaskStore.open(at: dir.path, options: options)
        try store.put("k", [1, 2, 3])
        let written = DispatchSemaphore(value: 0)
        let result = try store.withValue("k") { bytes -> DispatchTimeoutResult in
            Thread.detachNewThread {
                try? store.put("other", [4])
                written.signal()
            }
            return written.wait(timeout: .now() + 10)
        }
        XCTAssertEqual(result, .success, "a put from another thread waited for the body to return")
        XCTAssertEqual(try store.get("other"), [4])
        try store.close()
    }
}
