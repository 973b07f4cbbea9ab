import Cask
import Foundation
import Synchronization

/// Every workload for one engine in one run, in one worker process. Generic over the engine, so
/// each engine's loop is specialized for it (no existential dispatch inside a timed loop).
///
/// Order (each workload on the store the previous left), main phase:
/// nosync: `fillseq` (own store); `fillrandom` → close → `open` [Cask: `open_nohints`] →
/// `overwrite` → `readrandom` → `readmissing` → `readseq` → `allocs_*` → `mixed` → `deleterandom`;
/// batch1000: `fillseq`, `fillrandom` → `overwrite`. Sync phase: `fillsync`.
struct EngineSuite<E: Engine> {
    let data: BenchmarkData
    let root: String
    let run: Int
    let fillSyncCount: Int
    /// Workloads to report; the others run only when a reported one needs their store.
    let only: Set<String>?

    var seed: UInt64 { 1000 &+ UInt64(run) &* 7919 }

    func wanted(_ names: String...) -> Bool { only == nil || names.contains { only!.contains($0) } }

    /// Everything but `fillsync`.
    func runMain() throws {
        let modes = E.capabilities.contains(.batches) ? [WriteMode.nosync, .batch1000] : [.nosync]
        for mode in modes {
            if wanted("fillseq") { try fill("fillseq", mode: mode, order: Array(0..<data.count), keep: false) }
            let followers = ["open", "open_nohints", "readrandom", "readrandom_2t", "readwhilewriting", "readmissing", "readseq", "mixed",
                             "scanprefix", "scan_put", "deleterandom"] + WorkloadName.allocations
            if wanted("fillrandom", "overwrite") || (mode == .nosync && followers.contains { wanted($0) }) {
                try fillRandomAndFollowers(mode: mode)
            }
        }
        // Its gets need reads: not for `rawlog`, the write-only reference.
        if wanted("objects_disk", "objects_disk_nodict") && E.capabilities.contains(.reads) { try objectsDisk() }
        if E.self == CaskEngine.self && wanted("compact", "compact_put") { try compaction() }
        if E.self == CaskEngine.self && wanted("backup") { try backups() }
    }

    /// `fillsync` with 1 writer, and 4 and 16 where the engine takes several threads. The
    /// coordinator runs this phase for all engines back to back, so that the disk's flush latency
    /// (which swings with the machine's other work) is about the same for each.
    func runSync() throws {
        if wanted("fillsync") {
            let writerCounts = E.capabilities.contains(.threads) ? [1, 4, 16] : [1]
            for writers in writerCounts { try fillSync(writers: writers) }
        }
        if E.self == CaskEngine.self && wanted("fillsync", "fillsync_paired") { try pairedFillSync() }
        if E.self == CaskEngine.self && wanted("fillsync_tasks", "fillsync_tasks_blocking") { try taskFillSync() }
    }

    // MARK: Measuring

    func directory(_ name: String, _ mode: WriteMode) -> String {
        let path = root + "/\(E.name)-\(name)-\(mode.rawValue)"
        try? FileManager.default.removeItem(atPath: path)
        return path
    }

    /// Times `body`, then prints its RESULT line (if wanted) with the store's disk bytes and the
    /// peak RSS while it ran.
    @discardableResult
    func measure(_ workload: String, mode: String, num: Int, bytes: Int, directory: String,
                         extra: [(String, String)] = [], printing: Bool = true, _ body: () throws -> Void) throws -> Measurement {
        ProcessStats.resetPeak()
        let seconds = try Clock.time(body)
        let measurement = Measurement(
            engine: E.name, workload: workload, mode: mode, num: num, valueSize: data.valueSize, seconds: seconds, bytes: bytes,
            diskBytes: ProcessStats.diskBytes(directory), rssKB: ProcessStats.rss().peak,
            extra: extra + [("seconds", String(format: "%.4f", seconds))])
        if printing { emit(measurement) }
        return measurement
    }

    /// Prints `measurement`'s RESULT line if its workload was asked for.
    func emit(_ measurement: Measurement) {
        guard wanted(measurement.workload) else { return }
        print(measurement.line)
        fflush(nil)
    }

