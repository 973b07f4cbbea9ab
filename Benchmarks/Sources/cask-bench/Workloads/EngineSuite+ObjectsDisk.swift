import Cask
import Foundation

/// `objects_disk` (issue 25): the bytes on disk for num user profiles — the objects workloads'
/// model, encoded once with Cask's binary coder — stored as the same key and value bytes in every
/// engine, nosync. Cask runs twice: as users get it (a dictionary trained from its first 4 MiB of
/// values, then used by every new segment) and with dictionaries off (`objects_disk_nodict`).
///
/// Each line also gives `get_ops_per_s`: num gets of random keys on the store just written (the
/// value bytes, not decoded). Cask's two stores stay open and take turns in 10 chunks of gets, so
/// that a slow moment of the shared machine hits both; `get_vs_nodict` is the dictionary store's
/// rate over the other's, from the sums of the chunks.
extension EngineSuite {
    func objectsDisk() throws {
        let profiles = ProfileData(seed: Worker.dataSeed)
        let count = data.count
        var runs: [(workload: String, dictionaries: Bool)] = [("objects_disk", true)]
        if E.self == CaskEngine.self { runs.append(("objects_disk_nodict", false)) }
        runs.removeAll { !wanted($0.workload, "objects_disk") }
        var stores: [(workload: String, dir: String, engine: E, seconds: Double, userBytes: Int)] = []
        for run in runs {
            let dir = directory(run.workload, .nosync)
            let engine: E
            if E.self == CaskEngine.self {
                var options = CaskStore.Options(durability: .os)
                options.automaticCompaction = CaskEngine.automaticCompaction
                options.dictionaries.enabled = run.dictionaries
                engine = CaskEngine(store: try CaskStore.open(at: dir, options: options)) as! E
            } else {
                engine = try E(directory: dir, mode: .nosync)
            }
            let encoder = CaskBinaryEncoder()
            var userBytes = 0
            let seconds = try Clock.time {
                for n in 0..<count {
                    let value = try encoder.encode(profiles.profile(n))
                    let key = Array(ProfileData.key(n).utf8)
                    userBytes += key.count + value.count
                    try key.withUnsafeBytes { key in try value.withUnsafeBytes { try engine.put(key, $0) } }
                }
                try engine.finishWrites()
            }
            stores.append((run.workload, dir, engine, seconds, userBytes))
        }
        let keys = data.randomIndices(count, seed: seed &+ 25).map { Array(ProfileData.key($0).utf8) }
        var getSeconds = [Double](repeating: 0, count: stores.count)
        let chunk = (count + 9) / 10
        for start in stride(from: 0, to: count, by: chunk) {
            for (position, store) in stores.enumerated() {
                var found = 0
                getSeconds[position] += try Clock.time {
                    for key in keys[start..<min(start + chunk, count)] {
                        if try key.withUnsafeBytes({ key in try store.engine.get(key) { $0.count } }) != nil { found += 1 }
                    }
                }
                guard found == min(start + chunk, count) - start else { throw BenchError.check("\(E.name) \(store.workload): a get missed its key") }
            }
        }
        for (position, store) in stores.enumerated() {
            // Counted once the engine is closed, as fillrandom's: Cask writes its last hints then,
            // LevelDB and RocksDB flush their memtables.
            try store.engine.close()
            let disk = ProcessStats.diskBytes(store.dir)
            var extra: [(String, String)] = [
                ("user_bytes", "\(store.userBytes)"), ("disk_per_object", String(format: "%.1f", Double(disk) / Double(max(count, 1)))),
                ("get_ops_per_s", String(format: "%.0f", Double(count) / getSeconds[position])),
            ]
            if stores.count == 2 && position == 0 { extra.append(("get_vs_nodict", String(format: "%.3f", getSeconds[1] / getSeconds[0]))) }
            extra.append(("seconds", String(format: "%.4f", store.seconds)))
            emit(Measurement(
                engine: E.name, workload: store.workload, mode: WriteMode.nosync.rawValue, num: count, valueSize: store.userBytes / max(count, 1),
                seconds: store.seconds, bytes: store.userBytes, diskBytes: disk, rssKB: ProcessStats.rss().peak, extra: extra))
            try? FileManager.default.removeItem(atPath: store.dir)
        }
    }
}
