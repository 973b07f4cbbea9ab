import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// Faults injected through the file-system seam: a full disk and I/O errors in the middle of a
/// write (short writes included), failed syncs, failed renames, and finally every single call of
/// a scenario failing in turn.
final class FaultInjectionTests: XCTestCase {
    typealias Rule = FaultInjectingFileSystem.Rule

    // MARK: ENOSPC and EIO mid-write

    /// In every durability mode, a failed `pwrite` (nothing written, or a short write that leaves
    /// part of the record on disk) throws `diskFull`/`io`, the segment is cut back to its length
    /// before the write, reads go on, writes work again once the fault is lifted, and the reopened
    /// store holds exactly the acknowledged writes.
    func testFailedWriteIsRolledBackInEveryMode() throws {
        let faults: [FaultInjectingFileSystem.Fault] = [
            .fail(.noSpace), .shortWrite(bytes: 7, then: .noSpace), .fail(.ioError), .shortWrite(bytes: 1000, then: .ioError),
        ]
        for durability in Durability.allCases {
            for fault in faults {
                try checkFailedWrite(durability, fault)
            }
        }
    }

    private func checkFailedWrite(_ durability: Durability, _ fault: FaultInjectingFileSystem.Fault) throws {
        let context = "\(durability), \(fault)"
        let dir = TemporaryDirectory("cask-fault")
        defer { dir.remove() }
        let fileSystem = FaultInjectingFileSystem()
        var options = CaskStore.Options(durability: durability)
        options.fileSystem = fileSystem
        options.bufferSize = 4096
        options.flushInterval = 0
        let store = try CaskStore.open(at: dir.path, options: options)
        var random = SeededGenerator(seed: 7)
        var model: [String: [UInt8]] = [:]
        for n in 0..<20 {
            let value = random.bytes(Int.random(in: 50...500, using: &random))
            try store.put("k\(n)", value)
            model["k\(n)"] = value
        }
        try store.delete("k3")
        model["k3"] = nil
        try store.sync()
        // Buffered: two acknowledged writes wait in the buffer; a failed flush must not lose them.
        try store.put("k4", [4, 4, 4])
        try store.delete("k5")
        model["k4"] = [4, 4, 4]
        model["k5"] = nil

        let segment = try activeSegment(dir.path)
        let lengthBefore = try fileLength(segment)
        let errno: Errno = switch fault {
        case .fail(let errno), .shortWrite(_, let errno): errno
        case .delay, .pause: .ioError
        }
        let expected: CaskError = errno == .noSpace ? .diskFull(path: segment) : .io(operation: "pwrite", path: segment, errno: errno)

        // One failed write. A value over the buffer size makes even `.buffered` flush at once.
        fileSystem.inject(Rule(.pwrite, pathSuffix: ".cask", .nth(1), fault))
        let big = random.bytes(6000)
        XCTAssertThrowsError(try store.put("k1", big), context) { XCTAssertEqual($0 as? CaskError, expected, context) }
        XCTAssertEqual(try fileLength(segment), lengthBefore, "\(context): the partial record was not cut off")
        XCTAssertEqual(fileSystem.injectedCount, 1, context)
        assertStore(store, matches: model, context)

        // A disk that stays full: every write fails the same way, reads still work.
        fileSystem.inject(Rule(.pwrite, pathSuffix: ".cask", .after(0), .fail(errno)))
        for n in 0..<5 {
            let value = random.bytes(durability == .buffered ? 5000 : 100)
            do {
                try store.put("full\(n)", value)
                XCTAssertEqual(durability, .buffered, "\(context): a put succeeded on a full disk")
                model["full\(n)"] = value  // accepted into the buffer; must be flushed later
            } catch {
                XCTAssertEqual(error, expected, context)
            }
        }
        if durability == .buffered {
            // The buffer (with acknowledged writes in it) cannot be flushed; it is kept for later.
            XCTAssertThrowsError(try store.sync(), context) { XCTAssertEqual($0 as? CaskError, expected, context) }
        } else {
            XCTAssertNoThrow(try store.sync(), "\(context): nothing is waiting to be written")
        }
        XCTAssertEqual(try fileLength(segment), lengthBefore, "\(context): a partial record was not cut off")
        assertStore(store, matches: model, context)

        // Space is freed: writes work again, including the one that failed.
        fileSystem.removeAllRules()
        try store.put("k1", big)
        model["k1"] = big
        try store.put("after", [1])
        model["after"] = [1]
        try store.delete("k2")
        model["k2"] = nil
        try store.sync()
        assertStore(store, matches: model, context)
        try store.close()

        let reopened = try CaskStore.open(at: dir.path, options: .init(durability: durability))
        XCTAssertTrue(reopened.recoveryReport.isClean, "\(context): \(reopened.recoveryReport)")
        assertStore(reopened, matches: model, context)
        try reopened.close()
    }

