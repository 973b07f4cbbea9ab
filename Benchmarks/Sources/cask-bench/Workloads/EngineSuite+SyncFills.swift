// The durable fills: `fillsync` on 1, 4 or 16 writers, and Cask's `fillsync_paired` against a raw log.
import Foundation
import Synchronization

extension EngineSuite {
    /// `fillSyncCount` puts of new keys, each durable before it returns, split over `writers`
    /// threads at once (group commit where the engine has it).
    func fillSync(writers: Int) throws {
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
    func pairedFillSync() throws {
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
}
