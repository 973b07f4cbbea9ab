import Foundation

/// Runs every engine's worker for every run (engines take turns within a run, starting with a
/// different one each run, so slow phases of a shared machine hit all of them), then the objects
/// variants' workers the same way, collects the RESULT lines, prints medians and targets, and
/// writes the report and the targets' rows of `headlines.csv`.
struct Coordinator {
    let options: BenchOptions

    func run() throws {
        let start = Clock.now()
        try makeDirectory(options.root)
        defer { if !options.keep { try? FileManager.default.removeItem(atPath: options.root) } }
        let machine = Machine.describe(dataDirectory: options.root)
        let commit = Checkout.commit(of: BenchOptions.packageDirectory)
        print("cask-bench: num=\(options.num) runs=\(options.runs) value_size=\(options.valueSize) fillsync=\(options.fillSyncCount) engines=\(options.engines.joined(separator: ","))")
        for line in machine.lines { print("  " + line) }
        let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")

        var results = ResultSet()
        // The tool workloads time the `cask` binary itself: without one there is nothing to time.
        var runsTool = options.runs(.tool)
        if runsTool {
            let binary = options.resolvedCaskBinary
            if FileManager.default.isExecutableFile(atPath: binary) {
                let built = (try? FileManager.default.attributesOfItem(atPath: binary))?[.modificationDate] as? Date
                print("  tool workloads: \(binary)" + (built.map { " (built \($0))" } ?? "") + "; peers: mdb_load, mdb_dump (lmdb-utils)")
            } else {
                let message = "tool_import, tool_export, tool_list: not run: there is no cask binary at \(binary); build it with "
                    + "`swift build -c release --product cask` in the repository root (or name one with --cask-binary)"
                print("ERROR: " + message)
                results.failures.append(message)
                runsTool = false
            }
        }
        // fillsync phase: the raw pwrite+fdatasync reference right after Cask, whose target it is.
        let syncOrder = options.engines.filter { $0 == "cask" } + options.engines.filter { $0 == "rawlog" }
            + options.engines.filter { $0 != "cask" && $0 != "rawlog" }
        for run in 0..<options.runs {
            // Each run starts with a different engine, so none always runs first (or right after the slowest).
            let shift = run % max(options.engines.count, 1)
            let mainOrder = Array(options.engines[shift...] + options.engines[..<shift])
            let variants = ObjectsSuite.workers(only: options.only)
            let variantShift = run % max(variants.count, 1)
            let objectsOrder = Array(variants[variantShift...] + variants[..<variantShift])
            let phases = [(Phase.main, mainOrder), (.sync, syncOrder), (.objects, objectsOrder), (.tool, ["tool"])]
            for (phase, engines) in phases where phase == .tool ? runsTool : options.runs(phase) {
                for engine in engines {
                    let directory = options.root + "/run\(run)-\(engine)"
                    // UserDefaults keeps a suite in $XDG_CONFIG_HOME: the variant's own directory, not the user's.
                    let environment = phase == .objects ? ["XDG_CONFIG_HOME": directory + "/" + engine] : [:]
                    let workerStart = Clock.now()
                    let arguments = options.workerArguments(engine: engine, phase: phase, run: run, directory: directory)
                    let status = try runWorker(executable, arguments, environment: environment) { results.add($0) }
                    if status != 0 {
                        results.failures.append("\(engine), run \(run + 1), \(phase.rawValue) phase: the worker exited with status \(status) (its error is in the output above)")
                    }
                    try? FileManager.default.removeItem(atPath: directory)
                    print(String(format: "# %@ %@ phase, run %d: %.1f s", engine as NSString, phase.rawValue as NSString, run + 1, Clock.now() - workerStart))
                }
            }
        }
        let seconds = Clock.now() - start
        printMedians(results)
        let targets = Target.evaluate(results, num: options.num)
        print("\nTARGETS (ratios of medians from this run)")
        if let caveat = Target.sizeCaveat(num: options.num) { print("  " + caveat) }
        for target in targets {
            print("  \(target.name): \(target.measured) (required \(target.requirement)) — \(target.verdict)\(target.detail.isEmpty ? "" : "; \(target.detail)")")
        }
        for failure in results.failures { print("FAILED: \(failure)") }
        if let resultsDirectory = options.resultsDirectory {
            let date = Self.today()
            let folder = resultsDirectory + "/" + date + (options.quick ? "-quick" : "") + (options.caskAutoCompaction ? "" : "-no-auto-compaction")
            let report = MarkdownReport(results: results, targets: targets, options: options, machine: machine, commit: commit, date: date, seconds: seconds)
            print("\nreport: \(try report.write(to: folder))")
            if let csv = options.csv {
                let run = HeadlineCSV.Run(date: date, name: (folder as NSString).lastPathComponent, commit: commit, kind: options.runKind,
                                          machine: machine.summary, num: options.num, runs: options.runs)
                let rows = HeadlineCSV.rows(targets, run: run)
                if !rows.isEmpty { try HeadlineCSV.append(rows, to: csv) }
                print("headlines: \(rows.count) row\(rows.count == 1 ? "" : "s") appended to \(csv)")
            }
        }
        print(String(format: "total: %.0f s", Clock.now() - start))
        if !results.failures.isEmpty { exit(1) }
    }

    /// Starts a worker, passes its RESULT lines to `collect` (echoing them) and its other output
    /// through; returns its exit status.
    private func runWorker(_ executable: String, _ arguments: [String], environment extra: [String: String],
                           collect: (Measurement) -> Void) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var environment = extra
        if !options.caskAutoCompaction { environment[CaskEngine.autoCompactionVariable] = "0" }
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        var pending = Data()
        let reader = pipe.fileHandleForReading
        while true {
            let chunk = reader.availableData
            if chunk.isEmpty { break }
            pending.append(chunk)
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                pending.removeSubrange(pending.startIndex...newline)
                print(line)
                fflush(nil)
                if let measurement = Measurement(line: line) { collect(measurement) }
            }
        }
        process.waitUntilExit()
        return process.terminationStatus
    }

    private func printMedians(_ results: ResultSet) {
        print("\nMEDIANS (\(options.runs) run\(options.runs == 1 ? "" : "s"), num=\(options.num); ops/s, min–max, Cask ÷ engine)")
        for group in results.groups {
            let cask = results.summary("cask", group.workload, group.mode, writers: group.writers)
            print("  " + Format.group(group))
            let engines = results.engines(in: group)
            let width = engines.map(\.count).max().map { max($0, 8) } ?? 8
            for engine in engines {
                guard let s = results.summary(engine, group.workload, group.mode, writers: group.writers) else { continue }
                var line = "    " + engine.padding(toLength: width, withPad: " ", startingAt: 0)
                line += Format.grouped(s.opsPerSecond).leftPadded(12) + " ops/s  (\(Format.grouped(s.minimum))–\(Format.grouped(s.maximum)))"
                if engine != "cask", let cask { line += "  cask ÷ \(engine) = \(Format.ratio(cask.opsPerSecond / s.opsPerSecond))" }
                for field in ["seconds", "allocs_per_op", "index_overhead_bytes_per_key"] where group.workload.hasPrefix("open") || field != "seconds" {
                    if let value = s.median(of: field) { line += "  \(field)=\(String(format: field == "seconds" ? "%.3f" : "%.2f", value))" }
                }
                print(line)
            }
        }
    }

    static func today() -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd"
        return formatter.string(from: Date())
    }
}

extension String {
    func leftPadded(_ width: Int) -> String { count >= width ? self : String(repeating: " ", count: width - count) + self }
}