    /// The rollback itself fails (the short write's bytes stay): the store refuses further writes,
    /// still serves reads, and the next open cuts the torn record off.
    func testFailedRollbackPoisonsTheStoreAndRecoveryCutsTheTail() throws {
        let dir = TemporaryDirectory("cask-fault")
        defer { dir.remove() }
        let fileSystem = FaultInjectingFileSystem()
        var options = CaskStore.Options(durability: .os)
        options.fileSystem = fileSystem
        let store = try CaskStore.open(at: dir.path, options: options)
        let model = ["a": [UInt8](repeating: 1, count: 100), "b": [UInt8](repeating: 2, count: 10)]
        for (key, value) in model { try store.put(key, value) }
        let segment = try activeSegment(dir.path)
        let lengthBefore = try fileLength(segment)

        fileSystem.inject(Rule(.pwrite, pathSuffix: ".cask", .nth(1), .shortWrite(bytes: 20, then: .noSpace)))
        fileSystem.inject(Rule(.ftruncate, .nth(1), .fail(.ioError)))
        var random = SeededGenerator(seed: 3)
        XCTAssertThrowsError(try store.put("c", random.bytes(200))) { XCTAssertEqual($0 as? CaskError, .diskFull(path: segment)) }
        XCTAssertEqual(try fileLength(segment), lengthBefore + 20, "the short write's bytes are on disk")
        let poisoned = CaskError.io(operation: "ftruncate (rolling back a failed write)", path: segment, errno: .ioError)
        XCTAssertThrowsError(try store.put("d", [1])) { XCTAssertEqual($0 as? CaskError, poisoned) }
        XCTAssertThrowsError(try store.delete("a")) { XCTAssertEqual($0 as? CaskError, poisoned) }
        XCTAssertThrowsError(try store.sync()) { XCTAssertEqual($0 as? CaskError, poisoned) }
        assertStore(store, matches: model, "poisoned")
        XCTAssertThrowsError(try store.close()) { XCTAssertEqual($0 as? CaskError, poisoned) }

        let reopened = try CaskStore.open(at: dir.path)
        XCTAssertEqual(reopened.recoveryReport.truncations.map(\.bytesRemoved), [20], "\(reopened.recoveryReport)")
        XCTAssertEqual(reopened.recoveryReport.damagedRanges, [])
        assertStore(reopened, matches: model, "reopened")
        try reopened.put("d", [1])
        try reopened.close()
    }

    // MARK: Failed syncs

