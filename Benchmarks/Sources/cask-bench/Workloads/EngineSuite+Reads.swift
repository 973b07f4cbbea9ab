// The read workloads: `readrandom`, `readmissing`, `readrandom_2t`, `readwhilewriting`, `readseq`, `allocs_*`, `mixed`.
import Cask
import CAllocationCounter
import Foundation
import Synchronization

extension EngineSuite {
    // MARK: Reads

    /// Returns the gets per second.
    @discardableResult
    func readRandom(_ engine: E, _ dir: String, missing: Bool) throws -> Double {
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
    func readRandomOnThreads(_ engine: E, _ dir: String, alone: Double) throws {
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
    func readWhileWriting(_ engine: E, _ dir: String, alone: Double) throws {
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

    func readSequential(_ engine: E, _ dir: String) throws {
        var count = 0, bytes = 0
        try measure("readseq", mode: "read", num: data.count, bytes: data.userBytes(data.count), directory: dir) {
            count = try engine.scan { key, value in bytes &+= key.count &+ value.count }
        }
        if count != data.count { throw BenchError.check("\(E.name) readseq visited \(count) entries, not \(data.count)") }
    }

    // MARK: Allocations

    /// Heap allocations per put (overwrites, nosync) and per get on the calling thread, counted
    /// over 10,000 operations after 1,000 to warm up. Background threads are not counted.
    func allocations(_ engine: E, _ dir: String) throws {
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

    /// 2 threads, each doing num/2 operations on random existing keys: 90% gets, 10% puts (nosync).
    func mixed(_ engine: E, _ dir: String) throws {
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
}
