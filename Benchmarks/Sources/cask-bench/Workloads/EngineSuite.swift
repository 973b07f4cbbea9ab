import Cask
import CAllocationCounter
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

    private var seed: UInt64 { 1000 &+ UInt64(run) &* 7919 }

    private func wanted(_ names: String...) -> Bool { only == nil || names.contains { only!.contains($0) } }

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
        if E.self == CaskEngine.self && wanted("compact", "compact_put") { try compaction() }
    }

    // MARK: Compaction (Cask)

    /// A store with 50% dead data: every key written, then every key written again (automatic
    /// compaction off), flushed and reopened.
    private func halfDeadStore(_ name: String) throws -> (CaskStore, String) {
        let dir = directory(name, .nosync)
        var options = CaskStore.Options(durability: .os)
        options.automaticCompaction = false
        var store = try CaskStore.open(at: dir, options: options)
        let engine = CaskEngine(store: store)
        try write(engine as! E, data.shuffledIndices(seed: seed &+ 11), mode: .nosync)
        try write(engine as! E, data.shuffledIndices(seed: seed &+ 12), mode: .nosync)
        try store.close()
        store = try CaskStore.open(at: dir, options: options)
        return (store, dir)
    }

    private func compaction() throws {
        // `compact`: MB/s of input, and the disk before and after.
        var (store, dir) = try halfDeadStore("compact")
        let before = ProcessStats.diskBytes(dir)
        var result = CaskStore.CompactionResult()
        ProcessStats.resetPeak()
        let seconds = try Clock.time { result = try store.compact() }
        if wanted("compact") {
            // ops/s counts the records read; MB/s is of input (the segments compacted).
            let line = Measurement(
                engine: E.name, workload: "compact", mode: "nosync", num: result.recordsCopied + result.recordsDropped,
                valueSize: data.valueSize, seconds: seconds, bytes: Int(result.bytesBefore),
                diskBytes: ProcessStats.diskBytes(dir), rssKB: ProcessStats.rss().peak,
                extra: [("input_bytes", "\(result.bytesBefore)"), ("output_bytes", "\(result.bytesAfter)"),
                        ("disk_bytes_before", "\(before)"), ("seconds", String(format: "%.4f", seconds))])
            print(line.line)
            fflush(nil)
        }
        try store.close()
        try? FileManager.default.removeItem(atPath: dir)

        // `compact_put`: overwrites with no compaction, then overwrites while one runs.
        guard wanted("compact_put") else { return }
        (store, dir) = try halfDeadStore("compact_put")
        let engine = CaskEngine(store: store) as! E
        let overwrites = data.randomIndices(data.count, seed: seed &+ 13)
        let key = KeyBuffer(), data = data  // (a local: see `write`)
        func putsPerSecond(while running: () -> Bool, limit: Int) throws -> (Double, Int) {
            let start = Clock.now()
            var n = 0
            while n < limit && running() {
                try engine.put(key.key(overwrites[n % overwrites.count]), data.value(n))
                n += 1
            }
            try engine.finishWrites()
            return (Double(n) / (Clock.now() - start), n)
        }
        let (alone, _) = try putsPerSecond(while: { true }, limit: data.count / 4)
        let done = Atomic(false)
        let compactingStore = store
        let thread = Thread { _ = try? compactingStore.compact(); done.store(true, ordering: .releasing) }
        thread.start()
        let (during, count) = try putsPerSecond(while: { !done.load(ordering: .acquiring) }, limit: .max)
        while !done.load(ordering: .acquiring) { usleep(1_000) }
        let line = "RESULT engine=\(E.name) workload=compact_put mode=nosync num=\(count) value_size=\(data.valueSize) "
            + "ops_per_s=\(String(format: "%.0f", during)) mb_per_s=\(String(format: "%.2f", during * Double(16 + data.valueSize) / 1_048_576)) "
            + "disk_bytes=\(ProcessStats.diskBytes(dir)) rss_kb=\(ProcessStats.rss().peak) "
            + "ops_per_s_without=\(String(format: "%.0f", alone)) ratio=\(String(format: "%.3f", during / alone))"
        print(line)
        fflush(nil)
        try store.close()
        try? FileManager.default.removeItem(atPath: dir)
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
    }

    // MARK: Measuring

    private func directory(_ name: String, _ mode: WriteMode) -> String {
        let path = root + "/\(E.name)-\(name)-\(mode.rawValue)"
        try? FileManager.default.removeItem(atPath: path)
        return path
    }

    /// Times `body`, then prints its RESULT line (if wanted) with the store's disk bytes and the
    /// peak RSS while it ran.
    @discardableResult
    private func measure(_ workload: String, mode: String, num: Int, bytes: Int, directory: String,
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
    private func emit(_ measurement: Measurement) {
        guard wanted(measurement.workload) else { return }
        print(measurement.line)
        fflush(nil)
    }

    /// Puts `order`'s keys (value `n` for the `n`th put), committing every `mode.batchSize`.
    private func write(_ engine: E, _ order: [Int], mode: WriteMode) throws {
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
        if let cask = engine as? CaskEngine {
            let statistics = try cask.store.statistics()
            guard statistics.keys == data.count else { throw BenchError.check("cask open found \(statistics.keys) keys, not \(data.count)") }
            extra = [("index_bytes", "\(statistics.indexBytes)"), ("index_key_bytes", "\(statistics.indexKeyBytes)"),
                     ("index_overhead_bytes_per_key", String(format: "%.1f", statistics.indexOverheadPerKey))]
            // The ordered view is built by the first listing: its cost, once, and the index with it.
            var listed = 0
            let buildSeconds = try Clock.time { listed = try cask.store.count(prefix: Array("0".utf8)) }
            if listed != data.count { throw BenchError.check("cask counted \(listed) keys under \"0\", not \(data.count)") }
            let ordered = try cask.store.statistics()
            extra += [("ordered_view_build_seconds", String(format: "%.4f", buildSeconds)),
                      ("index_overhead_bytes_per_key_ordered", String(format: "%.1f", ordered.indexOverheadPerKey))]
            if wanted("open") {
                print("RESULT engine=cask workload=index mode=read num=\(statistics.keys) value_size=\(data.valueSize) ops_per_s=0 mb_per_s=0 disk_bytes=\(statistics.segmentBytes) rss_kb=\(ProcessStats.rss().current) " + extra.map { "\($0.0)=\($0.1)" }.joined(separator: " "))
            }
            try cask.close()
            for name in try FileManager.default.contentsOfDirectory(atPath: dir) where name.hasSuffix(".hint") {
                try FileManager.default.removeItem(atPath: dir + "/" + name)
            }
            try measure("open_nohints", mode: "read", num: data.count, bytes: 0, directory: dir) { engine = try E(directory: dir, mode: mode) }
        }
        return engine!
    }

    // MARK: Reads

    /// Returns the gets per second.
    @discardableResult
    private func readRandom(_ engine: E, _ dir: String, missing: Bool) throws -> Double {
        let indices = data.randomIndices(data.count, seed: seed &+ 3)
        let key = KeyBuffer()
        var found = 0, wrongLength = 0
        let valueSize = data.valueSize
        let measurement = try measure(missing ? "readmissing" : "readrandom", mode: "read", num: indices.count,
                                      bytes: missing ? 0 : data.userBytes(indices.count), directory: dir) {
            for i in indices {
                let length = try engine.get(key.key(i, missing: missing)) { $0.count }
                if let length {
                    found += 1
                    if length != valueSize { wrongLength += 1 }
                }
            }
        }
        if missing ? found != 0 : (found != indices.count || wrongLength != 0) {
            throw BenchError.check("\(E.name) \(missing ? "readmissing" : "readrandom"): found \(found) of \(indices.count), \(wrongLength) of the wrong length")
        }
        return measurement.opsPerSecond
    }

    /// Another thread's handle on `engine`, of the engine's own type: calls through `any Engine`
    /// run the generic `get` unspecialized, which looked up `Optional<R>`'s metadata in the Swift
    /// runtime's shared cache on every call (a lock and a futex wake per get on 2 threads, for
    /// every engine alike).
    private func handle(sharing engine: E) throws -> E {
        guard let handle = try engine.handleForAnotherThread() as? E else { throw BenchError.check("\(E.name): a handle of another type") }
        return handle
    }

    /// The body of a reader thread for ``onThreads(_:_:)``: thread `t` gets `perThread` random
    /// existing keys through `handles[t]` (a random order of its own), each checked for the
    /// value's length.
    private func concurrentGets(_ handles: [E], perThread: Int, seedOffset: UInt64) throws -> @Sendable (Int) throws -> Void {
        let data = data, seed = seed, valueSize = data.valueSize, shared = handles
        return { thread in
            let engine = shared[thread]
            var rng = SplitMix(seed: seed &+ seedOffset &+ UInt64(thread))
            let key = KeyBuffer()
            for _ in 0..<perThread {
                let i = Int((rng.next() >> 8) % UInt64(data.count))
                let length = try engine.get(key.key(i)) { $0.count }
                if length != valueSize { throw BenchError.check("\(E.name): key \(i) read \(String(describing: length)) bytes") }
            }
        }
    }

    /// `readrandom_2t`: readrandom's gets of random existing keys on 2 threads, num/2 each.
    /// `scaling`: its rate ÷ readrandom's on 1 thread in this run (2.0 would be perfect scaling).
    private func readRandomOnThreads(_ engine: E, _ dir: String, alone: Double) throws {
        let threads = 2, perThread = data.count / threads
        var handles = [engine]
        for _ in 1..<threads { handles.append(try handle(sharing: engine)) }
        let reader = try concurrentGets(handles, perThread: perThread, seedOffset: 40)
        var measurement = try measure("readrandom_2t", mode: "read", num: perThread * threads, bytes: data.userBytes(perThread * threads),
                                      directory: dir, extra: [("threads", "\(threads)")], printing: false) {
            try onThreads(threads, reader)
        }
        measurement.extra.append(("scaling", String(format: "%.3f", alone > 0 ? measurement.opsPerSecond / alone : 0)))
        emit(measurement)
        for handle in handles.dropFirst() where handle !== engine { try handle.close() }
    }

    /// `readwhilewriting` (db_bench's, with 1 reader): one thread does num gets of random existing
    /// keys while another overwrites random keys without pause (nosync) until the reader is done.
    /// ops/s is the reader's; `writer_ops_per_s` the writer's; `reader_vs_readrandom` the reader's
    /// rate ÷ readrandom's alone in this run.
    private func readWhileWriting(_ engine: E, _ dir: String, alone: Double) throws {
        let writer = try handle(sharing: engine)
        let reader = try concurrentGets([engine], perThread: data.count, seedOffset: 50)
        let data = data, seed = seed
        let readerDone = Atomic(false), writes = Atomic(0)
        let writerSeconds = Mutex(0.0)
        var measurement = try measure("readwhilewriting", mode: "read", num: data.count, bytes: data.userBytes(data.count), directory: dir,
                                      extra: [("threads", "2")], printing: false) {
            try onThreads(2) { thread in
                if thread == 0 {
                    defer { readerDone.store(true, ordering: .releasing) }
                    try reader(0)
                    return
                }
                var rng = SplitMix(seed: seed &+ 60)
                let key = KeyBuffer()
                var n = 0
                let start = Clock.now()
                while !readerDone.load(ordering: .acquiring) {
                    let i = Int((rng.next() >> 8) % UInt64(data.count))
                    try writer.put(key.key(i), data.value(n))
                    n += 1
                }
                writerSeconds.withLock { $0 = Clock.now() - start }
                writes.store(n, ordering: .relaxed)
            }
        }
        let seconds = writerSeconds.withLock { $0 }
        measurement.extra += [("writer_ops_per_s", String(format: "%.0f", seconds > 0 ? Double(writes.load(ordering: .relaxed)) / seconds : 0)),
                              ("reader_vs_readrandom", String(format: "%.3f", alone > 0 ? measurement.opsPerSecond / alone : 0))]
        emit(measurement)
        if writer !== engine { try writer.close() }
    }

    private func readSequential(_ engine: E, _ dir: String) throws {
        var count = 0, bytes = 0
        try measure("readseq", mode: "read", num: data.count, bytes: data.userBytes(data.count), directory: dir) {
            count = try engine.scan { key, value in bytes &+= key.count &+ value.count }
        }
        if count != data.count { throw BenchError.check("\(E.name) readseq visited \(count) entries, not \(data.count)") }
    }

    // MARK: Allocations

    /// Heap allocations per put (overwrites, nosync) and per get on the calling thread, counted
    /// over 10,000 operations after 1,000 to warm up. Background threads are not counted.
    private func allocations(_ engine: E, _ dir: String) throws {
        guard WorkloadName.allocations.contains(where: { wanted($0) }) else { return }
        let count = min(10_000, data.count)
        let warmUp = min(1_000, data.count)
        let key = KeyBuffer()
        let indices = data.randomIndices(count + warmUp, seed: seed &+ 5)
        func counted(_ body: (Int) throws -> Void) throws -> (per: Double, seconds: Double) {
            for i in indices.prefix(warmUp) { try body(i) }
            let before = cask_thread_allocations()
            let seconds = try Clock.time { for i in indices.dropFirst(warmUp) { try body(i) } }
            return (Double(cask_thread_allocations() - before) / Double(count), seconds)
        }
        let put = try counted { i in try engine.put(key.key(i), data.value(i)) }
        let get = try counted { i in _ = try engine.get(key.key(i)) { $0.count } }
        // Cask's engine reads with `withValue` (no copy, as LMDB's); its `get` returns an array.
        var arrayGet: [(String, String)] = []
        if let cask = engine as? CaskEngine {
            let result = try counted { i in _ = try cask.store.get(key.key(i))?.count }
            arrayGet = [("allocs_per_array_get", String(format: "%.2f", result.per))]
        }
        for (name, result) in [("allocs_put", put), ("allocs_get", get)] where wanted(name) {
            let m = Measurement(engine: E.name, workload: name, mode: name == "allocs_put" ? "nosync" : "read", num: count,
                                valueSize: data.valueSize, seconds: result.seconds, bytes: data.userBytes(count),
                                diskBytes: ProcessStats.diskBytes(dir), rssKB: ProcessStats.rss().current,
                                extra: [("allocs_per_op", String(format: "%.2f", result.per))] + (name == "allocs_get" ? arrayGet : []))
            print(m.line)
        }
        fflush(nil)
    }

    // MARK: Concurrent workloads

    /// Runs `body(thread)` on `threads` OS threads at once (a dispatch pool would cap them at the
    /// core count) and waits; rethrows the first error.
    private func onThreads(_ threads: Int, _ body: @escaping @Sendable (Int) throws -> Void) throws {
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

    /// 2 threads, each doing num/2 operations on random existing keys: 90% gets, 10% puts (nosync).
    private func mixed(_ engine: E, _ dir: String) throws {
        guard wanted("mixed") else { return }
        let threads = 2
        let perThread = data.count / threads
        var handles = [engine]
        for _ in 1..<threads { handles.append(try handle(sharing: engine)) }
        let data = data, seed = seed, valueSize = data.valueSize
        let shared = handles
        try measure("mixed", mode: "nosync", num: perThread * threads, bytes: data.userBytes(perThread * threads), directory: dir,
                    extra: [("threads", "\(threads)"), ("read_percent", "90")]) {
            try onThreads(threads) { thread in
                let engine = shared[thread]
                var rng = SplitMix(seed: seed &+ 100 &+ UInt64(thread))
                let key = KeyBuffer()
                for n in 0..<perThread {
                    let random = rng.next()
                    let i = Int((random >> 8) % UInt64(data.count))
                    if random % 10 == 0 {
                        try engine.put(key.key(i), data.value(n))
                    } else {
                        let length = try engine.get(key.key(i)) { $0.count }
                        if length != valueSize { throw BenchError.check("\(E.name) mixed: key \(i) read \(String(describing: length)) bytes") }
                    }
                }
            }
        }
        for handle in handles.dropFirst() where handle !== engine { try handle.close() }
    }

    // MARK: Prefix scans

    /// Keys per prefix: the store's keys are `%016d` of 0..<num, so the keys of one 13-digit prefix
    /// are 1,000 consecutive indexes (1M keys: 1,000 prefixes of 1,000 keys, written at random).
    static var keysPerPrefix: Int { 1_000 }

    /// The 13-byte prefix of the `p`th group of keys.
    private static func prefix(_ p: Int, _ key: KeyBuffer) -> [UInt8] {
        Array(key.key(p * keysPerPrefix).prefix(KeyBuffer.keyLength - 3))
    }

    /// `scanprefix`: listings of one random prefix's 1,000 keys through the engine's range API,
    /// keys only (`mode=keys`) and keys with values (`mode=values`). ops/s is listings per
    /// second; p50/p99 are per listing. Each listing must return exactly the prefix's keys.
    private func scanPrefix(_ engine: E, _ dir: String) throws {
        let listings = 2_000
        let prefixes = data.count / Self.keysPerPrefix
        let key = KeyBuffer()
        // One listing first, untimed (Cask builds its ordered view on its first listing: that
        // cost is reported with `open`, as `ordered_view_build_seconds`).
        _ = try Self.prefix(0, key).withUnsafeBytes { try engine.scanPrefix($0, values: false) { _, _ in } }
        for values in [false, true] {
            var rng = SplitMix(seed: seed &+ 21)
            let chosen = (0..<listings).map { _ in Self.prefix(Int(rng.next() % UInt64(prefixes)), key) }
            var latencies = [Double](repeating: 0, count: listings)
            var bytes = 0
            var measurement = try measure("scanprefix", mode: values ? "values" : "keys", num: listings,
                                          bytes: listings * Self.keysPerPrefix * (KeyBuffer.keyLength + (values ? data.valueSize : 0)),
                                          directory: dir, extra: [("keys_per_listing", "\(Self.keysPerPrefix)")], printing: false) {
                for (n, prefix) in chosen.enumerated() {
                    let start = Clock.now()
                    let count = try prefix.withUnsafeBytes { prefix in
                        try engine.scanPrefix(prefix, values: values) { key, value in bytes &+= key.count &+ value.count }
                    }
                    latencies[n] = Clock.now() - start
                    if count != Self.keysPerPrefix { throw BenchError.check("\(E.name) scanprefix listed \(count) keys, not \(Self.keysPerPrefix)") }
                }
            }
            measurement.extra += Self.percentiles(latencies)
            emit(measurement)
        }
    }

    /// `scan_put`: put latency (half overwrites, half new keys) alone, then while another thread
    /// lists random prefixes (keys and values) without pause. Reports both p50/p99 and the ratio
    /// of the p99s; ops/s is the put rate during the scans.
    private func scanPut(_ engine: E, _ dir: String) throws {
        let puts = min(200_000, data.count / 2)
        let data = data, seed = seed
        let prefixes = data.count / Self.keysPerPrefix
        func timedPuts(_ round: Int) throws -> [Double] {
            let key = KeyBuffer()
            var rng = SplitMix(seed: seed &+ 31 &+ UInt64(round))
            var latencies = [Double](repeating: 0, count: puts)
            for n in 0..<puts {
                // New keys lie beyond the listed prefixes' (indexes from num on).
                let i = n % 2 == 0 ? Int(rng.next() % UInt64(data.count)) : data.count + round * puts + n
                let start = Clock.now()
                try engine.put(key.key(i), data.value(n))
                latencies[n] = Clock.now() - start
            }
            try engine.finishWrites()
            return latencies
        }
        let alone = try timedPuts(0)
        let scanner = try handle(sharing: engine)
        let stop = Atomic(false), listings = Atomic(0)
        let failure = Mutex<String?>(nil)
        let finished = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let key = KeyBuffer()
            var rng = SplitMix(seed: seed &+ 41)
            var sink = 0
            while !stop.load(ordering: .relaxed) {
                let prefix = Self.prefix(Int(rng.next() % UInt64(prefixes)), key)
                do {
                    _ = try prefix.withUnsafeBytes { try scanner.scanPrefix($0, values: true) { k, v in sink &+= k.count &+ v.count } }
                } catch {
                    failure.withLock { $0 = "\(error)" }
                    break
                }
                listings.add(1, ordering: .relaxed)
            }
            finished.signal()
        }
        while listings.load(ordering: .relaxed) == 0 && failure.withLock({ $0 }) == nil { usleep(100) }
        let start = Clock.now()
        let during = try timedPuts(1)
        let seconds = Clock.now() - start
        stop.store(true, ordering: .relaxed)
        finished.wait()
        if scanner !== engine { try scanner.close() }
        if let failure = failure.withLock({ $0 }) { throw BenchError.check("\(E.name) scan_put scanner: \(failure)") }
        let aloneP = Self.percentiles(alone), duringP = Self.percentiles(during)
        let p99 = { (sorted: [Double]) in sorted.sorted()[min(sorted.count - 1, Int(Double(sorted.count) * 0.99))] }
        let line = Measurement(
            engine: E.name, workload: "scan_put", mode: "nosync", num: puts, valueSize: data.valueSize, seconds: seconds,
            bytes: data.userBytes(puts), diskBytes: ProcessStats.diskBytes(dir), rssKB: ProcessStats.rss().peak,
            extra: duringP + aloneP.map { ($0.0.replacingOccurrences(of: "_us", with: "_us_without"), $0.1) }
                + [("listings", "\(listings.load(ordering: .relaxed))"), ("p99_ratio", String(format: "%.2f", p99(during) / p99(alone)))])
        emit(line)
    }

    /// p50 and p99 of `seconds`, in microseconds (one decimal).
    private static func percentiles(_ seconds: [Double]) -> [(String, String)] {
        let sorted = seconds.sorted()
        guard !sorted.isEmpty else { return [] }
        return [("p50_us", 0.5), ("p99_us", 0.99)].map { name, fraction in
            (name, String(format: "%.1f", sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))] * 1e6))
        }
    }

    /// `fillSyncCount` puts of new keys, each durable before it returns, split over `writers`
    /// threads at once (group commit where the engine has it).
    private func fillSync(writers: Int) throws {
        let dir = directory("fillsync\(writers)", .sync)
        let engine = try E(directory: dir, mode: .sync)
        let perWriter = fillSyncCount / writers
        var handles: [any Engine] = [engine]
        for _ in 1..<max(writers, 1) { handles.append(try engine.handleForAnotherThread()) }
        let data = data, shared = handles
        let total = perWriter * writers
        // Each put's latency (two clock reads around it, tens of nanoseconds against a sync's
        // hundreds of microseconds): group commit trades some of it for throughput.
        let latencies = Mutex<[Double]>([])
        var measurement = try measure("fillsync", mode: "sync", num: total, bytes: data.userBytes(total), directory: dir,
                                      extra: [("writers", "\(writers)")], printing: false) {
            if writers == 1 {
                let key = KeyBuffer()
                var own = [Double](repeating: 0, count: perWriter)
                for i in 0..<perWriter {
                    let start = Clock.now()
                    try engine.put(key.key(i), data.value(i))
                    own[i] = Clock.now() - start
                }
                latencies.withLock { $0 = own }
                return
            }
            try onThreads(writers) { writer in
                let engine = shared[writer]
                let key = KeyBuffer()
                var own = [Double](repeating: 0, count: perWriter)
                for n in 0..<perWriter {
                    let i = writer * perWriter + n
                    let start = Clock.now()
                    try engine.put(key.key(i), data.value(i))
                    own[n] = Clock.now() - start
                }
                latencies.withLock { $0 += own }
            }
        }
        let sorted = latencies.withLock { $0 }.sorted()
        for (name, fraction) in [("p50_us", 0.5), ("p99_us", 0.99)] where !sorted.isEmpty {
            let value = sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
            measurement.extra.append((name, String(format: "%.0f", value * 1e6)))
        }
        emit(measurement)
        for handle in handles.dropFirst() where handle !== engine { try handle.close() }
        try engine.close()
        try? FileManager.default.removeItem(atPath: dir)
    }

    /// Cask's single-writer fillsync against the reference (one `pwrite` + `fdatasync` per put) in
    /// the same process, alternating in 10 chunks (Cask first in even chunks, the reference first
    /// in odd ones), so both see the same disk latency — which on a shared machine swings by
    /// several times from one second to the next. Reports the median of the per-chunk ratios.
    private func pairedFillSync() throws {
        let chunks = 10
        let perChunk = max(1, fillSyncCount / chunks)
        let caskDir = directory("fillsync-paired", .sync), rawDir = directory("fillsync-paired-reference", .sync)
        let cask = try CaskEngine(directory: caskDir, mode: .sync)
        let reference = try RawLogEngine(directory: rawDir, mode: .sync)
        let key = KeyBuffer(), data = data  // (a local: see `write`)
        func chunk(_ engine: some Engine, _ number: Int) throws -> Double {
            try Clock.time {
                for n in 0..<perChunk {
                    let i = number * perChunk + n
                    try engine.put(key.key(i), data.value(i))
                }
            }
        }
        var caskSeconds: [Double] = [], referenceSeconds: [Double] = []
        for number in 0..<chunks {
            if number % 2 == 0 {
                caskSeconds.append(try chunk(cask, number))
                referenceSeconds.append(try chunk(reference, number))
            } else {
                referenceSeconds.append(try chunk(reference, number))
                caskSeconds.append(try chunk(cask, number))
            }
        }
        try cask.close()
        try reference.close()
        // Cask ops/s ÷ reference ops/s, per chunk.
        let chunkRatios = zip(caskSeconds, referenceSeconds).map { $1 / $0 }
        let ratios = chunkRatios.sorted()
        let median = (ratios[(ratios.count - 1) / 2] + ratios[ratios.count / 2]) / 2
        let total = perChunk * chunks
        let extra = [("paired_ratio", String(format: "%.3f", median)),
                     ("chunk_ratio_min", String(format: "%.3f", ratios.first!)), ("chunk_ratio_max", String(format: "%.3f", ratios.last!)),
                     ("chunk_ratios", chunkRatios.map { String(format: "%.2f", $0) }.joined(separator: ","))]
        for (engine, seconds, dir) in [(CaskEngine.name, caskSeconds, caskDir), (RawLogEngine.name, referenceSeconds, rawDir)] {
            let time = seconds.reduce(0, +)
            let m = Measurement(engine: engine, workload: "fillsync_paired", mode: "sync", num: total, valueSize: data.valueSize,
                                seconds: time, bytes: data.userBytes(total), diskBytes: ProcessStats.diskBytes(dir),
                                rssKB: ProcessStats.rss().current, extra: extra + [("seconds", String(format: "%.4f", time))])
            print(m.line)
        }
        fflush(nil)
        try? FileManager.default.removeItem(atPath: caskDir)
        try? FileManager.default.removeItem(atPath: rawDir)
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
