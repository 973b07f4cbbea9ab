import Cask
import Foundation

// cask-bench: db_bench-style workloads. `--quick` runs 100,000 entries; the default is 1,000,000.
// Output: one RESULT line per run, then the median of the runs per workload.

var num = 1_000_000
var runs = 3
var valueSize = 100
var root = NSTemporaryDirectory() + "/cask-bench-\(getpid())"
var only: Set<String>?
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--quick": num = 100_000
    case "--num": num = Int(arguments.popFirst() ?? "") ?? num
    case "--runs": runs = Int(arguments.popFirst() ?? "") ?? runs
    case "--value-size": valueSize = Int(arguments.popFirst() ?? "") ?? valueSize
    case "--dir": root = arguments.popFirst() ?? root
    case "--only": only = Set((arguments.popFirst() ?? "").split(separator: ",").map(String.init))
    case "--open-existing":
        // Times opening an existing store (read-only), e.g. to profile recovery.
        let path = arguments.popFirst() ?? "."
        let start = Clock.now()
        let store = try CaskStore.open(at: path, options: CaskStore.Options(durability: .os, readOnly: true))
        let seconds = Clock.now() - start
        print("opened \(path): \(store.count) keys in \(String(format: "%.3f", seconds)) s; \(store.recoveryReport)")
        exit(0)
    case "--help", "-h":
        print("""
        USAGE: cask-bench [--quick] [--num N] [--runs R] [--value-size B] [--dir PATH]

        Runs db_bench-style workloads against Cask (release build: swift run -c release cask-bench).
        --quick        100,000 entries instead of 1,000,000
        --runs R       repeat each workload R times and report the median (default 3)
        --only A,B     run only these workloads (fill workloads run when a later one needs the store)
        --open-existing PATH   time a read-only open of an existing store and exit
        """)
        exit(0)
    default:
        FileHandle.standardError.write("Error: unknown argument \(argument)\n".data(using: .utf8)!)
        exit(64)
    }
}
try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
defer { if ProcessInfo.processInfo.environment["CASK_BENCH_KEEP"] == nil { try? FileManager.default.removeItem(atPath: root) } }

let data = BenchmarkData(count: num, valueSize: valueSize, seed: 301)
var results: [String: [Measurement]] = [:]
var order: [String] = []
@MainActor func record(_ m: Measurement) {
    if let only, !only.contains(m.workload) { return }  // run only as a prerequisite
    print(m.line)
    let key = "\(m.workload) \(m.mode)" + (m.extra.first { $0.0 == "writers" }.map { " writers=\($0.1)" } ?? "")
    if results[key] == nil { order.append(key) }
    results[key, default: []].append(m)
}

@MainActor func wanted(_ names: String...) -> Bool { only == nil || names.contains { only!.contains($0) } }

for run in 0..<runs {
    let workloads = CaskWorkloads(data: data, root: root, seed: 1000 + UInt64(run))
    if wanted("fillseq") { record(try workloads.fill("fillseq", durability: .os, order: Array(0..<num)).0) }
    if wanted("fillrandom", "readrandom", "readmissing", "open", "open_nohints", "overwrite") {
        // The fillrandom store is what the read, open and overwrite workloads run on.
        let (random, dir) = try workloads.fill("fillrandom", durability: .os, order: data.shuffledIndices(seed: 7 + UInt64(run)))
        record(random)
        if wanted("readrandom") { record(try workloads.readRandom(dir, missing: false)) }
        if wanted("readmissing") { record(try workloads.readRandom(dir, missing: true)) }
        if wanted("open") { record(try workloads.open(dir, withHints: true)) }
        if wanted("overwrite") { record(try workloads.overwrite(dir, durability: .os)) }
        if wanted("open_nohints") { record(try workloads.open(dir, withHints: false)) }
    }
    if wanted("fillrandom") {
        var buffered = try workloads.fill("fillrandom_buffered", durability: .buffered, order: data.shuffledIndices(seed: 9 + UInt64(run))).0
        buffered.workload = "fillrandom"
        record(buffered)
    }
    for writers in [1, 4, 16] where wanted("fillsync") {
        record(try workloads.fillSync(count: min(num / 10, 10_000), writers: writers))
    }
}

print("\nMEDIANS (\(runs) runs, num=\(num))")
for key in order {
    let ms = results[key]!.sorted { $0.opsPerSecond < $1.opsPerSecond }
    let median = ms[ms.count / 2]
    print(String(format: "%-34@ %12.0f ops/s  (min %.0f, max %.0f)  %@", key as NSString, median.opsPerSecond,
                 ms.first!.opsPerSecond, ms.last!.opsPerSecond, median.extra.map { "\($0.0)=\($0.1)" }.joined(separator: " ") as NSString))
}
