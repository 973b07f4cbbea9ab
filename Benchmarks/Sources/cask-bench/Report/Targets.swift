import Foundation

/// The issue's targets, each a ratio (or a limit) computed from medians of the same run.
struct Target: Sendable {
    enum Kind: Sendable {
        /// value ≥ bound
        case atLeast(Double)
        /// value ≤ bound
        case atMost(Double)
    }

    /// The workload and mode the target measures, and what it compares ("vs_best_peer", "seconds"…):
    /// together, the target's name in `headlines.csv`.
    let workload: String
    let mode: String
    let metric: String
    let name: String
    let kind: Kind
    /// The measured value (a ratio, seconds or bytes), nil when the suite did not measure it.
    let value: Double?
    /// How the value was computed, with the medians it came from.
    var detail: String
    let unit: String
    /// Why the verdict does not apply (e.g. the target is for 1M keys and this run had fewer).
    var caveat: String? = nil
    /// When the value compares two medians of ops/s: Cask's, and the other side's with its name
    /// ("lmdb", or "cask-1-writer" for group commit); nil for a median of per-run ratios, seconds or bytes.
    var cask: Double? = nil
    var peer: String? = nil
    var peerValue: Double? = nil

    var passed: Bool? {
        guard let value, caveat == nil else { return nil }
        switch kind {
        case .atLeast(let bound): return value >= bound
        case .atMost(let bound): return value <= bound
        }
    }

    var requirement: String {
        switch kind {
        case .atLeast(let bound): "≥ " + Self.show(bound, unit)
        case .atMost(let bound): "≤ " + Self.show(bound, unit)
        }
    }

    var measured: String { value.map { Self.show($0, unit) } ?? "not measured" }

    /// "pass, 1.6× the target" / "FAIL: short by 23%" / "n/a: …".
    var verdict: String {
        guard let value else { return "not measured" }
        if let caveat { return "n/a: \(caveat)" }
        switch kind {
        case .atLeast(let bound):
            return value >= bound
                ? String(format: "pass (%.2f× the target)", value / bound)
                : String(format: "FAIL: %.0f%% short (%.2f× the target)", (1 - value / bound) * 100, value / bound)
        case .atMost(let bound):
            return value <= bound
                ? String(format: "pass (%.0f%% of the limit)", value / bound * 100)
                : String(format: "FAIL: %.0f%% over the limit", (value / bound - 1) * 100)
        }
    }

    private static func show(_ value: Double, _ unit: String) -> String {
        switch unit {
        case "×": return String(format: "%.2f×", value)
        case "s": return String(format: "%.3f s", value)
        case "B/key": return String(format: "%.1f B/key", value)
        case "entries/s", "keys/s": return Format.grouped(value) + " " + unit
        default: return String(format: "%.2f ", value) + unit
        }
    }

    /// The issue states its targets for the default 1,000,000 entries.
    static func sizeCaveat(num: Int) -> String? {
        num == 1_000_000 ? nil : "The issue's targets are stated for 1,000,000 entries; at num=\(Format.grouped(Double(num))) the peers' "
            + "working sets differ (LevelDB and RocksDB keep more of the data in their memtables), so these verdicts are indicative only."
    }

    /// The peers the issue compares with (the file-per-object and raw-log references are not).
    static let peers = ["sqlite", "lmdb", "leveldb", "rocksdb"]