    /// `.fsync` mode: a failed `fdatasync` fails the put with `syncFailed`, and from then on every
    /// write, `sync()` and `close()` fail too — the store never claims durability it cannot give —
    /// while reads keep working. Reopening recovers what the disk holds.
    func testFailedFdatasyncInFsyncModeIsNeverForgotten() throws {
        let dir = TemporaryDirectory("cask-fault")
        defer { dir.remove() }
        let fileSystem = FaultInjectingFileSystem()
        var options = CaskStore.Options(durability: .fsync)
        options.fileSystem = fileSystem
        let store = try CaskStore.open(at: dir.path, options: options)
        var model: [String: [UInt8]] = [:]
        for n in 0..<10 {
            model["k\(n)"] = Array("value \(n)".utf8)
            try store.put("k\(n)", model["k\(n)"]!)
        }
        let segment = try activeSegment(dir.path)
        let failure = CaskError.syncFailed(path: segment, errno: .ioError)

        fileSystem.fail(.fdatasync, pathSuffix: ".cask", with: .ioError)
        XCTAssertThrowsError(try store.put("x", [9, 9])) { XCTAssertEqual($0 as? CaskError, failure) }
        XCTAssertEqual(fileSystem.injectedCount, 1)
        // The disk works again, but what the failed sync should have covered may be lost: refuse.
        XCTAssertThrowsError(try store.put("y", [1])) { XCTAssertEqual($0 as? CaskError, failure) }
        XCTAssertThrowsError(try store.delete("k0")) { XCTAssertEqual($0 as? CaskError, failure) }
        XCTAssertThrowsError(try store.sync()) { XCTAssertEqual($0 as? CaskError, failure) }
        XCTAssertThrowsError(try store.sync()) { XCTAssertEqual($0 as? CaskError, failure) }
        // The failed put may or may not show: it reached the kernel, but was never acknowledged.
        let x = try store.get("x")
        XCTAssertTrue(x == nil || x == [9, 9], "x holds \(String(describing: x))")
        assertStore(store, matches: model.merging(x.map { ["x": $0] } ?? [:]) { $1 }, "after the failed sync")
        XCTAssertThrowsError(try store.close()) { XCTAssertEqual($0 as? CaskError, failure) }

        let reopened = try CaskStore.open(at: dir.path, options: .init(durability: .fsync))
        XCTAssertTrue(reopened.recoveryReport.isClean, "\(reopened.recoveryReport)")
        let reopenedX = try reopened.get("x")
        XCTAssertTrue(reopenedX == nil || reopenedX == [9, 9], "x holds \(String(describing: reopenedX))")
        assertStore(reopened, matches: model.merging(reopenedX.map { ["x": $0] } ?? [:]) { $1 }, "reopened")
        XCTAssertNil(try reopened.get("y"))
        try reopened.put("y", [1])
        try reopened.sync()
        try reopened.close()
    }

    /// `.buffered` mode: a close on a disk too full for the writes still in the buffer throws
    /// `diskFull` and leaves the store open with every one of them (it marked the store closed,
    /// dropped the buffer, and a second close said nothing: about 1,200 acknowledged writes lost, a
    /// helper found on a full tmpfs). Once space is freed, a close writes them all. A hint file that
    /// cannot be written at the close is no error: every record is synced.
    func testACloseOnAFullDiskKeepsTheBufferedWritesAndTheStoreOpen() throws {
        let dir = TemporaryDirectory("cask-fault")
        defer { dir.remove() }
        let fileSystem = FaultInjectingFileSystem()
        var options = CaskStore.Options(durability: .buffered)
        options.fileSystem = fileSystem
        options.flushInterval = 0
        options.bufferSize = 1 << 20
        let store = try CaskStore.open(at: dir.path, options: options)
        var model: [String: [UInt8]] = [:]
        var random = SeededGenerator(seed: 17)
        for n in 0..<200 {
            model["k\(n)"] = random.bytes(120)
            try store.put("k\(n)", model["k\(n)"]!)
        }
        try store.delete("k7")
        model["k7"] = nil
        fileSystem.failAlways(.pwrite, pathSuffix: ".cask", with: .noSpace)
        fileSystem.failAlways(.allocate, pathSuffix: ".cask", with: .noSpace)
        for _ in 0..<2 {
            XCTAssertThrowsError(try store.close()) {
                guard case .diskFull? = $0 as? CaskError else { return XCTFail("\($0)") }
            }
            assertStore(store, matches: model, "after a close on a full disk")
        }
        fileSystem.removeAllRules()
        fileSystem.failAlways(.pwrite, pathSuffix: ".hint.tmp", with: .noSpace)
        try store.close()
        XCTAssertThrowsError(try store.get("k1")) { XCTAssertEqual($0 as? CaskError, .closed(path: dir.path)) }

        let reopened = try CaskStore.open(at: dir.path, options: .readOnly)
        assertStore(reopened, matches: model, "reopened")
        try reopened.close()
    }

