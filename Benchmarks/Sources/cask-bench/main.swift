import Cask
import Foundation

// cask-bench: db_bench-style workloads on Cask and its peers. See Benchmarks/README.md.
// Usage errors exit 64, failures 1.

let options: BenchOptions
do {
    options = try BenchOptions.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    FileHandle.standardError.write(Data("Error: \(error)\n\n\(BenchOptions.usage)\n".utf8))
    exit(64)
}
if options.help {
    print(BenchOptions.usage)
    exit(0)
}

do {
    if let path = options.openExisting {
        // Times opening an existing store (read-only), e.g. to profile recovery.
        let start = Clock.now()
        let store = try CaskStore.open(at: path, options: CaskStore.Options(durability: .os, readOnly: true))
        let seconds = Clock.now() - start
        print("opened \(path): \(store.count) keys in \(String(format: "%.3f", seconds)) s; \(store.recoveryReport)")
    } else if let folder = options.csvFrom {
        let saved = try SavedRun(folder: folder, commit: options.commit)
        let csv = options.csvPath ?? saved.defaultCSV
        let rows = HeadlineCSV.rows(Target.evaluate(saved.results, num: saved.options.num), run: saved.run)
        if rows.isEmpty {
            print("\(folder): no target measured (no key-value workloads in its results.txt); nothing appended to \(csv)")
        } else {
            try HeadlineCSV.append(rows, to: csv)
            print("\(folder): \(rows.count) row\(rows.count == 1 ? "" : "s") appended to \(csv)")
        }
    } else if let engine = options.worker {
        try Worker.run(options, engine: engine)
    } else {
        try Coordinator(options: options).run()
    }
} catch {
    FileHandle.standardError.write(Data("Error: \(error)\n".utf8))
    exit(1)
}
