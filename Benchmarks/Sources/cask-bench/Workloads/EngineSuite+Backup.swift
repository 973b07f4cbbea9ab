// Cask's `backup` workload: an online backup of a store at rest, on the store's file system and on
// another, beside `mdb_copy` of an LMDB environment holding the same entries and `cp -r` of the
// Cask store's files.
import Cask
import Foundation

extension EngineSuite {
    /// The backup store's values: 4 KiB each, incompressible, so that num ÷ 4 of them make about
    /// 1 GiB on disk at the default num (1M); slices of one random buffer at varying offsets.
    private static var backupValueLength: Int { 4096 }

    /// `backup`, modes `samefs` (a directory beside the store) and `otherfs` (`/dev/shm`, tmpfs,
    /// when the store is elsewhere): seconds and GB/s of store bytes for `CaskStore.backup(to:)`,
    /// with `mdb_copy` and `cp -r` timed right after it on the same file system, and the ratios.
    /// The stores are synced (`sync(2)`) first: a store at rest, whose pages are on disk.
    func backups() throws {
        let entries = max(1024, data.count / 4)
        let length = Self.backupValueLength
        var random = SplitMix(seed: seed &+ 21)
        let pool = (0..<(8 << 20) / 8).flatMap { _ in withUnsafeBytes(of: random.next()) { Array($0) } }
        let key = KeyBuffer()
        func value(_ n: Int) -> ArraySlice<UInt8> {
            let start = (n &* 7919) % (pool.count - length)
            return pool[start..<start + length]
        }

        let caskDirectory = directory("backup", .nosync)
        var options = CaskStore.Options(durability: .os)
        options.automaticCompaction = false
        let store = try CaskStore.open(at: caskDirectory, options: options)
        for n in 0..<entries { try store.put(key.key(n), value(n)) }
        try store.sync()
        let lmdbDirectory = root + "/backup-lmdb"
        try? FileManager.default.removeItem(atPath: lmdbDirectory)
        let lmdb = try LMDBEngine(directory: lmdbDirectory, mode: .batch1000)
        for n in 0..<entries {
            try value(n).withUnsafeBytes { v in try lmdb.put(key.key(n), v) }
            if n % 1000 == 999 { try lmdb.commitBatch() }
        }
        try lmdb.finishWrites()
        try lmdb.close()
        Foundation.sync()
        let caskBytes = ProcessStats.diskBytes(caskDirectory), lmdbBytes = ProcessStats.diskBytes(lmdbDirectory)

        var targets = [("samefs", root)]
        if Self.fileSystemID(root) != Self.fileSystemID("/dev/shm") { targets.append(("otherfs", "/dev/shm")) }
        for (mode, base) in targets {
            let target = base + "/cask-bench-backup-\(getpid())"
            try? FileManager.default.removeItem(atPath: target)
            var report = CaskStore.BackupReport(destination: target)
            let cask = try Clock.time { report = try store.backup(to: target) }
            try FileManager.default.removeItem(atPath: target)
            try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: false)
            let mdbCopy = try Clock.time { try Self.run("/usr/bin/mdb_copy", [lmdbDirectory, target]) }
            try FileManager.default.removeItem(atPath: target)
            let copy = try Clock.time { try Self.run("/bin/cp", ["-r", caskDirectory, target]) }
            try FileManager.default.removeItem(atPath: target)
            Foundation.sync()

            let gigabytes = { (bytes: Int64, seconds: Double) in String(format: "%.3f", Double(bytes) / seconds / 1e9) }
            let line = "RESULT engine=cask workload=backup mode=\(mode) num=\(entries) value_size=\(length) "
                + "ops_per_s=\(String(format: "%.0f", Double(entries) / cask)) mb_per_s=\(String(format: "%.2f", Double(caskBytes) / cask / 1_048_576)) "
                + "disk_bytes=\(caskBytes) rss_kb=\(ProcessStats.rss().peak) seconds=\(String(format: "%.4f", cask)) "
                + "gb_per_s=\(gigabytes(caskBytes, cask)) segments_linked=\(report.segmentsLinked) segments_copied=\(report.segmentsCopied) "
                + "mdb_copy_seconds=\(String(format: "%.4f", mdbCopy)) mdb_copy_gb_per_s=\(gigabytes(lmdbBytes, mdbCopy)) lmdb_bytes=\(lmdbBytes) "
                + "cp_seconds=\(String(format: "%.4f", copy)) cp_gb_per_s=\(gigabytes(caskBytes, copy)) "
                + "vs_cp=\(String(format: "%.3f", copy / cask)) vs_mdb_copy=\(String(format: "%.3f", mdbCopy / cask))"
            print(line)
            fflush(nil)
        }
        try store.close()
        try? FileManager.default.removeItem(atPath: caskDirectory)
        try? FileManager.default.removeItem(atPath: lmdbDirectory)
    }

    private static func fileSystemID(_ path: String) -> UInt64? {
        var info = stat()
        return stat(path, &info) == 0 ? UInt64(info.st_dev) : nil
    }

    /// Runs a peer's command; throws unless it exits 0.
    private static func run(_ executable: String, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "\(executable) \(arguments) exited \(process.terminationStatus) (lmdb-utils installed? Tools/bench-setup.sh)"])
        }
    }
}