    /// `.os` mode: a failed sync in `sync()` (here of a sealed segment) throws `syncFailed`, and
    /// the store then refuses writes and syncs; reads work; reopening finds every acknowledged put.
    func testFailedSyncInOSModeIsNeverForgotten() throws {
        let dir = TemporaryDirectory("cask-fault")
        defer { dir.remove() }
        let fileSystem = FaultInjectingFileSystem()
        var options = CaskStore.Options(durability: .os)
        options.fileSystem = fileSystem
        options.maxSegmentSize = 4096
        let store = try CaskStore.open(at: dir.path, options: options)
        var model: [String: [UInt8]] = [:]
        var random = SeededGenerator(seed: 8)
        for n in 0..<30 {
            model["k\(n)"] = random.bytes(150)
            try store.put("k\(n)", model["k\(n)"]!)
        }
        store.backgroundWork.wait()  // hint writers sync sealed segments too; let them finish first
        let first = dir.path + "/" + SegmentName.segment(1)
        XCTAssertNotEqual(try activeSegment(dir.path), first, "no rotation happened")
        let failure = CaskError.syncFailed(path: first, errno: .ioError)

        for operation in [FaultInjectingFileSystem.Operation.fdatasync, .fsync] {
            fileSystem.inject(Rule(operation, pathSuffix: SegmentName.segment(1), .nth(1), .fail(.ioError)))
        }
        XCTAssertThrowsError(try store.sync()) { XCTAssertEqual($0 as? CaskError, failure) }
        XCTAssertEqual(fileSystem.injectedCount, 1)
        XCTAssertThrowsError(try store.sync()) { XCTAssertEqual($0 as? CaskError, failure) }
        XCTAssertThrowsError(try store.put("new", [1])) { XCTAssertEqual($0 as? CaskError, failure) }
        XCTAssertThrowsError(try store.delete("k1")) { XCTAssertEqual($0 as? CaskError, failure) }
        assertStore(store, matches: model, "after the failed sync")
        XCTAssertThrowsError(try store.close()) { XCTAssertEqual($0 as? CaskError, failure) }

        let reopened = try CaskStore.open(at: dir.path)
        XCTAssertTrue(reopened.recoveryReport.isClean, "\(reopened.recoveryReport)")
        assertStore(reopened, matches: model, "reopened")
        XCTAssertNil(try reopened.get("new"))
        try reopened.close()
    }

    /// `close()` syncs the sealed segments that were not synced yet (`.os` mode); when that fails
    /// it says so instead of returning as if everything were durable.
    func testFailedSyncOfASealedSegmentInCloseIsReported() throws {
        let dir = TemporaryDirectory("cask-fault")
        defer { dir.remove() }
        let fileSystem = FaultInjectingFileSystem()
        var options = CaskStore.Options(durability: .os)
        options.fileSystem = fileSystem
        options.maxSegmentSize = 4096
        options.writeHints = false  // hint writers would sync the sealed segment first
        let store = try CaskStore.open(at: dir.path, options: options)
        var random = SeededGenerator(seed: 10)
        var model: [String: [UInt8]] = [:]
        for n in 0..<30 {
            model["k\(n)"] = random.bytes(150)
            try store.put("k\(n)", model["k\(n)"]!)
        }
        let first = dir.path + "/" + SegmentName.segment(1)
        XCTAssertNotEqual(try activeSegment(dir.path), first, "no rotation happened")
        fileSystem.fail(.fdatasync, pathSuffix: SegmentName.segment(1), with: .ioError)
        XCTAssertThrowsError(try store.close()) { XCTAssertEqual($0 as? CaskError, .syncFailed(path: first, errno: .ioError)) }
        XCTAssertEqual(fileSystem.injectedCount, 1)

        let reopened = try CaskStore.open(at: dir.path)
        XCTAssertTrue(reopened.recoveryReport.isClean, "\(reopened.recoveryReport)")
        assertStore(reopened, matches: model, "reopened")
        try reopened.close()
    }