    static func evaluate(_ results: ResultSet, num: Int) -> [Target] {
        var targets: [Target] = []
        let fullSize = 1_000_000

        func bestPeer(_ workload: String, _ mode: String) -> (String, Summary)? {
            peers.compactMap { peer in results.summary(peer, workload, mode).map { (peer, $0) } }
                .max { $0.1.opsPerSecond < $1.1.opsPerSecond }
        }
        /// Cask's median ops/s ÷ `peer`'s (nil: the best of the peers) in `workload` and `mode`.
        func versus(_ workload: String, _ mode: String, _ peer: String?, metric: String, name: String, bound: Double) {
            let other = peer.map { peer in results.summary(peer, workload, mode).map { (peer, $0) } } ?? bestPeer(workload, mode)
            guard let cask = results.summary("cask", workload, mode), let (peer, summary) = other else {
                targets.append(Target(workload: workload, mode: mode, metric: metric, name: name, kind: .atLeast(bound), value: nil, detail: "", unit: "×"))
                return
            }
            targets.append(Target(
                workload: workload, mode: mode, metric: metric, name: name, kind: .atLeast(bound), value: cask.opsPerSecond / summary.opsPerSecond,
                detail: "cask \(Format.rate(cask.opsPerSecond)) ÷ \(peer) \(Format.rate(summary.opsPerSecond)) ops/s", unit: "×",
                cask: cask.opsPerSecond, peer: peer, peerValue: summary.opsPerSecond))
        }
        for workload in ["fillrandom", "overwrite"] {
            versus(workload, "nosync", nil, metric: "vs_best_peer", name: "\(workload) in `os` mode ÷ best peer nosync", bound: 2.5)
        }
        for workload in ["fillrandom", "overwrite"] {
            versus(workload, "batch1000", nil, metric: "vs_best_peer", name: "\(workload) in `buffered` mode ÷ best peer batch1000", bound: 1.5)
        }
        for (workload, bound) in [("readrandom", 2.0), ("readmissing", 3.0)] {
            versus(workload, "read", "lmdb", metric: "vs_lmdb", name: "\(workload) ÷ LMDB", bound: bound)
        }

        let single = results.summary("cask", "fillsync", "sync", writers: 1)
        let groupCommit = "fillsync 16 writers ÷ Cask's 1 writer (group commit)"
        if let single, let sixteen = results.summary("cask", "fillsync", "sync", writers: 16) {
            targets.append(Target(workload: "fillsync", mode: "sync", metric: "16_writers_vs_1", name: groupCommit, kind: .atLeast(5),
                                  value: sixteen.opsPerSecond / single.opsPerSecond,
                                  detail: "\(Format.rate(sixteen.opsPerSecond)) ÷ \(Format.rate(single.opsPerSecond)) ops/s", unit: "×",
                                  cask: sixteen.opsPerSecond, peer: "cask-1-writer", peerValue: single.opsPerSecond))
        } else {
            targets.append(Target(workload: "fillsync", mode: "sync", metric: "16_writers_vs_1", name: groupCommit, kind: .atLeast(5), value: nil, detail: "", unit: "×"))
        }
        let pwrite = "fillsync 1 writer ÷ one pwrite+fdatasync per op (within 15%)"
        if let paired = results.summary("cask", "fillsync_paired", "sync"), let ratio = paired.median(of: "paired_ratio"),
           let reference = results.summary("rawlog", "fillsync_paired", "sync") {
            targets.append(Target(workload: "fillsync_paired", mode: "sync", metric: "vs_rawlog", name: pwrite, kind: .atLeast(0.85), value: ratio,
                                  detail: String(format: "paired in one process, alternating chunks; median of the runs' median chunk ratios (%.0f µs ÷ %.0f µs per op)",
                                                 1e6 / paired.opsPerSecond, 1e6 / reference.opsPerSecond), unit: "×",
                                  cask: paired.opsPerSecond, peer: "rawlog", peerValue: reference.opsPerSecond))
        } else if let single, let raw = results.summary("rawlog", "fillsync", "sync") {
            targets.append(Target(workload: "fillsync", mode: "sync", metric: "vs_rawlog", name: pwrite, kind: .atLeast(0.85),
                                  value: single.opsPerSecond / raw.opsPerSecond,
                                  detail: String(format: "%.0f µs ÷ %.0f µs per op", 1e6 / single.opsPerSecond, 1e6 / raw.opsPerSecond), unit: "×",
                                  cask: single.opsPerSecond, peer: "rawlog", peerValue: raw.opsPerSecond))
        } else {
            targets.append(Target(workload: "fillsync", mode: "sync", metric: "vs_rawlog", name: pwrite, kind: .atLeast(0.85), value: nil, detail: "", unit: "×"))
        }

        // Issue 23, item 13: durable puts from 1,000 tasks leave the cooperative pool to the other tasks.
        let tasks = results.summary("cask", "fillsync_tasks", "sync")
        let blocking = results.summary("cask", "fillsync_tasks_blocking", "sync")
        targets.append(Target(workload: "fillsync_tasks", mode: "sync", metric: "probe_p99_ms", name: "1 ms sleeps beside 1,000 tasks' durable puts: p99 overrun",
                              kind: .atMost(5), value: tasks?.median(of: "probe_p99_ms"),
                              detail: "median of the runs' p99s; the probe task sleeps 1 ms at a time while the tasks write with `store.suspending`"
                                  + (blocking?.median(of: "probe_p99_ms").map { String(format: " (with the blocking put: %.0f ms)", $0) } ?? ""),
                              unit: "ms"))

        // Issue 24: the command-line tool at disk speed — the release binary, start to exit, as a child process.
        for (workload, bound, unit, name) in [
            ("tool_import", 400_000.0, "entries/s", "`cask import` of the suite's data as JSON Lines"),
            ("tool_export", 1_000_000.0, "entries/s", "`cask export` of that store, to a file"),
            ("tool_list", 2_000_000.0, "keys/s", "`cask list` of that store, to a file"),
        ] {
            let summary = results.summary("cask", workload, "tool")
            var target = Target(workload: workload, mode: "tool", metric: "ops_per_s", name: name, kind: .atLeast(bound),
                                value: summary?.opsPerSecond,
                                detail: summary.map { String(format: "median of the runs, %.3f s for %@ entries, the process's start and exit included", $0.median(of: "seconds") ?? 0, Format.grouped(Double($0.median.num))) } ?? "",
                                unit: unit)
            if num != fullSize { target.caveat = "the target is for 1,000,000 entries; this run has \(Format.grouped(Double(num)))" }
            targets.append(target)
        }
        versus("tool_import", "tool", "lmdb", metric: "vs_mdb_load", name: "`cask import` ÷ `mdb_load` (hex text) of the same data", bound: 1)
        versus("tool_export", "tool", "lmdb", metric: "vs_mdb_dump", name: "`cask export` ÷ `mdb_dump` of the same data", bound: 1)

        let open = results.summary("cask", "open", "read")
        var openTarget = Target(workload: "open", mode: "read", metric: "seconds", name: "open of 1M keys with hints", kind: .atMost(0.3),
                                value: open?.median(of: "seconds"),
                                detail: "median seconds to open the fillrandom store (\(Format.grouped(Double(num))) keys)", unit: "s")
        if num != fullSize { openTarget.caveat = "the target is for 1,000,000 keys; this run has \(Format.grouped(Double(num)))" }
        targets.append(openTarget)

        let index = results.summary("cask", "index", "read")
        targets.append(Target(workload: "index", mode: "read", metric: "bytes_per_key", name: "index bytes per key beyond the key bytes", kind: .atMost(32),
                              value: index?.median(of: "index_overhead_bytes_per_key"),
                              detail: "(index bytes − key bytes) ÷ keys, after reopening the fillrandom store", unit: "B/key"))
        targets.append(Target(workload: "index", mode: "read", metric: "bytes_per_key_ordered", name: "index bytes per key with the ordered view", kind: .atMost(40),
                              value: index?.median(of: "index_overhead_bytes_per_key_ordered"),
                              detail: "the same once the first listing has built the ordered view", unit: "B/key"))

        // Issue 21: reads that scale with cores and never wait for writers; listings that never hold writers up.
        func caskField(_ workload: String, _ mode: String, _ field: String, _ metric: String, _ name: String, _ kind: Target.Kind, _ detail: String) {
            targets.append(Target(workload: workload, mode: mode, metric: metric, name: name, kind: kind,
                                  value: results.summary("cask", workload, mode)?.median(of: field), detail: detail, unit: "×"))
        }
        caskField("readrandom_2t", "read", "scaling", "vs_1_thread", "readrandom on 2 threads ÷ Cask's 1 thread", .atLeast(1.8),
                  "median of the runs' ratios to readrandom in the same run")
        caskField("readwhilewriting", "read", "reader_vs_readrandom", "vs_readrandom", "readwhilewriting reader ÷ readrandom alone", .atLeast(0.8),
                  "one reader beside one writer at full speed; median of the runs' ratios")
        versus("readwhilewriting", "read", "lmdb", metric: "vs_lmdb", name: "readwhilewriting reader ÷ LMDB's reader", bound: 2)
        versus("mixed", "nosync", "lmdb", metric: "vs_lmdb", name: "mixed (2 threads, 90% gets) ÷ LMDB", bound: 2)
        caskField("scan_put", "nosync", "p99_ratio", "p99_vs_alone", "put p99 while another thread lists ÷ put p99 alone", .atMost(2),
                  "median of the runs' p99 ratios")
        caskField("compact_put", "nosync", "ratio", "vs_no_compaction", "puts while compacting ÷ puts without", .atLeast(0.6),
                  "median of the runs' ratios")

        // Issue 24: online backup — links on one file system, copies as fast as cp across two.
        let sameFS = results.summary("cask", "backup", "samefs")
        var backupTarget = Target(workload: "backup", mode: "samefs", metric: "seconds", name: "backup of a 1 GB store on its own file system", kind: .atMost(1),
                                  value: sameFS?.median(of: "seconds"),
                                  detail: sameFS.map { s in "median seconds for \(Format.bytes(s.median.diskBytes)) (\(s.median(of: "segments_linked").map { String(format: "%.0f", $0) } ?? "?") segments linked)"
                                      + (s.median(of: "mdb_copy_seconds").map { String(format: "; mdb_copy of the same entries %.2f s", $0) } ?? "") } ?? "",
                                  unit: "s")
        if let sameFS, sameFS.median.diskBytes < 1_000_000_000 { backupTarget.caveat = "the target is for 1 GB; this run's store is \(Format.bytes(sameFS.median.diskBytes))" }
        targets.append(backupTarget)
        caskField("backup", "otherfs", "vs_cp", "vs_cp", "backup onto another file system ÷ cp -r of the same files", .atLeast(0.8),
                  "cp's seconds ÷ backup's, onto tmpfs, median of the runs' ratios")

        // Issue 23, item 16: objects at memory speed — a get is a raw read plus a decode.
        versus("objects_get", "read", "files-json", metric: "vs_files_json", name: "objects_get ÷ one JSON file per object (`files-json`)", bound: 10)
        let objectGets = results.summary("cask", "objects_get", "read"), rawReads = results.summary("cask", "readrandom", "read")
        targets.append(Target(workload: "objects_get", mode: "read", metric: "vs_readrandom", name: "objects_get ÷ Cask's raw readrandom", kind: .atLeast(0.2),
                              value: objectGets.flatMap { gets in rawReads.map { gets.opsPerSecond / $0.opsPerSecond } },
                              detail: objectGets.flatMap { gets in rawReads.map { "objects_get \(Format.rate(gets.opsPerSecond)) ÷ readrandom \(Format.rate($0.opsPerSecond)) ops/s" } } ?? "",
                              unit: "×", cask: objectGets?.opsPerSecond, peer: rawReads == nil ? nil : "cask-readrandom", peerValue: rawReads?.opsPerSecond))
        // The coder `floor` (FloorEncoder: Codable's machinery and the object's own construction,
        // no format) is the most any Codable coder can reach on the machine: each detail says where it is.
        func floor(_ workload: String, _ describe: (Summary, Summary) -> String) {
            guard let floor = results.summary("floor", workload, "memory"), let json = results.summary("json", workload, "memory"),
                  let last = targets.indices.last, targets[last].workload == workload else { return }
            targets[last].detail += "; the Codable floor (coder `floor`): " + describe(floor, json)
        }
        versus("objects_decode", "memory", "json", metric: "vs_json", name: "objects_decode ÷ `JSONDecoder`", bound: 8)
        floor("objects_decode") { floor, json in String(format: "%.2f×", floor.opsPerSecond / json.opsPerSecond) }
        versus("objects_encode", "memory", "json", metric: "vs_json", name: "objects_encode ÷ `JSONEncoder`", bound: 8)
        floor("objects_encode") { floor, json in String(format: "%.2f×", floor.opsPerSecond / json.opsPerSecond) }
        targets.append(Target(workload: "objects_decode", mode: "memory", metric: "allocs_per_op", name: "allocations per decoded profile", kind: .atMost(4),
                              value: results.summary("cask", "objects_decode", "memory")?.median(of: "allocs_per_op"),
                              detail: "heap allocations of the decoding thread ÷ decodes", unit: "allocs"))
        floor("objects_decode") { floor, _ in floor.median(of: "allocs_per_op").map { String(format: "%.2f allocs", $0) } ?? "?" }

        let fill = results.summary("cask", "fillrandom", "nosync")
        let userBytes = Double(num) * Double(KeyBuffer.keyLength + (fill?.median.valueSize ?? 100))
        targets.append(Target(workload: "fillrandom", mode: "nosync", metric: "disk_vs_user_data", name: "disk after fillrandom ÷ user data", kind: .atMost(0.9),
                              value: fill.map { Double($0.median.diskBytes) / userBytes },
                              detail: fill.map { "\(Format.bytes($0.median.diskBytes)) on disk ÷ \(Format.bytes(Int64(userBytes))) of keys and values" } ?? "", unit: "×"))
        // Issue 25: trained dictionaries.
        targets.append(Target(workload: "fillrandom", mode: "nosync", metric: "disk_vs_user_data_25", name: "disk after fillrandom ÷ user data (issue 25)",
                              kind: .atMost(0.75), value: fill.map { Double($0.median.diskBytes) / userBytes },
                              detail: "the same figure, against issue 25's bound", unit: "×"))
        let withDictionary = results.summary("cask", "objects_disk", "nosync"), without = results.summary("cask", "objects_disk_nodict", "nosync")
        targets.append(Target(workload: "objects_disk", mode: "nosync", metric: "vs_nodict", name: "disk for num profiles with dictionaries ÷ without",
                              kind: .atMost(0.5),
                              value: withDictionary.flatMap { w in without.map { Double(w.median.diskBytes) / Double($0.median.diskBytes) } },
                              detail: withDictionary.flatMap { w in without.map { "\(Format.bytes(w.median.diskBytes)) ÷ \(Format.bytes($0.median.diskBytes)), medians" } } ?? "",
                              unit: "×"))
        let diskPeers = ["leveldb", "rocksdb", "lmdb", "sqlite"].compactMap { peer in results.summary(peer, "objects_disk", "nosync").map { (peer, $0) } }
        let smallest = diskPeers.min { $0.1.median.diskBytes < $1.1.median.diskBytes }
        targets.append(Target(workload: "objects_disk", mode: "nosync", metric: "vs_smallest_peer", name: "disk for num profiles with dictionaries ÷ the smallest peer",
                              kind: .atMost(1), value: withDictionary.flatMap { w in smallest.map { Double(w.median.diskBytes) / Double($0.1.median.diskBytes) } },
                              detail: withDictionary.flatMap { w in smallest.map { "\(Format.bytes(w.median.diskBytes)) ÷ \($0.0) \(Format.bytes($0.1.median.diskBytes))" } } ?? "",
                              unit: "×"))
        caskField("objects_disk", "nosync", "get_vs_nodict", "get_vs_nodict", "gets of profiles with dictionaries ÷ without", .atLeast(0.9),
                  "the two stores taking turns in 10 chunks of gets; median of the runs' ratios")
        targets.append(Target(workload: "objects_disk", mode: "nosync", metric: "set_vs_nodict", name: "puts of profiles with dictionaries ÷ without",
                              kind: .atLeast(0.8),
                              value: withDictionary.flatMap { w in without.map { w.opsPerSecond / $0.opsPerSecond } },
                              detail: "encode + put, medians of the runs", unit: "×"))

        // Issue 26: encryption at rest, the `cask-encrypted` engine beside `cask` in the same runs.
        func encrypted(_ workload: String, _ mode: String, name: String) {
            let plain = results.summary("cask", workload, mode), sealed = results.summary("cask-encrypted", workload, mode)
            var value: Double?, detail = ""
            if let plain, let sealed {
                // Run by run (the two engines run one after the other in each run), then the median.
                let ratios = zip(sealed.runs, plain.runs).map { $0.opsPerSecond / $1.opsPerSecond }.sorted()
                value = ratios.isEmpty ? nil : ratios[ratios.count / 2]
                detail = "median of the runs' ratios (" + ratios.map { String(format: "%.2f", $0) }.joined(separator: ", ")
                    + "); medians \(Format.rate(sealed.opsPerSecond)) ÷ \(Format.rate(plain.opsPerSecond)) ops/s"
            }
            targets.append(Target(workload: workload, mode: mode, metric: "encrypted_vs_plain", name: name, kind: .atLeast(0.7), value: value,
                                  detail: detail, unit: "×", cask: sealed?.opsPerSecond, peer: plain == nil ? nil : "cask", peerValue: plain?.opsPerSecond))
        }
        encrypted("fillrandom", "nosync", name: "fillrandom encrypted ÷ unencrypted")
        encrypted("readrandom", "read", name: "readrandom encrypted ÷ unencrypted")
        // Per record: the records' bytes (segments without their headers) of the two fillrandom stores, as
        // the open reports them; the whole disk's difference (headers, hint files, the ENCRYPTION file,
        // the file system's blocks) beside it.
        let sealedFill = results.summary("cask-encrypted", "fillrandom", "nosync")
        let plainIndex = results.summary("cask", "index", "read"), sealedIndex = results.summary("cask-encrypted", "index", "read")
        let recordDifference = sealedIndex.flatMap { e in plainIndex.flatMap { p in
            e.median(of: "record_bytes").flatMap { eb in p.median(of: "record_bytes").map { (eb - $0) / Double(num) } } } }
        let diskDifference = sealedFill.flatMap { e in fill.map { Double(e.median.diskBytes - $0.median.diskBytes) / Double(num) } }
        targets.append(Target(workload: "fillrandom", mode: "nosync", metric: "encrypted_bytes_per_record", name: "bytes on disk per record, encrypted − unencrypted",
                              kind: .atMost(16), value: recordDifference,
                              detail: "the records' bytes (segments less their headers) after fillrandom, ÷ \(Format.grouped(Double(num))) records"
                                  + (diskDifference.map { String(format: "; the whole disk's difference %.3f B/record (headers, hints, the ENCRYPTION file, blocks)", $0) } ?? ""),
                              unit: "B/record"))
        let sealedOpen = results.summary("cask-encrypted", "open", "read")
        var sealedOpenTarget = Target(workload: "open", mode: "read", metric: "encrypted_seconds", name: "open of 1M keys with hints, encrypted", kind: .atMost(0.5),
                                      value: sealedOpen?.median(of: "seconds"),
                                      detail: "median seconds to open the encrypted fillrandom store (\(Format.grouped(Double(num))) keys)", unit: "s")
        if num != fullSize { sealedOpenTarget.caveat = "the target is for 1,000,000 keys; this run has \(Format.grouped(Double(num)))" }
        targets.append(sealedOpenTarget)
        return targets
    }
}
