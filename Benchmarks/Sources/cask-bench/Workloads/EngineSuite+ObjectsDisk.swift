import Cask
import Foundation

/// `objects_disk` (issue 25): the bytes on disk for num user profiles — the objects workloads'
/// model, encoded once with Cask's binary coder — stored as the same key and value bytes in every
/// engine, nosync. Cask runs twice: as users get it (a dictionary trained from its first 4 MiB of
/// values, then used by every new segment) and with dictionaries off (`objects_disk_nodict`). Each
/// line also gives `get_ops_per_s`: num gets of random keys on the store just written.
extension EngineSuite {
    func objectsDisk() throws {
        let profiles = ProfileData(seed: Worker.dataSeed)
        let count = data.count
        var runs: [(workload: String, dictionaries: Bool)] = [("objects_disk", true)]
        if E.self == CaskEngine.self { runs.append(("objects_disk_nodict", false)) }
        for run in runs where wanted(run.workload, "objects_disk") {
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
            // Then num gets of random keys through the same handle (the value bytes, not decoded):
            // what the dictionary costs a read.
            let keys = data.randomIndices(count, seed: seed &+ 25).map { Array(ProfileData.key($0).utf8) }
            var found = 0
            let getSeconds = try Clock.time {
                for key in keys {
                    if try key.withUnsafeBytes({ key in try engine.get(key) { $0.count } }) != nil { found += 1 }
                }
            }
            guard found == count else { throw BenchError.check("\(E.name) \(run.workload): \(found) of \(count) gets found their key") }
            // Counted once the engine is closed, as fillrandom's: Cask writes its last hints then,
            // LevelDB and RocksDB flush their memtables.
            try engine.close()
            let disk = ProcessStats.diskBytes(dir)
            emit(Measurement(
                engine: E.name, workload: run.workload, mode: WriteMode.nosync.rawValue, num: count, valueSize: userBytes / max(count, 1),
                seconds: seconds, bytes: userBytes, diskBytes: disk, rssKB: ProcessStats.rss().peak,
                extra: [("user_bytes", "\(userBytes)"), ("disk_per_object", String(format: "%.1f", Double(disk) / Double(max(count, 1)))),
                        ("get_ops_per_s", String(format: "%.0f", Double(count) / getSeconds)),
                        ("seconds", String(format: "%.4f", seconds))]))
            try? FileManager.default.removeItem(atPath: dir)
        }
    }
}