    /// `.os` mode: the background hint writer is the first to `fdatasync` a sealed segment's
    /// records. If that fails, the kernel may have dropped the data and reports the error only once,
    /// so a later `fdatasync` would succeed: `sync()` and `close()` must fail rather than claim
    /// durability.
    func testFailedSyncInTheHintWriterIsNotForgotten() throws {
        let dir = TemporaryDirectory("cask-fault")
        defer { dir.remove() }
        let fileSystem = FaultInjectingFileSystem()
        var options = CaskStore.Options(durability: .os)
        options.fileSystem = fileSystem
        options.maxSegmentSize = 4096
        let first = dir.path + "/" + SegmentName.segment(1)
        // The 2nd: the 1st makes the segment's header durable when the store creates it.
        fileSystem.inject(Rule(.fdatasync, path: first, .nth(2), .fail(.ioError)))
        let store = try CaskStore.open(at: dir.path, options: options)
        var random = SeededGenerator(seed: 12)
        var model: [String: [UInt8]] = [:]
        for n in 0..<30 {
            model["k\(n)"] = random.bytes(150)
            try? store.put("k\(n)", model["k\(n)"]!)
        }
        store.backgroundWork.wait()
        XCTAssertNotEqual(try activeSegment(dir.path), first, "no rotation happened")
        XCTAssertEqual(fileSystem.injectedCount, 1, "the hint writer did not sync the sealed segment")
        let failure = CaskError.syncFailed(path: first, errno: .ioError)

        XCTAssertThrowsError(try store.sync()) { XCTAssertEqual($0 as? CaskError, failure) }
        XCTAssertThrowsError(try store.put("new", [1])) { XCTAssertEqual($0 as? CaskError, failure) }
        XCTAssertThrowsError(try store.close()) { XCTAssertEqual($0 as? CaskError, failure) }

        let reopened = try CaskStore.open(at: dir.path)
        XCTAssertTrue(reopened.recoveryReport.isClean, "\(reopened.recoveryReport)")
        for (key, value) in model {
            // Puts after the failure was noticed may have been refused; none may be damaged.
            if let found = try reopened.get(key) { XCTAssertEqual(found, value, key) }
        }
        try reopened.close()
    }

    /// `.fsync` mode: a writer whose record went in before a failed `fdatasync` (here the one that
    /// seals a segment at rotation) must not be told it is durable by a later sync that succeeds —
    /// the failed sync may have dropped that record.
    func testWriterWaitingForGroupCommitFailsWhenAnEarlierSyncFailed() throws {
        let dir = TemporaryDirectory("cask-fault")
        defer { dir.remove() }
        let fileSystem = FaultInjectingFileSystem()
        var options = CaskStore.Options(durability: .fsync)
        options.fileSystem = fileSystem
        options.maxSegmentSize = 4096
        options.writeHints = false
        let store = try CaskStore.open(at: dir.path, options: options)
        let first = dir.path + "/" + SegmentName.segment(1)
        let failure = CaskError.syncFailed(path: first, errno: .ioError)
        let gate = FaultInjectingFileSystem.Gate()
        fileSystem.inject(Rule(.fdatasync, path: first, .nth(1), .pause(gate)))
        fileSystem.inject(Rule(.fdatasync, path: first, .nth(2), .fail(.ioError)))
        let results = Lock<[String: CaskError?]>([:])
        let threads = DispatchGroup()
        func putOnAThread(_ key: String) {
            threads.enter()
            Thread {
                var result: CaskError? = nil
                do throws(CaskError) { try store.put(key, [1, 2, 3]) } catch { result = error }
                results.withLock { $0[key] = result }
                threads.leave()
            }.start()
        }

        // C leads a group commit and stops inside its fdatasync.
        putOnAThread("c")
        gate.waitUntilReached()
        // A writes its record, then waits for C's sync to end.
        let writes = fileSystem.count(.pwrite)
        putOnAThread("a")
        while fileSystem.count(.pwrite) == writes { usleep(1000) }
        // B fills the segment: sealing it, the fdatasync fails.
        var random = SeededGenerator(seed: 13)
        XCTAssertThrowsError(try store.put("b", random.bytes(4000))) { XCTAssertEqual($0 as? CaskError, failure) }
        gate.open()
        threads.wait()

        let outcome = results.withLock { $0 }
        XCTAssertEqual(outcome["c"], .some(nil), "C's sync started before the failure and succeeded")
        XCTAssertEqual(outcome["a"], .some(failure), "A's record was written before the failed sync")
        XCTAssertThrowsError(try store.sync()) { XCTAssertEqual($0 as? CaskError, failure) }
        XCTAssertThrowsError(try store.close()) { XCTAssertEqual($0 as? CaskError, failure) }
    }

