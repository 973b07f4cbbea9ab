import Foundation
import Synchronization
import XCTest
@testable import Cask
import CaskTestSupport

/// The crash test's workload (writer threads of puts, overwrites, deletes and batches, a thread
/// compacting all the time, automatic compaction at low thresholds), run in process on a
/// ``PowerLossFileSystem`` and stopped by cutting every I/O call at a random instant: the disk then
/// holds everything written before the cut, as after a `SIGKILL`. Each image is reopened and checked
/// against the acknowledgement log with ``AckLog``, as ``CrashTests`` does. Faster than killing a
/// process, and every failing image is kept for inspection with its log.
///
/// `CASK_KILLSIM_TRIALS` sets the number of cuts (default 20); `CASK_TEST_SEED` replays the choices
/// (not the thread interleaving).
final class KillSimulationTests: XCTestCase {
    func testCutsWhileWritingAndCompactingLoseNothingAcknowledged() throws {
        let trials = ProcessInfo.processInfo.environment["CASK_KILLSIM_TRIALS"].flatMap { Int($0) } ?? 20
        var random = SeededGenerator.fromEnvironment(fallback: UInt64(Date().timeIntervalSince1970 * 1000) % 1_000_000)
        print("KillSimulationTests: seed \(random.seed), \(trials) cuts")
        let work = TemporaryDirectory("cask-killsim")
        defer { work.remove() }
        var model: [String: UInt64] = [:]
        var store = work.appending("store-0")
        var acknowledged = 0
        for trial in 0..<trials {
            if trial % 10 == 0 {
                store = work.appending("store-\(trial)")
                model = [:]
            }
            let threads = [1, 2, 3, 1, 5][trial % 5]
            let durability: Durability = trial % 3 == 2 ? .fsync : .os
            let milliseconds = Int.random(in: 5...120, using: &random)
            let seed = random.seed % 1000 * 1000 + UInt64(trial) + 1
            let logPath = work.appending("log-\(trial)")
            let image = work.appending("image-\(trial)")
            try runUntilCut(store: store, log: logPath, image: image, seed: seed, durability: durability, threads: threads, milliseconds: milliseconds)

            let log = try AckLog(path: logPath)
            acknowledged += log.acknowledged
            let context = "trial \(trial) (\(durability), \(threads) threads, seed \(seed), cut after \(milliseconds) ms)"
            let reopened: CaskStore
            do { reopened = try CaskStore.open(at: image, options: .init(durability: .os)) } catch {
                work.keep()
                return XCTFail("\(context): open failed: \(error); image \(image)")
            }
            XCTAssertEqual(reopened.recoveryReport.damagedRanges, [], context)
            var found: [String: [UInt8]] = [:]
            for key in try reopened.keys() { found[String(decoding: key, as: UTF8.self)] = try reopened.get(key) }
            try reopened.close()
            let failures = log.check(found: found, model: &model, allAcknowledgedSurvive: true)
            for failure in failures.prefix(20) { XCTFail("\(context): \(failure)") }
            if !failures.isEmpty {
                work.keep()
                print("KillSimulationTests: kept \(work.path): the store before the cut is store-*, after it \(image), the log \(logPath)")
                return
            }
            // The next trial goes on from the image (as the crash test goes on from the reopened store).
            try FileManager.default.removeItem(atPath: store)
            try FileManager.default.moveItem(atPath: image, toPath: store)
            try? FileManager.default.removeItem(atPath: logPath)
        }
        print("KillSimulationTests: \(trials) cuts, \(acknowledged) acknowledged operations")
        XCTAssertGreaterThan(acknowledged, 0)
    }