    /// Puts `order`'s keys (value `n` for the `n`th put), committing every `mode.batchSize`.
    func write(_ engine: E, _ order: [Int], mode: WriteMode) throws {
        // A local, read through no closure: a closure that captured this struct copied it for
        // each put (a retain and a release of its fields: 3% of a Cask put's samples), and one
        // that captured the data and the engine retained and released both (2.7%).
        let data = data
        let key = KeyBuffer()
        let batch = mode.batchSize
        for (n, i) in order.enumerated() {
            try engine.put(key.key(i), data.value(n))
            if (n + 1) % batch == 0 { try engine.commitBatch() }
        }
        try engine.finishWrites()
    }

    /// Another thread's handle on `engine`, of the engine's own type: calls through `any Engine`
    /// run the generic `get` unspecialized, which looked up `Optional<R>`'s metadata in the Swift
    /// runtime's shared cache on every call (a lock and a futex wake per get on 2 threads, for
    /// every engine alike).
    func handle(sharing engine: E) throws -> E {
        guard let handle = try engine.handleForAnotherThread() as? E else { throw BenchError.check("\(E.name): a handle of another type") }
        return handle
    }

    /// Runs `body(thread)` on `threads` OS threads at once (a dispatch pool would cap them at the
    /// core count) and waits; rethrows the first error.
    func onThreads(_ threads: Int, _ body: @escaping @Sendable (Int) throws -> Void) throws {
        let errors = Mutex<[String]>([])
        let done = DispatchGroup()
        for thread in 0..<threads {
            done.enter()
            Thread.detachNewThread {
                do { try body(thread) } catch { errors.withLock { $0.append("\(error)") } }
                done.leave()
            }
        }
        done.wait()
        if let first = errors.withLock({ $0.first }) { throw BenchError.check(first) }
    }

    // MARK: Fills

    private func fill(_ workload: String, mode: WriteMode, order: [Int], keep: Bool) throws {
        let dir = directory(workload, mode)
        let engine = try E(directory: dir, mode: mode)
        try measure(workload, mode: mode.rawValue, num: order.count, bytes: data.userBytes(order.count), directory: dir) {
            try write(engine, order, mode: mode)
        }
        try engine.close()
        if !keep { try? FileManager.default.removeItem(atPath: dir) }
    }

    private func fillRandomAndFollowers(mode: WriteMode) throws {
        let dir = directory("fillrandom", mode)
        var engine = try E(directory: dir, mode: mode)
        let order = data.shuffledIndices(seed: seed &+ 1)  // before the clock starts
        var fill = try measure("fillrandom", mode: mode.rawValue, num: data.count, bytes: data.userBytes(data.count), directory: dir,
                               extra: [("user_bytes", "\(data.userBytes(data.count))")], printing: false) {
            try write(engine, order, mode: mode)
        }
        if mode == .nosync && E.capabilities.contains(.reopen) {
            try engine.close()
            // Disk once the engine is done with the data (Cask writes the last hint files in the
            // background, LevelDB and RocksDB flush their memtables on close): what the target
            // judges. `disk_bytes_open` is what the files held the moment the last put returned.
            fill.extra.append(("disk_bytes_open", "\(fill.diskBytes)"))
            fill.diskBytes = ProcessStats.diskBytes(dir)
            emit(fill)
            engine = try reopen(dir, mode: mode)
        } else {
            emit(fill)
        }
        let overwrites = data.randomIndices(data.count, seed: seed &+ 2)
        try measure("overwrite", mode: mode.rawValue, num: overwrites.count, bytes: data.userBytes(overwrites.count), directory: dir) {
            try write(engine, overwrites, mode: mode)
        }
        if mode == .nosync {
            // The reads are measured on a quiet store, as RocksDB's db_bench does after its
            // `waitforcompaction`: a compaction the overwrites set off would take one of the
            // machine's cores from the 2-thread workloads and not from the 1-thread ones.
            try engine.waitForBackgroundWork()
            if E.capabilities.contains(.reads) {
                // readrandom_2t and readwhilewriting are judged against readrandom's rate in this run.
                let alone = wanted("readrandom", "readrandom_2t", "readwhilewriting") ? try readRandom(engine, dir, missing: false) : 0
                if E.capabilities.contains(.threads) {
                    if wanted("readrandom_2t") { try readRandomOnThreads(engine, dir, alone: alone) }
                    if wanted("readwhilewriting") { try readWhileWriting(engine, dir, alone: alone) }
                }
                if wanted("readmissing") { try readRandom(engine, dir, missing: true) }
            }
            if E.capabilities.contains(.scans) && wanted("readseq") { try readSequential(engine, dir) }
            if E.capabilities.contains(.reads) { try allocations(engine, dir) }
            if E.capabilities.contains(.threads) { try mixed(engine, dir) }
            if E.capabilities.contains(.scans) && E.divisor == 1 && data.count >= 2 * Self.keysPerPrefix {
                if wanted("scanprefix") { try scanPrefix(engine, dir) }
                if E.capabilities.contains(.threads) && wanted("scan_put") { try scanPut(engine, dir) }
            }
            if E.capabilities.contains(.deletes) { try deleteRandom(engine, dir) }
        }
        try engine.close()
        try? FileManager.default.removeItem(atPath: dir)
    }