    // MARK: Failed renames

    /// Hint files are written to a temporary file and renamed. When the rename fails the store
    /// goes on (a missing hint only costs a scan), leaves no temporary file, and reopens intact.
    func testFailedHintRenameCostsOnlyAScan() throws {
        let dir = TemporaryDirectory("cask-fault")
        defer { dir.remove() }
        let fileSystem = FaultInjectingFileSystem()
        fileSystem.failAlways(.rename, with: .ioError)
        var options = CaskStore.Options(durability: .os)
        options.fileSystem = fileSystem
        options.maxSegmentSize = 4096
        let store = try CaskStore.open(at: dir.path, options: options)
        var model: [String: [UInt8]] = [:]
        var random = SeededGenerator(seed: 9)
        for n in 0..<40 {
            model["k\(n)"] = random.bytes(200)
            try store.put("k\(n)", model["k\(n)"]!)
        }
        store.backgroundWork.wait()
        XCTAssertGreaterThan(fileSystem.count(.rename), 0, "no hint was attempted")
        assertStore(store, matches: model, "open")
        do {
            try store.close()
        } catch {
            // The data is durable; only the active segment's hint is missing, and close says so.
            guard case .io("write hint file", _, .ioError) = error else { return XCTFail("close threw \(error)") }
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.path)
        XCTAssertEqual(names.filter { $0.hasSuffix(".tmp") || $0.hasSuffix(".hint") }, [], "\(names)")

        let reopened = try CaskStore.open(at: dir.path)
        XCTAssertTrue(reopened.recoveryReport.isClean, "\(reopened.recoveryReport)")
        XCTAssertEqual(reopened.recoveryReport.segmentsFromHints, 0)
        assertStore(reopened, matches: model, "reopened")
        try reopened.close()
    }

    // MARK: Every call of a scenario failing

    /// Runs a short scenario (open with a torn tail to cut, puts with segment rotations,
    /// overwrites, deletes, sync, close) once to record its calls, then again with each call
    /// failing in turn — once, or from that call on (a dead disk); `pwrite`s also as short writes.
    /// A call is named by its operation, its path and its rank among the calls with both: hint
    /// files are written in the background, so only that order is the same in every run.
    /// Each operation either works or throws a `CaskError`; reopened with a healthy file system,
    /// the store opens without damage, every acknowledged write is there with its value, no
    /// acknowledged delete comes back, and nothing unacknowledged shows up half-written.
    func testEveryCallOfAScenarioFailing() throws {
        var runs = 0
        let work = TemporaryDirectory("cask-scenario")
        defer { work.remove() }
        let template = work.appending("template"), store = work.appending("store")
        let base = try prepareScenarioTemplate(template)
        for durability in Durability.allCases {
            let reference = try runScenario(durability, template: template, store: store, base: base, rule: nil)
            XCTAssertNil(reference.failure, "\(durability), no fault")
            XCTAssertEqual(reference.injected, 0)
            XCTAssertGreaterThan(reference.rotations, 0, "the scenario did not rotate a segment")
            var rank: [String: Int] = [:]
            var points = 0
            for call in reference.trace {
                let name = "\(call.operation) \(call.path)"
                rank[name, default: 0] += 1
                guard call.operation.canFail else { continue }
                points += 1
                let nth = FaultInjectingFileSystem.Trigger.nth(rank[name]!)
                var rules = [
                    Rule(call.operation, path: call.path, nth, .fail(call.operation == .pwrite ? .noSpace : .ioError)),
                    Rule(call.operation, path: call.path, nth, .fail(.ioError), latch: true),
                ]
                if call.operation == .pwrite, let length = call.length, length > 1 {
                    rules.append(Rule(.pwrite, path: call.path, nth, .shortWrite(bytes: length / 2, then: .noSpace)))
                }
                for rule in rules {
                    let run = try runScenario(durability, template: template, store: store, base: base, rule: rule)
                    runs += 1
                    let what = "\(durability), failing \(call.operation) #\(rank[name]!) of \(call.path)\(rule.latch ? " and everything after" : "") (\(rule.fault))"
                    let hit = run.trace.first { $0.injected != nil }
                    XCTAssertTrue(hit?.operation == call.operation && hit?.path == call.path, "\(what): the call was never made")
                    if let failure = run.failure { XCTFail("\(what): \(failure)") }
                }
            }
            print("FaultInjectionTests: \(durability): \(points) injection points in \(reference.trace.count) calls")
        }
        print("FaultInjectionTests: \(runs) scenario runs with a fault")
    }