    /// Runs the workload on `store` until every call is cut after `milliseconds`, then writes what a
    /// killed process leaves (every write made before the cut) to `image`.
    private func runUntilCut(
        store: String, log: String, image: String, seed: UInt64, durability: Durability, threads: Int, milliseconds: Int
    ) throws {
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: true)
        let fileSystem = try PowerLossFileSystem(directory: store)
        var options = CaskStore.Options(durability: durability)
        // Random pauses before calls (as a loaded machine, or a slow fsync, gives them) shuffle how
        // the writers, the compactions and the background jobs interleave.
        options.fileSystem = JitteringFileSystem(fileSystem, seed: seed)
        options.maxSegmentSize = 64 << 10
        options.bufferSize = 16 << 10
        options.compactionDeadRatio = 0.2
        options.compactionMinDeadBytes = 0
        let opened = try CaskStore.open(at: store, options: options)
        let ackLog = AckWriter(path: log)
        let stop = ModelBox([:])  // its `stopped` flag
        let group = DispatchGroup()
        for thread in 0..<threads {
            DispatchQueue.global().async(group: group) {
                _ = CrashWorkload.write(opened, thread: thread, seed: seed, log: ackLog.append, shouldStop: { stop.stopped })
            }
        }
        DispatchQueue.global().async(group: group) {
            while !stop.stopped {
                do { try opened.compact() } catch { return }
                usleep(2_000)
            }
        }
        usleep(UInt32(milliseconds * 1000))
        fileSystem.cutPowerNow()
        stop.stopped = true
        group.wait()
        try? opened.close()
        try fileSystem.writeCrashImage(to: image, .everything)
    }
}

/// The acknowledgement log of one in-process run, in ``AckLog``'s format (lines appended in order).
private final class AckWriter: @unchecked Sendable {
    private let lock = NSLock()
    private let handle: FileHandle

    init(path: String) {
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        handle = FileHandle(forWritingAtPath: path)!
    }

    func append(_ line: String) {
        lock.lock()
        defer { lock.unlock() }
        handle.write(Data((line + "\n").utf8))
    }

    deinit { try? handle.close() }
}

/// Forwards every call to `base` after a random pause of up to 2 ms on about one call in eight
/// (outside `base`'s lock, so other threads run meanwhile).
private final class JitteringFileSystem: FileSystem {
    let base: any FileSystem
    let random: Mutex<SeededGenerator>

    init(_ base: any FileSystem, seed: UInt64) {
        self.base = base
        random = Mutex(SeededGenerator(seed: seed ^ 0x51ED))
    }

    private func pause() {
        let micros = random.withLock { random -> UInt32 in
            random.next() % 8 == 0 ? UInt32(random.next() % 2_000) : 0
        }
        if micros > 0 { usleep(micros) }
    }

    func open(_ path: String, flags: Int32, mode: UInt32) throws(Errno) -> Int32 { pause(); return try base.open(path, flags: flags, mode: mode) }
    func close(_ fd: Int32) { base.close(fd) }
    func pread(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(Errno) -> Int {
        pause(); return try base.pread(fd, into: buffer, at: offset)
    }
    func pwrite(_ fd: Int32, from buffer: UnsafeRawBufferPointer, at offset: Int64) throws(Errno) -> Int {
        pause(); return try base.pwrite(fd, from: buffer, at: offset)
    }
    func fdatasync(_ fd: Int32) throws(Errno) { pause(); try base.fdatasync(fd) }
    func fsync(_ fd: Int32) throws(Errno) { pause(); try base.fsync(fd) }
    func ftruncate(_ fd: Int32, length: Int64) throws(Errno) { pause(); try base.ftruncate(fd, length: length) }
    func fileSize(_ fd: Int32) throws(Errno) -> Int64 { try base.fileSize(fd) }
    func rename(_ from: String, to: String) throws(Errno) { pause(); try base.rename(from, to: to) }
    func unlink(_ path: String) throws(Errno) { pause(); try base.unlink(path) }
    func makeDirectory(_ path: String, mode: UInt32) throws(Errno) { try base.makeDirectory(path, mode: mode) }
    func listDirectory(_ path: String) throws(Errno) -> [String] { try base.listDirectory(path) }
    func lock(_ fd: Int32, exclusive: Bool) throws(Errno) { try base.lock(fd, exclusive: exclusive) }
    func isDirectory(_ path: String) -> Bool? { base.isDirectory(path) }
    func isWritable(_ path: String) -> Bool { base.isWritable(path) }
}
