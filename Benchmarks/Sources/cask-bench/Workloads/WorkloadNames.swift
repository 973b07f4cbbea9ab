/// The workloads, by the names RESULT lines and `--only` use, in the order a worker runs them.
enum WorkloadName {
    /// db_bench's, run on every engine that can.
    static let keyValue = [
        "fillseq", "fillrandom", "open", "overwrite", "readrandom", "readmissing", "readseq", "mixed",
        "deleterandom", "fillsync",
    ]
    /// Cask's own figures (`open_nohints`; `open` also reports index bytes per key;
    /// `fillsync_paired` runs with `fillsync`: Cask and the raw reference alternating in one process).
    static let caskOnly = ["open_nohints", "fillsync_paired", "compact", "compact_put"]
    /// Allocations per put and per get on the calling thread (a deterministic count).
    static let allocations = ["allocs_put", "allocs_get"]
    /// `compact`: MB/s of input compacting a store with 50% dead data (every key written twice), with
    /// the disk bytes before and after; `compact_put`: put throughput while a compaction runs, and
    /// its ratio to put throughput without one.
    /// In the issue, not measured yet — it comes with its own issue:
    /// - `objects`: encode+put / get+decode of a ~10-field model against JSON-file-per-object and
    ///   defaults-plist (with the objects API); `FilePerObjectEngine` is the file half of it.
    static let pending = ["objects"]

    static var all: [String] { keyValue + caskOnly + allocations }
}