    struct ScenarioRun {
        var trace: [FaultInjectingFileSystem.Call]
        var injected: Int
        var rotations: Int
        /// Why the invariant does not hold, if it does not.
        var failure: String?
    }

    /// What the store may hold for one key: the states written to it, in order.
    struct KeyHistory {
        struct Event {
            var state: [UInt8]?
            var acknowledged: Bool
            /// Index among all events of the scenario (to know which ones a later sync covers).
            var order: Int
        }
        var base: [UInt8]?
        var events: [Event] = []

        /// The states the key may be in, when acknowledged events up to `certainBefore` (or all
        /// acknowledged events when nil) must be present: the last such event wins over earlier
        /// ones, and any later event may or may not have made it.
        func allowed(certainBefore: Int?) -> [[UInt8]?] {
            let certain = events.lastIndex { event in event.acknowledged && event.order < (certainBefore ?? Int.max) }
            var states = [certain.map { events[$0].state } ?? base]
            for event in events[((certain ?? -1) + 1)...] { states.append(event.state) }
            return states
        }
    }

    /// The keys of the template store: k0...k9 with values, k9 deleted; a torn record after them.
    private func prepareScenarioTemplate(_ path: String) throws -> [String: [UInt8]] {
        var random = SeededGenerator(seed: 11)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let store = try CaskStore.open(at: path)
        var base: [String: [UInt8]] = [:]
        for n in 0..<10 {
            base["k\(n)"] = random.bytes(Int.random(in: 20...300, using: &random))
            try store.put("k\(n)", base["k\(n)"]!)
        }
        try store.delete("k9")
        base["k9"] = nil
        try store.close()
        // A torn record at the tail, for the scenario's open to cut.
        let segment = try activeSegment(path)
        let handle = try XCTUnwrap(FileHandle(forUpdatingAtPath: segment))
        handle.seekToEndOfFile()
        handle.write(Data([0x55, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A]))
        try handle.close()
        return base
    }

