// The prefix-scan workloads: `scanprefix`, listings of one prefix's keys, and `scan_put`, puts beside listings.
import Foundation
import Synchronization

extension EngineSuite {
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
    func scanPrefix(_ engine: E, _ dir: String) throws {
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
    func scanPut(_ engine: E, _ dir: String) throws {
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
}
