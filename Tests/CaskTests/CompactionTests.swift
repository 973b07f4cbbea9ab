import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// Compaction: space comes back, nothing is lost or resurrected — online, across reopens, and when
/// the disk fails (or the process dies) at any call of the swap.
final class CompactionTests: XCTestCase {
    private func options(segment: Int64 = 16 << 10, fileSystem: (any FileSystem)? = nil) -> CaskStore.Options {
        var options = CaskStore.Options.manualCompaction(maxSegmentSize: segment, fileSystem: fileSystem)
        options.flushInterval = 0
        return options
    }

    private func diskBytes(_ directory: String) throws -> Int64 {
        var total: Int64 = 0
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
            var info = stat()
            if stat(directory + "/" + name, &info) == 0 { total += Int64(info.st_blocks) * 512 }
        }
        return total
    }

    // MARK: The logout scenario

    /// 10,000 users, each archived at login and blanked at logout 20 times: after compaction the
    /// directory holds about the live bytes, and every user's last record reads back exactly.
    func testLogoutScenarioReclaimsTheSpace() throws {
        let dir = TemporaryDirectory("cask-logout")
        var options = options(segment: 1 << 20)
        options.durability = .buffered
        let store = try CaskStore.open(at: dir.path, options: options)
        var last: [[UInt8]: [UInt8]] = [:]
        var random = SeededGenerator.fromEnvironment(fallback: 2026)
        for round in 0..<20 {
            for user in 0..<10_000 {
                let key = Array("user/\(user)".utf8)
                let profile = Array("{\"id\":\(user),\"name\":\"User \(user)\",\"login\":\(round),\"token\":\"".utf8) + random.bytes(24) + Array("\"}".utf8)
                try store.put(key, profile)  // login
                let blank = Array("{\"id\":\(user)}".utf8)
                // The last round leaves half of the users logged in.
                if round < 19 || user % 2 == 0 {
                    try store.put(key, blank)  // logout
                    last[key] = blank
                } else {
                    last[key] = profile
                }
            }
        }
        try store.flush()
        let before = try diskBytes(dir.path)
        let result = try store.compact()
        let stats = try store.statistics()
        let after = try diskBytes(dir.path)
        XCTAssertGreaterThan(result.segmentsCompacted, 0)
        XCTAssertEqual(stats.deadBytes, 0, "\(stats)")
        // Live bytes plus fixed per-file overhead (header and block rounding of each segment, hints).
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).count
        let bound = Double(stats.liveBytes) * 1.10 + Double(files) * 4096 + Double(stats.keys) * 24
        XCTAssertLessThanOrEqual(Double(after), bound, "disk \(after) bytes for \(stats.liveBytes) live bytes in \(files) files")
        XCTAssertLessThan(after * 10, before, "compaction of 40 writes per user down to 1 frees >90%: \(before) -> \(after)")
        assertStore(store, matches: last, "after compaction")
        try store.close()
        let reopened = try CaskStore.open(at: dir.path, options: options)
        XCTAssertTrue(reopened.recoveryReport.isClean, "\(reopened.recoveryReport)")
        assertStore(reopened, matches: last, "after reopen")
        try reopened.close()
    }

    /// The space really comes back: once compaction is done, the process holds no descriptor or
    /// mapping of a deleted segment (an unlinked file still open keeps its blocks).
    /// `compact()` on a store with nothing dead changes nothing: it sealed the active segment
    /// whenever it held records, so every such call left one more segment file (and hint).
    func testCompactingNothingDeadLeavesTheSegmentsAsTheyAre() throws {
        let dir = TemporaryDirectory("cask-compact-nothing")
        defer { dir.remove() }
        let store = try CaskStore.open(at: dir.path, options: options())
        for i in 0..<20 { try store.put("key-\(i)", Array("value \(i)".utf8)) }
        let names = { try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() }
        let before = try names()
        for _ in 0..<3 {
            let result = try store.compact()
            XCTAssertEqual(result.segmentsCompacted, 0, "\(result)")
        }
        XCTAssertEqual(try names(), before)
        // One dead record in the active segment: now it is sealed and compacted.
        try store.put("key-0", [0])
        XCTAssertEqual(try store.compact().recordsDropped, 1)
        XCTAssertEqual(try store.get("key-0"), [0])
        try store.close()
    }

    func testDeletedSegmentsAreClosedAndUnmapped() throws {
        let dir = TemporaryDirectory("cask-compaction-space")
        var options = options(segment: 8 << 10)
        options.durability = .os  // sealed segments wait in the writer's list of files to sync
        let store = try CaskStore.open(at: dir.path, options: options)
        var random = SeededGenerator(seed: 9)
        for round in 0..<6 {
            for i in 0..<40 { try store.put("k\(i)", random.bytes(200 + round)) }
        }
        let value = try store.get("k3")
        try store.compact()
        store.backgroundWork.wait()
        let deleted = try openDeletedFiles(under: dir.path)
        XCTAssertEqual(deleted, [], "descriptors or mappings of deleted segments are still held")
        XCTAssertEqual(try store.get("k3"), value)
        try store.close()
    }

    /// `waitForBackgroundWork()` returns only once the compactions and hint files the writes set
    /// off are done: every sealed segment then has its hint, no compaction is half done (no
    /// `COMPACTION` manifest, no temporary file), and the directory stays as it is.
    func testWaitForBackgroundWorkReturnsOnceTheStoreIsQuiet() throws {
        let dir = TemporaryDirectory("cask-compaction-quiet")
        var options = options(segment: 16 << 10)
        options.automaticCompaction = true
        options.compactionMinDeadBytes = 0
        options.idleCompactionDelay = 0
        let store = try CaskStore.open(at: dir.path, options: options)
        var random = SeededGenerator(seed: 31)
        var model: [String: [UInt8]] = [:]
        for round in 0..<30 {
            for i in 0..<40 {
                let value = random.bytes(300 + round)
                try store.put("k\(i)", value)
                model["k\(i)"] = value
            }
        }
        store.waitForBackgroundWork()
        let names = Set(try FileManager.default.contentsOfDirectory(atPath: dir.path))
        let segments = names.compactMap(SegmentName.segmentID(fromFileName:)).sorted()
        XCTAssertGreaterThan(segments.count, 1, "\(names.sorted())")
        let sealed = try store.statistics().segments.filter(\.sealed).map(\.id)
        XCTAssertEqual(sealed.count, segments.count - 1, "\(names.sorted())")
        for id in sealed {
            XCTAssertTrue(names.contains(SegmentName.hint(id)), "sealed segment \(id) has no hint yet: \(names.sorted())")
        }
        XCTAssertFalse(names.contains(CompactionManifest.fileName), "\(names.sorted())")
        XCTAssertEqual(names.filter { $0.hasSuffix(".tmp") }, [], "\(names.sorted())")
        // About 25 segments were sealed, each more than half dead by the next round: compacted.
        XCTAssertLessThan(segments.count, 10, "the compactions the rotations set off have run: \(names.sorted())")
        Thread.sleep(forTimeInterval: 0.1)
        XCTAssertEqual(Set(try FileManager.default.contentsOfDirectory(atPath: dir.path)), names, "work still ran after the wait")
        assertStore(store, matches: model, "after the wait")
        try store.close()
    }

    /// Paths under `directory` that this process has open or mapped but that were deleted.
    private func openDeletedFiles(under directory: String) throws -> [String] {
        var found: [String] = []
        for fd in try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
            if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + fd),
               target.hasPrefix(directory), target.hasSuffix("(deleted)") {
                found.append("fd \(fd): \(target)")
            }
        }
        let maps = try String(contentsOfFile: "/proc/self/maps", encoding: .utf8)
        for line in maps.split(separator: "\n") where line.contains(directory) && line.hasSuffix("(deleted)") {
            found.append("mapping: \(line)")
        }
        return found
    }

    // MARK: Tombstones

    /// A delete whose key still has an older put in a segment outside the compaction must survive it.
    func testTombstoneStaysWhileAnOlderSegmentHoldsTheKey() throws {
        let dir = TemporaryDirectory("cask-tombstone")
        var options = options(segment: 4096)
        options.compactionDeadRatio = 0.3
        options.compactionMinDeadBytes = 0
        let store = try CaskStore.open(at: dir.path, options: options)
        var random = SeededGenerator(seed: 5)  // incompressible values, so sizes are what they say
        // Segment 1: the put, and values that stay live (so that the policy leaves it alone).
        try store.put("ghost", random.bytes(300))
        for i in 0..<6 { try store.put("anchor-\(i)", random.bytes(500)) }
        for i in 0..<40 { try store.put("filler-\(i)", random.bytes(300)) }
        try store.delete("ghost")
        // Overwrites: the segments after the first become mostly dead, the tombstone's included.
        for _ in 0..<4 {
            for i in 0..<40 { try store.put("filler-\(i)", random.bytes(100)) }
        }
        let firstSegment = try store.statistics().segments.first!.id
        let before = try store.statistics().segments
        XCTAssertLessThan(Double(before[0].deadBytes) / Double(before[0].fileBytes), 0.3, "\(before[0])")
        // Compact through the policy, which picks the dead segments and leaves the first one.
        let compactor = store.compactor()
        let result = store.compactionGate.withLock { _ in try? compactor.run(.policy) }
        XCTAssertGreaterThan(result?.segmentsCompacted ?? 0, 2, "\(String(describing: result))")
        let remaining = try store.statistics().segments.map(\.id)
        XCTAssertTrue(remaining.contains(firstSegment))
        XCTAssertNil(try store.get("ghost"))
        try store.close()
        let reopened = try CaskStore.open(at: dir.path, options: options)
        XCTAssertNil(try reopened.get("ghost"), "a deleted key came back after a partial compaction and a reopen")
        XCTAssertFalse(try reopened.contains("ghost"))
        // Compacting everything now drops both the put and the tombstone.
        try reopened.compact()
        XCTAssertNil(try reopened.get("ghost"))
        try reopened.close()
        let again = try CaskStore.open(at: dir.path, options: options)
        XCTAssertNil(try again.get("ghost"))
        try again.close()
    }

    // MARK: Damage

    /// Damage the open did not see (it trusted the segment's hint file) stops compaction only for that
    /// segment: it is reported, left byte for byte as it was and skipped from then on; every other
    /// segment is compacted, and every intact value still reads.
    func testDamageFoundWhileCompactingLeavesThatSegmentAndCompactsTheRest() throws {
        let dir = TemporaryDirectory("cask-compaction-damage")
        defer { dir.remove() }
        let options = options(segment: 4096)
        var model: [[UInt8]: [UInt8]] = [:]
        var random = SeededGenerator(seed: 11)
        do {
            let store = try CaskStore.open(at: dir.path, options: options)
            for i in 0..<60 {
                let value = random.bytes(200)
                try store.put("key-\(i)", value)
                model[Array("key-\(i)".utf8)] = value
            }
            try store.close()  // every sealed segment has its hint; the open will not scan them
        }
        // A byte in the middle of the first segment's second record: its checksum no longer holds.
        let first = dir.appending(SegmentName.segment(1))
        var records: [InspectedRecord] = []
        try CaskStore.inspect(at: dir.path, segment: 1) { item in
            if case .record(let record) = item { records.append(record) }
        }
        XCTAssertGreaterThan(records.count, 3)
        let damaged = records[1]
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: first)))
        bytes[Int(damaged.offset) + damaged.bytes / 2] ^= 0xFF
        try Data(bytes).write(to: URL(fileURLWithPath: first))
        let damagedKey = damaged.key

        let store = try CaskStore.open(at: dir.path, options: options)
        XCTAssertEqual(store.recoveryReport.damagedRanges, [], "the open read hints: it cannot see the damage")
        // Every segment gets dead records, the damaged one included.
        for i in stride(from: 0, to: 60, by: 2) {
            let value = random.bytes(200)
            try store.put("key-\(i)", value)
            model[Array("key-\(i)".utf8)] = value
        }
        if (try? store.get(damagedKey)) == nil { model[damagedKey] = nil }  // unreadable unless overwritten since
        let segmentsBefore = try store.statistics().segments.map(\.id)
        let result = try store.compact()
        XCTAssertEqual(result.damage.map(\.file), [first], "\(result)")
        XCTAssertEqual(result.damage.first?.offset, Int64(damaged.offset))
        XCTAssertGreaterThan(result.segmentsCompacted, 1, "the other segments were compacted")
        let after = try store.statistics().segments
        XCTAssertTrue(after.contains { $0.id == 1 && $0.damaged }, "\(after)")
        XCTAssertFalse(after.contains { $0.id != 1 && segmentsBefore.contains($0.id) && $0.sealed && $0.deadBytes > 0 }, "\(after)")
        XCTAssertEqual(try [UInt8](Data(contentsOf: URL(fileURLWithPath: first))), bytes, "the damaged segment was changed")
        for (key, value) in model {
            XCTAssertEqual(try store.get(key), value, String(decoding: key, as: UTF8.self))
        }
        // Known now: the next compaction skips it and reports nothing new.
        try store.put("key-1", random.bytes(200))
        XCTAssertEqual(try store.compact().damage, [])
        XCTAssertTrue(FileManager.default.fileExists(atPath: first))
        try store.close()
    }

    // MARK: Online, against a model

    /// Random puts and deletes from a writer thread while compactions run and the store is reopened
    /// at random points: the store always equals the model.
    func testModelWithConcurrentCompactionsAndReopens() throws {
        let dir = TemporaryDirectory("cask-compaction-model")
        var random = SeededGenerator.fromEnvironment(fallback: 77)
        print("CompactionTests: seed \(random.seed)")
        var model: [[UInt8]: [UInt8]] = [:]
        for round in 0..<6 {
            let store = try CaskStore.open(at: dir.path, options: options(segment: 8 << 10))
            XCTAssertTrue(store.recoveryReport.isClean, "round \(round): \(store.recoveryReport)")
            assertStore(store, matches: model, "round \(round) after reopen")
            // The writer thread owns the model while it runs; compactions run here meanwhile.
            let seed = random.next()
            let writes = DispatchGroup()
            let box = ModelBox(model)
            DispatchQueue.global().async(group: writes) {
                var random = SeededGenerator(seed: seed)
                for _ in 0..<1500 {
                    let key = Array("k\(Int.random(in: 0..<300, using: &random))".utf8)
                    if Int.random(in: 0..<5, using: &random) == 0 {
                        try! store.delete(key)
                        box.model[key] = nil
                    } else {
                        let value = random.bytes(Int.random(in: 0..<400, using: &random))
                        try! store.put(key, value)
                        box.model[key] = value
                    }
                }
            }
            var compactions = 0
            while writes.wait(timeout: .now() + .milliseconds(5)) == .timedOut {
                try store.compact()
                compactions += 1
            }
            try store.compact()
            model = box.model
            assertStore(store, matches: model, "round \(round) after \(compactions + 1) compactions")
            let stats = try store.statistics()
            XCTAssertEqual(stats.keys, model.count)
            try store.close()
        }
    }

    /// Readers that found a record in a segment keep reading it while compaction deletes the file.
    func testReadersDuringCompactionSeeEveryValue() throws {
        let dir = TemporaryDirectory("cask-compaction-readers")
        let store = try CaskStore.open(at: dir.path, options: options(segment: 8 << 10))
        var model: [[UInt8]: [UInt8]] = [:]
        for i in 0..<400 {
            let key = Array("k\(i % 200)".utf8)
            model[key] = Array("value \(i) ".utf8) + Array(repeating: UInt8(i & 0xFF), count: 100)
            try store.put(key, model[key]!)
        }
        let frozen = model
        let stop = ModelBox([:])
        let readers = DispatchGroup()
        let failures = ModelBox([:])
        for reader in 0..<2 {
            DispatchQueue.global().async(group: readers) {
                var n = reader
                while !stop.stopped {
                    let key = Array("k\(n % 200)".utf8)
                    do {
                        let value = try store.get(key)
                        if value != frozen[key] { failures.model[key] = value ?? [] }
                    } catch {
                        failures.model[key] = Array("\(error)".utf8)
                    }
                    n += 7
                }
            }
        }
        for _ in 0..<5 { try store.compact() }
        stop.stopped = true
        readers.wait()
        XCTAssertTrue(failures.model.isEmpty, "readers saw wrong values: \(failures.model.keys.map { String(decoding: $0, as: UTF8.self) })")
        try store.close()
    }

    // MARK: Faults at every call of the swap

    /// Runs `compact()` with the disk failing at each of its calls in turn — once, and from that call
    /// on (as if the process died there) — then reopens on a healthy disk: the contents are always
    /// exactly what they were, no temporary file or manifest is left, and the next compaction works.
    func testEveryCallOfACompactionFailing() throws {
        let work = TemporaryDirectory("cask-compaction-faults")
        let template = work.appending("template"), path = work.appending("store")
        let model = try makeTemplate(template)

        let reference = try compactWithFault(template: template, path: path, rule: nil, model: model)
        XCTAssertEqual(reference.failure, nil)
        let points = reference.trace.filter { $0.operation.canFail }
        XCTAssertGreaterThan(points.count, 20, "the compaction made too few calls to be a real test")
        for operation: FaultInjectingFileSystem.Operation in [.pwrite, .fdatasync, .rename, .unlink, .fsync] {
            XCTAssertTrue(points.contains { $0.operation == operation }, "no \(operation) in the compaction")
        }
        var runs = 0
        for call in points {
            for latch in [false, true] {
                let fault: Errno = call.operation == .pwrite ? .noSpace : .ioError
                let rule = FaultInjectingFileSystem.Rule(nil, .callIndex(call.index), .fail(fault), latch: latch)
                let run = try compactWithFault(template: template, path: path, rule: rule, model: model)
                runs += 1
                if let failure = run.failure {
                    XCTFail("failing \(call)\(latch ? " and everything after" : ""): \(failure)")
                }
            }
        }
        print("CompactionTests: \(points.count) injection points, \(runs) runs")
    }

    private struct FaultRun {
        var trace: [FaultInjectingFileSystem.Call]
        var failure: String?
    }

    /// A store of several sealed segments full of overwrites and deletes, some of whose live records
    /// already went through a compaction (so that segment ids and seq order disagree, as they do in
    /// any store that has been compacted), and later deletes of some of those keys.
    private func makeTemplate(_ path: String) throws -> [[UInt8]: [UInt8]] {
        var random = SeededGenerator(seed: 31)
        let store = try CaskStore.open(at: path, options: options(segment: 4096))
        var model: [[UInt8]: [UInt8]] = [:]
        func write(_ i: Int, deleteEvery: Int) throws {
            let key = Array("k\(i % 40)".utf8)
            if i % deleteEvery == 0 {
                try store.delete(key)
                model[key] = nil
            } else {
                let value = random.bytes(Int.random(in: 10...200, using: &random))
                try store.put(key, value)
                model[key] = value
            }
        }
        for i in 0..<120 { try write(i, deleteEvery: 9) }
        try store.compact()
        for i in 0..<60 { try write(i * 3 + 1, deleteEvery: 2) }
        try store.close()
        return model
    }

    private func compactWithFault(template: String, path: String, rule: FaultInjectingFileSystem.Rule?, model: [[UInt8]: [UInt8]]) throws -> FaultRun {
        try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.copyItem(atPath: template, toPath: path)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let fileSystem = FaultInjectingFileSystem()
        let store = try CaskStore.open(at: path, options: options(segment: 4096, fileSystem: fileSystem))
        store.backgroundWork.wait()
        fileSystem.clearTrace()
        if let rule { fileSystem.inject(rule) }
        var compacted = true
        do { try store.compact() } catch { compacted = false }
        let trace = fileSystem.trace
        var failure: String?
        // The running store still reads everything right (its mappings do not need the disk).
        for (key, value) in model where failure == nil {
            if (try? store.get(key)) != value { failure = "the running store lost \(String(decoding: key, as: UTF8.self)) (compaction \(compacted ? "succeeded" : "failed"))" }
        }
        try? store.close()
        if failure != nil { return FaultRun(trace: trace, failure: failure) }

        let reopened = try CaskStore.open(at: path, options: options(segment: 4096))
        defer { try? reopened.close() }
        if !reopened.recoveryReport.damagedRanges.isEmpty {
            return FaultRun(trace: trace, failure: "damage after reopen: \(reopened.recoveryReport)")
        }
        reopened.backgroundWork.wait()  // the hints it writes go through temporary files too
        let names = try FileManager.default.contentsOfDirectory(atPath: path)
        if let leftover = names.first(where: { $0.hasSuffix(".tmp") || $0 == CompactionManifest.fileName }) {
            return FaultRun(trace: trace, failure: "\(leftover) left after reopen")
        }
        for (key, value) in model where (try? reopened.get(key)) != value {
            return FaultRun(trace: trace, failure: "after reopen \(String(decoding: key, as: UTF8.self)) is \(String(describing: try? reopened.get(key)))")
        }
        if reopened.count != model.count {
            return FaultRun(trace: trace, failure: "after reopen \(reopened.count) keys, expected \(model.count) (a deleted key came back?)")
        }
        // A healthy compaction afterwards works and changes nothing visible.
        do { try reopened.compact() } catch { return FaultRun(trace: trace, failure: "the next compaction failed: \(error)") }
        if reopened.count != model.count || model.contains(where: { (try? reopened.get($0.key)) != $0.value }) {
            return FaultRun(trace: trace, failure: "the next compaction changed the contents")
        }
        return FaultRun(trace: trace, failure: nil)
    }
}

/// Shared state for the tests' threads (guarded by a lock).
final class ModelBox: @unchecked Sendable {
    private let lock = NSLock()
    private var _model: [[UInt8]: [UInt8]]
    private var _stopped = false

    init(_ model: [[UInt8]: [UInt8]]) { _model = model }

    var model: [[UInt8]: [UInt8]] {
        get { lock.lock(); defer { lock.unlock() }; return _model }
        set { lock.lock(); _model = newValue; lock.unlock() }
    }

    var stopped: Bool {
        get { lock.lock(); defer { lock.unlock() }; return _stopped }
        set { lock.lock(); _stopped = newValue; lock.unlock() }
    }
}