    /// Copies the template to `path` (the same path every run, so that calls can be named by it)
    /// and runs the scenario there.
    private func runScenario(_ durability: Durability, template: String, store path: String, base: [String: [UInt8]], rule: Rule?) throws -> ScenarioRun {
        try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.copyItem(atPath: template, toPath: path)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let fileSystem = FaultInjectingFileSystem()
        if let rule { fileSystem.inject(rule) }
        var options = CaskStore.Options(durability: durability)
        options.fileSystem = fileSystem
        options.maxSegmentSize = 4096
        options.bufferSize = 1024
        options.flushInterval = 0  // no timer: the calls happen in the same order every run

        var histories: [String: KeyHistory] = [:]
        for n in 0..<20 { histories["k\(n)"] = KeyHistory(base: base["k\(n)"]) }
        var order = 0
        var syncedBefore = 0  // buffered: acknowledged events before this are durable
        var random = SeededGenerator(seed: 5)
        var store: CaskStore? = nil
        do {
            store = try CaskStore.open(at: path, options: options)
        } catch {
            // A failed open is allowed; the store must open once the disk is healthy.
        }
        var inProcess: String? = nil
        if let store {
            store.backgroundWork.wait()
            func record(_ key: String, _ state: [UInt8]?, _ body: () throws(CaskError) -> Void) {
                var acknowledged = true
                do { try body() } catch { acknowledged = false }
                histories[key]!.events.append(.init(state: state, acknowledged: acknowledged, order: order))
                order += 1
                store.backgroundWork.wait()
            }
            func put(_ key: String, _ length: Int) {
                let value = random.bytes(length)
                record(key, value) { () throws(CaskError) in try store.put(key, value) }
            }
            func delete(_ key: String) {
                record(key, nil) { () throws(CaskError) in try store.delete(key) }
            }
            func sync() {
                if (try? store.sync()) != nil { syncedBefore = order }
                store.backgroundWork.wait()
            }
            for n in 10..<18 { put("k\(n)", 200 + 70 * (n - 10)) }
            put("k0", 40)
            put("k3", 900)
            delete("k1")
            delete("k10")
            sync()
            put("k18", 300)
            put("k4", 0)
            delete("k2")
            put("k19", 1500)
            put("k18", 33)
            // The running store shows what it acknowledged (a read may fail if the disk does).
            for (key, history) in histories.sorted(by: { $0.key < $1.key }) {
                let value: [UInt8]?
                do { value = try store.get(key) } catch { continue }
                let allowed = history.allowed(certainBefore: nil)
                if !allowed.contains(where: { $0 == value }) {
                    inProcess = "\(key): the running store returns \(value.map { "\($0.count) bytes" } ?? "nothing"), expected one of \(allowed.map { $0.map { "\($0.count) bytes" } ?? "nothing" })"
                    break
                }
            }
            if (try? store.close()) != nil { syncedBefore = order }
        }
        // A close on a disk too full for the buffer keeps the store open: let it go as a process
        // that gives up would (its deinit tries to close once more, then the lock is released).
        store = nil
        let trace = fileSystem.trace
        let rotations = Set(trace.filter { $0.operation == .open && $0.path.hasSuffix(".cask") }.map(\.path)).count - 1
        var run = ScenarioRun(trace: trace, injected: fileSystem.injectedCount, rotations: rotations, failure: inProcess)
        if run.failure != nil { return run }

        // Reopen on a healthy disk.
        let reopened: CaskStore
        do {
            reopened = try CaskStore.open(at: path, options: .init(durability: durability))
        } catch {
            run.failure = "reopening failed: \(error)"
            return run
        }
        defer { try? reopened.close() }
        if !reopened.recoveryReport.damagedRanges.isEmpty {
            run.failure = "damage found on reopening: \(reopened.recoveryReport)"
            return run
        }
        let certainBefore = durability == .buffered ? syncedBefore : nil
        for (key, history) in histories.sorted(by: { $0.key < $1.key }) {
            let value: [UInt8]?
            do { value = try reopened.get(key) } catch {
                run.failure = "\(key): get failed after reopening: \(error)"
                return run
            }
            let allowed = history.allowed(certainBefore: certainBefore)
            if !allowed.contains(where: { $0 == value }) {
                run.failure = "\(key): holds \(value.map { "\($0.count) bytes" } ?? "nothing") after reopening, expected one of \(allowed.map { $0.map { "\($0.count) bytes" } ?? "nothing" })"
                return run
            }
        }
        let keys = try reopened.keys().map { String(decoding: $0, as: UTF8.self) }
        if let stray = keys.first(where: { histories[$0] == nil }) { run.failure = "unknown key \(stray)" }
        return run
    }

    // MARK: Helpers

    /// The path of the highest-numbered segment of the store in `directory`.
    private func activeSegment(_ directory: String) throws -> String {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory)
        let id = try XCTUnwrap(names.compactMap(SegmentName.segmentID(fromFileName:)).max(), "no segment in \(directory)")
        return directory + "/" + SegmentName.segment(id)
    }

    private func fileLength(_ path: String) throws -> Int64 {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        return (attributes[.size] as? NSNumber)?.int64Value ?? -1
    }
}
