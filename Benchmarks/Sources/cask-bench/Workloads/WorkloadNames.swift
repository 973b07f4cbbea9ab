/// The workloads, by the names RESULT lines and `--only` use, in the order a worker runs them.
enum WorkloadName {
    /// db_bench's, run on every engine that can.
    static let keyValue = [
        "fillseq", "fillrandom", "open", "overwrite", "readrandom", "readrandom_2t", "readwhilewriting", "readmissing", "readseq", "mixed",
        "deleterandom", "fillsync",
        // The ordered index (issue 21): listings of one prefix's 1,000 keys (keys only, and with
        // values), and put latency while another thread lists prefixes.
        "scanprefix", "scan_put",
        // Dictionaries (issue 25): num encoded profiles stored as the same bytes in every engine;
        // the bytes on disk.
        "objects_disk",
    ]
    /// Cask's own figures (`open_nohints`; `open` also reports index bytes per key;
    /// `fillsync_paired` runs with `fillsync`: Cask and the raw reference alternating in one process).
    /// `compact`: MB/s of input compacting a store with 50% dead data (every key written twice), with
    /// the disk bytes before and after; `compact_put`: put throughput while a compaction runs, and
    /// its ratio to put throughput without one. `fillsync_tasks` (`store.suspending`) and
    /// `fillsync_tasks_blocking` (the blocking `put`): durable puts from 1,000 tasks at once, and how
    /// late a probe task's 1 ms sleeps wake meanwhile. `backup`: `CaskStore.backup(to:)` of a store of
    /// num ÷ 4 incompressible 4 KiB values (1 GiB at the default num), on its own file system and on
    /// tmpfs, with `mdb_copy` of the same entries and `cp -r` of the same files timed beside it.
    static let caskOnly = ["objects_disk_nodict", "open_nohints", "fillsync_paired", "fillsync_tasks", "fillsync_tasks_blocking", "compact", "compact_put", "backup"]
    /// Allocations per put and per get on the calling thread (a deterministic count).
    static let allocations = ["allocs_put", "allocs_get"]
    /// Codable values (issue 4, ``ObjectsSuite``): encode + store and read + decode of a user profile
    /// with Cask's object API and with the file-per-object and `UserDefaults` alternatives; pure
    /// encoding and decoding with each coder. `--only objects` names all four.
    static let objects = ["objects_set", "objects_get", "objects_encode", "objects_decode"]
    /// The `cask` command-line tool (issue 24, ``ToolSuite``): the release binary's `import`,
    /// `export` and `list` of the suite's data, timed as child processes, beside `mdb_load` and
    /// `mdb_dump` on the same data. `--only tool` names all three.
    static let tool = ["tool_import", "tool_export", "tool_list"]
    /// Names that stand for several workloads in `--only`.
    static let groups = ["objects": objects, "tool": tool]
    /// The workloads of the `sync` phase; the objects ones are a phase of their own, the rest the `main` one.
    static let syncPhase = ["fillsync", "fillsync_paired", "fillsync_tasks", "fillsync_tasks_blocking"]

    static var all: [String] { keyValue + caskOnly + allocations + objects + tool }
}
