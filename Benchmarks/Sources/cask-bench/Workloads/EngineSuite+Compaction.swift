// Cask's compaction workloads: `compact` on a store half dead, and `compact_put`, puts while a compaction runs.
import Cask
import Foundation
import Synchronization

extension EngineSuite {
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

    func compaction() throws {
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
}
