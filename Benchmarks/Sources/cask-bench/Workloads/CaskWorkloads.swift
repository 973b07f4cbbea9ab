import Cask
import Foundation

/// db_bench-style workloads run against Cask.
struct CaskWorkloads {
    let data: BenchmarkData
    let root: String
    let seed: UInt64

    func directory(_ name: String) -> String {
        let path = root + "/cask-" + name
        try? FileManager.default.removeItem(atPath: path)
        return path
    }

    func options(_ durability: Durability) -> CaskStore.Options {
        CaskStore.Options(durability: durability)
    }

    /// Fills a store with every key once, in sequential or shuffled order.
    func fill(_ name: String, durability: Durability, order: [Int]) throws -> (Measurement, String) {
        let dir = directory(name)
        let store = try CaskStore.open(at: dir, options: options(durability))
        // Timed: the puts, and handing what they buffered to the OS (as db_bench, not the close).
        let seconds = try Clock.time {
            for (n, i) in order.enumerated() { try store.put(data.key(i), data.value(n)) }
            try store.flush()
        }
        try store.close()
        let rss = ProcessStats.rss()
        return (Measurement(
            engine: "cask", workload: name, mode: durability.rawValue, num: order.count, valueSize: data.valueSize,
            seconds: seconds, bytes: order.count * (16 + data.valueSize), diskBytes: ProcessStats.diskBytes(dir), rssKB: rss.current), dir)
    }

    func overwrite(_ dir: String, durability: Durability) throws -> Measurement {
        let store = try CaskStore.open(at: dir, options: options(durability))
        let indices = data.randomIndices(data.count, seed: seed &+ 2)
        let seconds = try Clock.time {
            for (n, i) in indices.enumerated() { try store.put(data.key(i), data.value(n)) }
            try store.flush()
        }
        try store.close()
        return Measurement(
            engine: "cask", workload: "overwrite", mode: durability.rawValue, num: indices.count, valueSize: data.valueSize,
            seconds: seconds, bytes: indices.count * (16 + data.valueSize), diskBytes: ProcessStats.diskBytes(dir), rssKB: ProcessStats.rss().current)
    }

    func readRandom(_ dir: String, missing: Bool) throws -> Measurement {
        let store = try CaskStore.open(at: dir, options: options(.os))
        defer { try? store.close() }
        let indices = data.randomIndices(data.count, seed: seed &+ 3)
        var found = 0
        let seconds = try Clock.time {
            for i in indices {
                var key = data.key(i)
                if missing { key[0] = UInt8(ascii: "x") }
                if let value = try store.get(key) {
                    precondition(value.count == data.valueSize, "wrong value length")
                    found += 1
                }
            }
        }
        precondition(missing ? found == 0 : found == indices.count, "readrandom found \(found) of \(indices.count)")
        return Measurement(
            engine: "cask", workload: missing ? "readmissing" : "readrandom", mode: "os", num: indices.count, valueSize: data.valueSize,
            seconds: seconds, bytes: missing ? 0 : indices.count * (16 + data.valueSize), diskBytes: ProcessStats.diskBytes(dir), rssKB: ProcessStats.rss().current)
    }

    /// Reopens a filled store, with its hint files, then without them.
    func open(_ dir: String, withHints: Bool) throws -> Measurement {
        if !withHints {
            for name in try FileManager.default.contentsOfDirectory(atPath: dir) where name.hasSuffix(".hint") {
                try FileManager.default.removeItem(atPath: dir + "/" + name)
            }
        }
        var keys = 0
        var overhead = 0.0
        let seconds = try Clock.time {
            let store = try CaskStore.open(at: dir, options: CaskStore.Options(durability: .os, readOnly: true))
            keys = store.count
            overhead = try store.statistics().indexOverheadPerKey
            try store.close()
        }
        precondition(keys == data.count, "open found \(keys) keys")
        return Measurement(
            engine: "cask", workload: withHints ? "open" : "open_nohints", mode: "os", num: keys, valueSize: data.valueSize,
            seconds: seconds, bytes: 0, diskBytes: ProcessStats.diskBytes(dir), rssKB: ProcessStats.rss().current,
            extra: [("seconds", String(format: "%.3f", seconds)), ("index_overhead_bytes_per_key", String(format: "%.1f", overhead))])
    }

    /// `count` puts, each durable before it returns, from `writers` threads at once (group commit).
    func fillSync(count: Int, writers: Int) throws -> Measurement {
        let dir = directory("fillsync\(writers)")
        let store = try CaskStore.open(at: dir, options: options(.fsync))
        let perWriter = count / writers
        let failures = Atomic(0)
        let data = data
        let seconds = Clock.time {
            // One OS thread per writer (a dispatch pool would cap them at the core count).
            let done = DispatchGroup()
            for writer in 0..<writers {
                done.enter()
                Thread.detachNewThread {
                    for n in 0..<perWriter {
                        let i = writer * perWriter + n
                        do { try store.put(data.key(i), data.value(i)) } catch { failures.add(1) }
                    }
                    done.leave()
                }
            }
            done.wait()
        }
        try store.close()
        precondition(failures.value == 0)
        return Measurement(
            engine: "cask", workload: "fillsync", mode: "sync", num: perWriter * writers, valueSize: data.valueSize,
            seconds: seconds, bytes: perWriter * writers * (16 + data.valueSize), diskBytes: ProcessStats.diskBytes(dir),
            rssKB: ProcessStats.rss().current, extra: [("writers", "\(writers)"), ("us_per_op", String(format: "%.1f", seconds / Double(perWriter * writers) * 1e6))])
    }
}

/// A tiny thread-safe counter for the benchmark's worker threads.
final class Atomic: @unchecked Sendable {
    private let lock = NSLock()
    private var count: Int
    init(_ value: Int) { count = value }
    func add(_ n: Int) { lock.lock(); count += n; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return count }
}