    // MARK: Open

    /// Times reopening the store just filled (`open`); Cask reports its index size, then is opened
    /// again with its hint files removed (`open_nohints`). Returns the open engine.
    private func reopen(_ dir: String, mode: WriteMode) throws -> E {
        var engine: E?
        var extra: [(String, String)] = []
        try measure("open", mode: "read", num: data.count, bytes: 0, directory: dir) { engine = try E(directory: dir, mode: mode) }
        if let store = (engine as? CaskEngine)?.store ?? (engine as? CaskEncryptedEngine)?.store {
            let statistics = try store.statistics()
            guard statistics.keys == data.count else { throw BenchError.check("cask open found \(statistics.keys) keys, not \(data.count)") }
            extra = [("index_bytes", "\(statistics.indexBytes)"), ("index_key_bytes", "\(statistics.indexKeyBytes)"),
                     ("index_overhead_bytes_per_key", String(format: "%.1f", statistics.indexOverheadPerKey)),
                     // The records' bytes: the segments without their headers (issue 26 compares them per record).
                     ("record_bytes", "\(statistics.segments.reduce(Int64(0)) { $0 + $1.fileBytes - $1.headerBytes })")]
            // The ordered view is built by the first listing: its cost, once, and the index with it.
            var listed = 0
            let buildSeconds = try Clock.time { listed = try store.count(prefix: Array("0".utf8)) }
            if listed != data.count { throw BenchError.check("cask counted \(listed) keys under \"0\", not \(data.count)") }
            let ordered = try store.statistics()
            extra += [("ordered_view_build_seconds", String(format: "%.4f", buildSeconds)),
                      ("index_overhead_bytes_per_key_ordered", String(format: "%.1f", ordered.indexOverheadPerKey))]
            if wanted("open") {
                print("RESULT engine=\(E.name) workload=index mode=read num=\(statistics.keys) value_size=\(data.valueSize) ops_per_s=0 mb_per_s=0 disk_bytes=\(statistics.segmentBytes) rss_kb=\(ProcessStats.rss().current) " + extra.map { "\($0.0)=\($0.1)" }.joined(separator: " "))
            }
            try store.close()
            for name in try FileManager.default.contentsOfDirectory(atPath: dir) where name.hasSuffix(".hint") {
                try FileManager.default.removeItem(atPath: dir + "/" + name)
            }
            try measure("open_nohints", mode: "read", num: data.count, bytes: 0, directory: dir) { engine = try E(directory: dir, mode: mode) }
        }
        return engine!
    }

    // MARK: Deletes

    /// Deletes num/10 distinct existing keys (nosync, one per call).
    private func deleteRandom(_ engine: E, _ dir: String) throws {
        guard wanted("deleterandom") else { return }
        let keys = Array(data.shuffledIndices(seed: seed &+ 4).prefix(data.count / 10))
        let key = KeyBuffer()
        try measure("deleterandom", mode: "nosync", num: keys.count, bytes: keys.count * KeyBuffer.keyLength, directory: dir) {
            for i in keys { try engine.delete(key.key(i)) }
            try engine.finishWrites()
        }
        let probe = KeyBuffer()
        if let i = keys.first, try engine.get(probe.key(i)) { $0.count } != nil {
            throw BenchError.check("\(E.name) deleterandom: key \(i) is still there")
        }
    }
}
