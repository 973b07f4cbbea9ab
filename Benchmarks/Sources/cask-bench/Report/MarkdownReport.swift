import Foundation

/// Writes `<results>/<name>/report.md`, `results.txt` (every RESULT line) and `charts/*.svg`.
/// `SavedRun` reads the first lines of the report and results.txt back: keep them in step.
struct MarkdownReport {
    let results: ResultSet
    let targets: [Target]
    let options: BenchOptions
    let machine: Machine
    /// The checkout's commit (`Checkout.commit`), empty when unknown.
    let commit: String
    let date: String
    let seconds: Double

    /// Groups drawn and tabled with every engine; Cask-only figures get their own section.
    private static let tabled: Set<String> = Set(WorkloadName.keyValue)

    /// Whether the run measured any key-value workload (an `--only objects` run did not: no summary).
    private var hasKeyValue: Bool { results.groups.contains { Self.tabled.contains($0.workload) } }

    /// Whether the run measured the command-line tool (issue 24).
    private var hasTool: Bool { results.groups.contains { WorkloadName.tool.contains($0.workload) } }

    /// Whether the run measured the objects workloads (issue 4; their targets are issue 23's item 16).
    private var hasObjects: Bool { results.groups.contains { $0.workload.hasPrefix("objects_") } }

    func write(to folder: String) throws -> String {
        try FileManager.default.createDirectory(atPath: folder + "/charts", withIntermediateDirectories: true)
        try (results.lines.joined(separator: "\n") + "\n").write(toFile: folder + "/results.txt", atomically: true, encoding: .utf8)
        if hasKeyValue {
            try SVGChart.ratios(title: "Cask ÷ best peer (SQLite, LMDB, LevelDB, RocksDB)",
                                subtitle: "median ops/s, num=\(Format.grouped(Double(options.num))), \(options.runs) runs, \(date); right of 1×: Cask faster",
                                rows: summaryRows)
                .write(toFile: folder + "/charts/summary.svg", atomically: true, encoding: .utf8)
        }
        for group in results.groups where Self.tabled.contains(group.workload) || WorkloadName.objects.contains(group.workload) {
            try chart(group).write(toFile: folder + "/charts/\(Format.slug(group)).svg", atomically: true, encoding: .utf8)
        }
        let path = folder + "/report.md"
        try markdown.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    // MARK: Charts

    private var summaryRows: [(label: String, ratio: Double, note: String)] {
        // `open` is left out: SQLite and LMDB have nothing to load at open, so a ratio says little.
        results.groups.filter { Self.tabled.contains($0.workload) && $0.workload != "open" }.compactMap { group in
            guard let cask = results.summary("cask", group.workload, group.mode, writers: group.writers),
                  let best = Target.peers.compactMap({ peer in results.summary(peer, group.workload, group.mode, writers: group.writers).map { (peer, $0) } })
                    .max(by: { $0.1.opsPerSecond < $1.1.opsPerSecond })
            else { return nil }
            let ratio = cask.opsPerSecond / best.1.opsPerSecond
            return (Format.group(group), ratio, "\(Format.ratio(ratio)) vs \(best.0) (\(Format.rate(best.1.opsPerSecond))/s)")
        }
    }

    private var runsText: String {
        options.runs == 1 ? "a single run (no median)" : "median of \(options.runs) runs"
    }

    private func chart(_ group: Series) -> String {
        let num = results.engines(in: group).first.flatMap { results.summary($0, group.workload, group.mode, writers: group.writers)?.median.num } ?? 0
        let objects = WorkloadName.objects.contains(group.workload)
        let legend = objects ? "orange: Cask, grey: the alternatives" : "orange: Cask, blue: peers, grey: references"
        if group.workload == "open" {
            let bars = results.engines(in: group).compactMap { engine -> SVGChart.Bar? in
                guard let summary = results.summary(engine, group.workload, group.mode), let seconds = summary.median(of: "seconds"),
                      let range = summary.range(of: "seconds") else { return nil }
                return SVGChart.Bar(label: engine, value: seconds, minimum: range.0, maximum: range.1,
                                    note: String(format: "%.3f s", seconds), color: SVGChart.color(for: engine))
            }
            return SVGChart.bars(title: "open: seconds to reopen the fillrandom store (lower is better)",
                                 subtitle: "\(runsText) (whiskers: min–max), \(Format.grouped(Double(num))) keys, \(date); \(legend)", bars: bars)
        }
        let cask = results.summary("cask", group.workload, group.mode, writers: group.writers)
        let bars = results.engines(in: group).compactMap { engine -> SVGChart.Bar? in
            guard let summary = results.summary(engine, group.workload, group.mode, writers: group.writers) else { return nil }
            var note = Format.rate(summary.opsPerSecond) + " ops/s"
            if engine != "cask", let cask { note += "  (Cask \(Format.ratio(cask.opsPerSecond / summary.opsPerSecond)))" }
            return SVGChart.Bar(label: engine, value: summary.opsPerSecond, minimum: summary.minimum, maximum: summary.maximum,
                                note: note, color: SVGChart.color(for: engine))
        }
        let title = Self.objectsTitles[group.workload].map { "\(group.workload): \($0)" } ?? Format.group(group)
        let count = objects ? "objects: see the report" : "num=\(Format.grouped(Double(num)))"
        return SVGChart.bars(title: title, subtitle: "ops/s, \(runsText) (whiskers: min–max), \(count), \(date); \(legend)", bars: bars)
    }

    // MARK: Text

    private var markdown: String {
        var md = "# Cask benchmark — \(date)\n\n"
        md += "`cask-bench \(options.arguments.joined(separator: " "))`" + (commit.isEmpty ? "" : " \(SavedRun.commitMarker)`\(commit)`") + " — "
        if hasKeyValue {
            md += "\(Format.grouped(Double(options.num))) entries, "
            md += "16-byte keys, \(options.valueSize)-byte values (half random, half repeated: ~50% compressible), "
            md += "fillsync \(Format.grouped(Double(options.fillSyncCount))) puts; "
        } else if results.groups.contains(where: { WorkloadName.objects.contains($0.workload) }) {
            md += "the objects workloads only (num=\(Format.grouped(Double(options.num))); each variant's count is in the Objects section); "
        } else {
            md += "Cask's own workloads only (num=\(Format.grouped(Double(options.num)))); "
        }
        md += "\(options.runs) run\(options.runs == 1 ? "" : "s") of every workload, "
        md += "each run one worker process per engine, engines interleaved; the suite took \(String(format: "%.0f", seconds)) s.\n\n"
        if !options.caskAutoCompaction { md += "**Diagnostic run: Cask with automatic compaction off** (users get it on).\n\n" }
        md += "## Machine\n\n" + machine.lines.map { "- \($0)\n" }.joined() + "\n"
        md += "The machine is shared with other work (builds and tests run at the same time), so single runs vary; "
        if options.runs == 1 {
            md += "this report is **a single run** — its figures are not medians and can be off by tens of percent; run with `--runs 3` (or more) before quoting them.\n\n"
        } else {
            md += "every figure here is the median of \(options.runs) runs with the min–max range beside it. "
            md += "Treat differences smaller than the ranges as noise.\n\n"
        }
        if hasKeyValue { md += "![Cask ÷ best peer](charts/summary.svg)\n\n" + overviewTable }
        if hasKeyValue || hasTool || hasObjects { md += targetsSection }
        md += perWorkloadSection + toolSection + objectsSection + caskSection + allocationSection + modesSection + workloadsSection
        if !results.failures.isEmpty {
            md += "## Failures\n\n" + results.failures.map { "- \($0)\n" }.joined() + "\n"
        }
        md += "Every RESULT line of every run: [results.txt](results.txt).\n"
        return md
    }

    /// Every workload × engine: median ops/s (for `open`, seconds).
    var overviewTable: String {
        let groups = results.groups.filter { Self.tabled.contains($0.workload) }
        let engines = Engines.all.map { $0.name }.filter { engine in groups.contains { !results.engines(in: $0).filter { $0 == engine }.isEmpty } }
        var md = "| median ops/s | " + engines.map { $0 == "cask" ? "**cask**" : $0 }.joined(separator: " | ") + " |\n"
        md += "|---|" + engines.map { _ in "---:" }.joined(separator: "|") + "|\n"
        for group in groups {
            md += "| \(group.workload == "open" ? "open (seconds)" : Format.group(group)) |"
            for engine in engines {
                guard let s = results.summary(engine, group.workload, group.mode, writers: group.writers) else { md += " |"; continue }
                let cell = group.workload == "open" ? s.median(of: "seconds").map { String(format: "%.3f s", $0) } ?? "" : Format.grouped(s.opsPerSecond)
                md += " \(engine == "cask" ? "**\(cell)**" : cell) |"
            }
            md += "\n"
        }
        return md + "\n"
    }

    private var targetsSection: String {
        var md = "## Targets (issues 5, 21, 23, 24), as ratios of medians from this run\n\n"
        if let caveat = Target.sizeCaveat(num: options.num) { md += caveat + "\n\n" }
        md += "| target | required | measured | verdict | from |\n|---|---|---|---|---|\n"
        for target in targets {
            md += "| \(target.name) | \(target.requirement) | \(target.measured) | \(target.passed == false ? "**\(target.verdict)**" : target.verdict) | \(target.detail) |\n"
        }
        return md + "\n"
    }

    private var perWorkloadSection: String {
        guard hasKeyValue else { return "" }
        var md = "## Results per workload\n\n"
        md += "ops/s is the median run's; \"Cask ÷\" divides Cask's median by the engine's. Disk: bytes allocated by the store's files after the workload "
        md += "(for reads, the store they read; for `fillrandom` nosync, once the engine is closed, so that background work such as "
        md += "Cask's hint files and the LSM stores' memtable flushes is counted; RocksDB's includes the space it preallocates for its write-ahead log). "
        md += "Peak RSS: the worker process's peak while the workload ran (it includes the benchmark's own key "
        md += "lists, ~25 MB at 1M entries, and any memory-mapped file pages touched). "
        md += "References, not peers: `rawlog` (one `pwrite` per record into one file — no index, no reads; with `fdatasync` in sync mode) "
        md += "and `files` (one file per key, run with a tenth of the entries: see num).\n\n"
        for group in results.groups where Self.tabled.contains(group.workload) {
            md += "### \(Format.group(group))\n\n![\(Format.group(group))](charts/\(Format.slug(group)).svg)\n\n"
            if group.workload == "open" {
                md += openTable
                continue
            }
            md += "| engine | num | ops/s | min – max | MB/s | Cask ÷ | disk | peak RSS |\n|---|---:|---:|---:|---:|---:|---:|---:|\n"
            let cask = results.summary("cask", group.workload, group.mode, writers: group.writers)
            for engine in results.engines(in: group) {
                guard let s = results.summary(engine, group.workload, group.mode, writers: group.writers) else { continue }
                let ratio = engine == "cask" ? "" : cask.map { Format.ratio($0.opsPerSecond / s.opsPerSecond) } ?? ""
                md += "| \(engine == "cask" ? "**cask**" : engine) | \(Format.grouped(Double(s.median.num))) | \(Format.grouped(s.opsPerSecond)) | \(Format.grouped(s.minimum)) – \(Format.grouped(s.maximum)) "
                md += "| \(String(format: "%.1f", s.median.megabytesPerSecond)) | \(ratio) | \(Format.bytes(s.median.diskBytes)) | \(Format.bytes(Int64(s.median.rssKB) * 1024)) |\n"
            }
            md += "\n"
        }
        return md
    }

    private var openTable: String {
        var md = "| engine | keys | seconds | min – max | disk | peak RSS |\n|---|---:|---:|---:|---:|---:|\n"
        for engine in results.engines(in: Series(engine: "", workload: "open", mode: "read", writers: 1)) {
            guard let s = results.summary(engine, "open", "read"), let seconds = s.median(of: "seconds"), let range = s.range(of: "seconds") else { continue }
            md += "| \(engine == "cask" ? "**cask**" : engine) | \(Format.grouped(Double(s.median.num))) | \(String(format: "%.3f", seconds)) "
            md += "| \(String(format: "%.3f – %.3f", range.0, range.1)) | \(Format.bytes(s.median.diskBytes)) | \(Format.bytes(Int64(s.median.rssKB) * 1024)) |\n"
        }
        md += "\nSQLite and LMDB load nothing at open (pages are read on demand); LevelDB and RocksDB replay their log; "
        md += "Cask builds its whole in-memory index, from hint files.\n\n"
        return md
    }

    // MARK: The command-line tool

    /// `tool_*`: the `cask` binary beside LMDB's tools, each a child process timed start to exit.
    private var toolSection: String {
        guard hasTool else { return "" }
        var md = "## The command-line tool (issue 24)\n\n"
        md += "The release `cask` binary run as a child process, timed from its start to its exit, on the suite's data (keys 0…num−1 in order, "
        md += "value *n* for key *n*), beside LMDB's own tools on the same data in `mdb_dump`'s hex text: `tool_import` is `cask import DIR "
        md += "--input data.jsonl` into a new store against `mdb_load -f data.txt DIR`; `tool_export` is `cask export DIR` against `mdb_dump DIR` "
        md += "of those stores, standard output to a file (each output checked against the input it came from); `tool_list` is `cask list DIR` "
        md += "to a file (LMDB's tools list no keys alone: no peer). The engines take turns, a different one first in each run. "
        md += "`cask import` syncs once, at the end; `mdb_load` commits, and so `fdatasync`s, every 100 entries, which no option of its changes — "
        md += "its wall time is mostly those syncs, so its CPU time is given too. Peak RSS cannot read below the worker's own (about 30 MB).\n\n"
        md += "| workload | command | entries/s | min – max | seconds | CPU s | Cask ÷ | text moved | peak RSS |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n"
        for workload in WorkloadName.tool {
            let group = Series(engine: "", workload: workload, mode: "tool", writers: 1)
            let cask = results.summary("cask", workload, "tool")
            for engine in results.engines(in: group) {
                guard let s = results.summary(engine, workload, "tool") else { continue }
                let command = s.median["tool"].map { "`" + $0.replacingOccurrences(of: "-", with: " ") + "`" } ?? engine
                let ratio = engine == "cask" ? "" : cask.map { Format.ratio($0.opsPerSecond / s.opsPerSecond) } ?? ""
                let seconds = s.median(of: "seconds").map { String(format: "%.3f", $0) } ?? ""
                let cpu = s.median(of: "cpu_s").map { String(format: "%.3f", $0) } ?? ""
                md += "| \(workload) | \(engine == "cask" ? "**\(command)**" : command) | \(Format.grouped(s.opsPerSecond)) | \(Format.grouped(s.minimum)) – \(Format.grouped(s.maximum)) "
                md += "| \(seconds) | \(cpu) | \(ratio) | \(String(format: "%.0f MB/s", s.median.megabytesPerSecond)) | \(Format.bytes(Int64(s.median.rssKB) * 1024)) |\n"
            }
        }
        return md + "\n"
    }

    // MARK: Objects

    private static let objectsTitles = [
        "objects_set": "encode + store one profile", "objects_get": "read + decode one profile",
        "objects_encode": "encode one profile, no I/O", "objects_decode": "decode one profile, no I/O",
    ]

    /// `objects_*`: the variants side by side, then the coders alone.
    private var objectsSection: String {
        guard results.groups.contains(where: { WorkloadName.objects.contains($0.workload) }) else { return "" }
        var md = "## Objects (issue 4): Codable values\n\n"
        md += "The model: a user profile of ten fields — `id` UUID, `name`, `email`, `age` Int, `createdAt` Date, `isVerified` Bool, "
        md += "`score` Double, `avatar` URL? (nil for a quarter), `tags` [String] (0–5), `addresses` [Address] (2–3 structs of four strings) — "
        md += "drawn from the suite's seed: a pool of \(Format.grouped(Double(ProfileData.poolSize))) profiles, object *n* being profile *n* mod "
        md += "\(Format.grouped(Double(ProfileData.poolSize))) with an id of its own. `objects_set` encodes and stores objects 0…n−1 under keys "
        md += "`users/<n>` into a new store; `objects_get` then reads and decodes n random keys (with replacement) through the same handle, checking "
        md += "each decoded id (and 1,000 whole values after the clock stops). Each variant runs in its own worker process. "
        md += "Counts differ (the objects column): Cask runs num, one file per object a tenth of it (at most 100,000, as the `files` engine), "
        md += "UserDefaults num/100, at most 5,000 (`defaults-sync` num/1,000, at most 500) — its sets slow down as the suite grows — so compare ops/s, not seconds.\n\n"
        md += "| variant | objects | set ops/s | min – max | Cask ÷ | get ops/s | min – max | Cask ÷ | bytes/object | disk (per object) | allocations per set / get |\n"
        md += "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        let caskSet = results.summary("cask", "objects_set", "nosync"), caskGet = results.summary("cask", "objects_get", "read")
        func cells(_ s: Summary?, _ cask: Summary?, _ engine: String) -> String {
            guard let s else { return " | | " }
            let ratio = engine == "cask" ? "" : cask.map { Format.ratio($0.opsPerSecond / s.opsPerSecond) } ?? ""
            return "\(Format.grouped(s.opsPerSecond)) | \(Format.grouped(s.minimum)) – \(Format.grouped(s.maximum)) | \(ratio)"
        }
        var described: [ObjectVariant] = []
        for variant in ObjectVariant.all {
            let set = results.summary(variant.name, "objects_set", "nosync"), get = results.summary(variant.name, "objects_get", "read")
            guard let any = set ?? get else { continue }
            described.append(variant)
            let disk = set.map { "\(Format.bytes($0.median.diskBytes)) (\(Format.grouped(Double($0.median.diskBytes) / Double(max($0.median.num, 1)))) B)" } ?? ""
            let allocations = [set, get].map { $0?.median(of: "allocs_per_op").map { String(format: "%.0f", $0) } ?? "–" }.joined(separator: " / ")
            md += "| \(variant.name == "cask" ? "**cask**" : variant.name) | \(Format.grouped(Double(any.median.num))) | \(cells(set, caskSet, variant.name)) "
            md += "| \(cells(get, caskGet, variant.name)) | \(any.median.valueSize) | \(disk) | \(allocations) |\n"
        }
        md += "\nWhat each variant does (sets `nosync`: nothing waits for the disk, except where said):\n\n"
        md += described.map { "- `\($0.name)`: \($0.description)\n" }.joined()
        md += "\n"
        for workload in ["objects_set", "objects_get"] where results.summary("cask", workload, workload == "objects_set" ? "nosync" : "read") != nil {
            let slug = Format.slug(Series(engine: "", workload: workload, mode: workload == "objects_set" ? "nosync" : "read", writers: 1))
            md += "![\(workload)](charts/\(slug).svg)\n\n"
        }

        let encode = results.summary("cask", "objects_encode", "memory"), decode = results.summary("cask", "objects_decode", "memory")
        if encode != nil || decode != nil {
            let count = (encode ?? decode)!.median.num
            md += "### Coders alone\n\n"
            md += "\(Format.grouped(Double(count))) objects encoded (the coder's bytes returned: `[UInt8]` from `CaskBinaryEncoder.encode`, `Data` from "
            md += "Foundation's), then decoded, by each coder in one worker process, one coder instance each, reused; no I/O. "
            md += "`plist` is `PropertyListEncoder`/`PropertyListDecoder` in the binary format (what `ObjectCoder.propertyList` uses). "
            md += "`floor` is no coder to use but the least a Codable one does (Benchmarks/Sources/cask-bench/Workloads/CodableFloor.swift): "
            md += "the model's own `encode(to:)`/`init(from:)` and values built as a decoder must build them, over a format of bare values with "
            md += "nothing checked: what Codable itself costs, which no Codable coder goes far below.\n\n"
            md += "| coder | bytes/object | encode ops/s | min – max | Cask ÷ | decode ops/s | min – max | Cask ÷ | allocations per encode / decode |\n"
            md += "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
            for coder in ObjectsSuite.coderNames {
                let e = results.summary(coder, "objects_encode", "memory"), d = results.summary(coder, "objects_decode", "memory")
                guard let any = e ?? d else { continue }
                let allocations = [e, d].map { $0?.median(of: "allocs_per_op").map { String(format: "%.0f", $0) } ?? "–" }.joined(separator: " / ")
                let label = switch coder {
                case "cask": "**cask** (binary)"
                case "json": "json (`JSONEncoder`)"
                case "plist": "plist (`PropertyListEncoder`)"
                default: "floor (Codable alone, no format)"
                }
                md += "| \(label) | \(any.median.valueSize) | \(cells(e, encode, coder)) | \(cells(d, decode, coder)) | \(allocations) |\n"
            }
            md += "\n"
            for workload in ["objects_encode", "objects_decode"] where results.summary("cask", workload, "memory") != nil {
                md += "![\(workload)](charts/\(workload)-memory.svg)\n\n"
            }
        }
        return md
    }

    private var caskSection: String {
        var md = "## Cask's own figures\n\n"
        md += "| figure | median | min – max |\n|---|---:|---:|\n"
        for (workload, label) in [("open", "open the fillrandom store, with hint files (s)"), ("open_nohints", "open it with the hint files removed (s)")] {
            if let s = results.summary("cask", workload, "read"), let median = s.median(of: "seconds"), let range = s.range(of: "seconds") {
                md += "| \(label) | \(String(format: "%.3f", median)) | \(String(format: "%.3f – %.3f", range.0, range.1)) |\n"
            }
        }
        if let s = results.summary("cask", "index", "read"), let overhead = s.median(of: "index_overhead_bytes_per_key") {
            md += "| index bytes per key beyond the key bytes | \(String(format: "%.1f", overhead)) | |\n"
            if let bytes = s.median(of: "index_bytes") {
                md += "| index bytes in all (\(Format.grouped(Double(s.median.num))) keys) | \(Format.bytes(Int64(bytes))) | |\n"
            }
        }
        for writers in [1, 4, 16] {
            if let s = results.summary("cask", "fillsync", "sync", writers: writers) {
                md += "| fillsync, \(writers) writer\(writers == 1 ? "" : "s") (ops/s; µs per op) | \(Format.grouped(s.opsPerSecond)); \(String(format: "%.0f", 1e6 / s.opsPerSecond)) µs "
                md += "| \(Format.grouped(s.minimum)) – \(Format.grouped(s.maximum)) |\n"
            }
        }
        if let paired = results.summary("cask", "fillsync_paired", "sync"), let ratio = paired.median(of: "paired_ratio"),
           let range = paired.range(of: "paired_ratio") {
            md += "| fillsync, 1 writer, paired with one pwrite + fdatasync per op in one process: Cask ÷ reference (median of chunk ratios) "
            md += "| \(String(format: "%.2f×", ratio)) | \(String(format: "%.2f× – %.2f×", range.0, range.1)) |\n"
        }
        for (workload, label) in [("fillsync_tasks", "`store.suspending.put`"), ("fillsync_tasks_blocking", "the blocking `put`")] {
            if let s = results.summary("cask", workload, "sync"), let p99 = s.median(of: "probe_p99_ms") {
                md += "| \(Format.grouped(Double(s.median.num))) durable puts from 1,000 tasks with \(label) (ops/s; a probe task's 1 ms sleeps: p99 overrun) "
                md += "| \(Format.grouped(s.opsPerSecond)); \(String(format: "%.2f", p99)) ms | \(Format.grouped(s.minimum)) – \(Format.grouped(s.maximum)) |\n"
            }
        }
        for (mode, place) in [("samefs", "on its own file system"), ("otherfs", "onto tmpfs")] {
            if let s = results.summary("cask", "backup", mode), let seconds = s.median(of: "seconds"), let range = s.range(of: "seconds") {
                let peers = [("mdb_copy", "mdb_copy_seconds"), ("cp -r", "cp_seconds")].compactMap { name, field in
                    s.median(of: field).map { String(format: "%@ %.3f s", name, $0) }
                }.joined(separator: ", ")
                md += "| `backup` of a \(Format.bytes(s.median.diskBytes)) store \(place) (s; the same data: \(peers)) "
                md += "| \(String(format: "%.3f", seconds)) | \(String(format: "%.3f – %.3f", range.0, range.1)) |\n"
            }
        }
        if let raw = results.summary("rawlog", "fillsync", "sync") {
            md += "| reference: one pwrite + fdatasync per op (ops/s; µs per op) | \(Format.grouped(raw.opsPerSecond)); \(String(format: "%.0f", 1e6 / raw.opsPerSecond)) µs | \(Format.grouped(raw.minimum)) – \(Format.grouped(raw.maximum)) |\n"
        }
        if let raw = results.summary("rawlog", "fillrandom", "nosync") {
            md += "| reference: one pwrite per record (ops/s) | \(Format.grouped(raw.opsPerSecond)) | \(Format.grouped(raw.minimum)) – \(Format.grouped(raw.maximum)) |\n"
        }
        return md + "\n"
    }

    private var allocationSection: String {
        let engines = Engines.all.map { $0.name }.filter { results.summary($0, "allocs_put", "nosync") != nil || results.summary($0, "allocs_get", "read") != nil }
        guard !engines.isEmpty else { return "" }
        var md = "## Heap allocations per operation\n\n"
        md += "Counted on the calling thread (a malloc/calloc/realloc/memalign counter linked into the benchmark) over 10,000 operations "
        md += "after 1,000 to warm up, on the fillrandom store after `overwrite`: puts overwrite random keys (nosync mode), gets read random existing "
        md += "keys. Deterministic up to the engines' own background work (not counted: other threads).\n\n"
        md += "Cask's gets are `withValue` (the value lent to a closure, as LMDB lends its page); `get`, which returns the value "
        md += "as a new array, is the last column.\n\n"
        md += "| engine | allocations per put | allocations per get | per `get` returning an array |\n|---|---:|---:|---:|\n"
        for engine in engines {
            let put = results.summary(engine, "allocs_put", "nosync")?.median(of: "allocs_per_op").map { String(format: "%.2f", $0) } ?? ""
            let gets = results.summary(engine, "allocs_get", "read")
            let get = gets?.median(of: "allocs_per_op").map { String(format: "%.2f", $0) } ?? ""
            let arrayGet = gets?.median(of: "allocs_per_array_get").map { String(format: "%.2f", $0) } ?? ""
            md += "| \(engine) | \(put) | \(get) | \(arrayGet) |\n"
        }
        return md + "\n"
    }

    private var modesSection: String {
        var md = "## What each mode means, per engine\n\n| engine | nosync | batch1000 | sync |\n|---|---|---|---|\n"
        for engine in Engines.all where options.engines.contains(engine.name) {
            md += "| \(engine.name) | " + WriteMode.allCases.map { engine.describe($0) }.joined(separator: " | ") + " |\n"
        }
        md += "\nReads (`mode=read`) run on the nosync fillrandom store after `overwrite`, through the handle that wrote it "
        md += "(Cask: reopened after `fillrandom` for `open`). LevelDB and RocksDB use their defaults (Snappy compression, no Bloom filter), "
        md += "SQLite a `WITHOUT ROWID` table with prepared statements, LMDB a 64 GiB map.\n\n"
        return md
    }

    private var workloadsSection: String {
        """
        ## Workloads

        - `fillseq`: puts keys 0…num−1 in order into a new store. `fillrandom`: the same keys once each, shuffled.
        - `open`: closes the fillrandom store and times opening it again (Cask: read from hint files; `open_nohints`: the same with the hint files deleted, so every segment is scanned).
        - `overwrite`: num puts of random existing keys (with replacement) into the fillrandom store.
        - `readrandom`: num gets of random existing keys, each value's length checked; `readmissing`: num gets of keys that are not there (db_bench's: the digits followed by `.`).
        - `readseq`: visits every entry with the engine's iterator or cursor (Cask: `forEach`, in key order from the ordered index, each record checksummed and decompressed where it lies).
        - `mixed`: 2 threads, num/2 operations each on random existing keys: 90% gets, 10% puts (nosync).
        - `deleterandom`: deletes num/10 distinct existing keys, one call each (nosync).
        - `fillsync`: \(Format.grouped(Double(options.fillSyncCount))) puts, each durable before it returns, from 1, 4 or 16 threads at once. `fillsync_paired`: Cask's single writer and the `rawlog` reference (one `pwrite` + `fdatasync` per put) alternating in 10 chunks in one process, so both see the same disk latency; its median chunk ratio judges the 1-writer target.
        - `fillsync_tasks`: Cask only, durable puts from 1,000 tasks at once (10× fillsync's count) with `store.suspending.put`, while a probe task sleeps 1 ms at a time and records how late it wakes; `fillsync_tasks_blocking`: fillsync's count with the blocking `put` called from the same tasks.
        - `backup`: Cask only, `CaskStore.backup(to:)` of a store of num/4 incompressible 4 KiB values (1 GiB at the default num), synced first (a store at rest), into a directory beside it (`samefs`: sealed segments linked) and onto `/dev/shm` (`otherfs`: every file copied); right after each, `mdb_copy` of an LMDB environment holding the same entries and `cp -r` of the same store's files to the same place.
        - `allocs_put`, `allocs_get`: heap allocations per operation (the table above).
        - `objects_set`, `objects_get`, `objects_encode`, `objects_decode`: Codable values (the Objects section).
        - `tool_import`, `tool_export`, `tool_list`: the `cask` binary's `import`, `export` and `list`, beside `mdb_load` and `mdb_dump` (the command-line tool section).

        """ + "\n"
    }
}
