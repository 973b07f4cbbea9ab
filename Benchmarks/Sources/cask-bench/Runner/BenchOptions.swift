import Foundation

/// A worker's share of a run: every key-value workload but `fillsync`, `fillsync` alone, the
/// `objects` workloads (one worker per variant, not per engine), or the `tool` workloads (one
/// worker, which runs the `cask` binary and LMDB's tools as child processes).
enum Phase: String, Sendable {
    case main, sync, objects, tool

    /// The workloads this phase runs.
    var workloads: [String] {
        switch self {
        case .main: WorkloadName.all.filter { !WorkloadName.syncPhase.contains($0) && !WorkloadName.objects.contains($0) && !WorkloadName.tool.contains($0) }
        case .sync: WorkloadName.syncPhase
        case .objects: WorkloadName.objects
        case .tool: WorkloadName.tool
        }
    }
}

/// The command line: `cask-bench [options]`. Parse, then validate; usage errors exit 64.
struct BenchOptions: Sendable {
    var num = 1_000_000
    var runs = 3
    var valueSize = 100
    var fillSyncCount = 10_000
    var root = NSTemporaryDirectory() + "cask-bench-\(getpid())"
    var only: Set<String>?
    var engines: [String] = Engines.all.map { $0.name }
    /// Where the report folder goes; nil: no report.
    var resultsDirectory: String? = BenchOptions.defaultResultsDirectory
    /// `--csv`: where the measured targets' rows go, instead of `headlines.csv` in the results directory.
    var csvPath: String?
    /// `--csv-from`: a saved report folder whose rows to append (and nothing else).
    var csvFrom: String?
    /// `--commit`: with `--csv-from`, the commit of a run whose report does not name it.
    var commit: String?
    var quick = false
    var help = false
    /// Diagnostic: Cask without automatic compaction.
    var caskAutoCompaction = true
    var keep = ProcessInfo.processInfo.environment["CASK_BENCH_KEEP"] != nil
    var openExisting: String?
    /// `--cask-binary`: the `cask` tool the tool workloads time (default: the release build of this
    /// checkout, `.build/release/cask` beside `Benchmarks/`).
    var caskBinary: String?
    /// Internal: run one engine's workloads for one run and print RESULT lines (`--worker ENGINE`).
    var worker: String?
    var phase = Phase.main
    var run = 0
    var arguments: [String] = []

    /// Benchmarks/, this package's directory (in the checkout the binary was built from).
    static var packageDirectory: String {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<4 { url.deleteLastPathComponent() }  // BenchOptions.swift, Runner, cask-bench, Sources → Benchmarks/
        return url.path
    }

    /// The `cask` binary the tool workloads run: `--cask-binary`, or this checkout's release build.
    var resolvedCaskBinary: String {
        caskBinary ?? URL(fileURLWithPath: Self.packageDirectory).deletingLastPathComponent().appendingPathComponent(".build/release/cask").path
    }

    /// Benchmarks/results, next to this package's sources.
    static var defaultResultsDirectory: String { packageDirectory + "/results" }

    /// The CSV this run appends its rows to: `--csv`, or `headlines.csv` in the results directory;
    /// nil with `--no-report`.
    var csv: String? {
        guard let resultsDirectory else { return nil }
        return csvPath ?? resultsDirectory + "/headlines.csv"
    }

    /// `quick` (`--quick`), `full`, or `partial`: some workloads or engines left out (`--only`,
    /// `--engines`), or a diagnostic (`--cask-no-auto-compaction`).
    var runKind: String {
        let defaults = Engines.all.map { $0.name }.filter { !quick || $0 != FilePerObjectEngine.name }
        if only != nil || Set(engines) != Set(defaults) || !caskAutoCompaction { return "partial" }
        return quick ? "quick" : "full"
    }

    static let usage = """
        OVERVIEW: db_bench-style workloads on Cask and its peers (SQLite, LMDB, LevelDB, RocksDB, one
        file per object), the same data in the same binary; medians of several runs, a Markdown report
        with SVG charts, and the issue's targets as ratios measured in the same run.

        USAGE: cask-bench [--quick] [--num <n>] [--runs <r>] [--only <workloads>] [--engines <names>] [options]

        OPTIONS:
          --quick                 100,000 entries (25,000 objects), 1,000 fillsync puts, 1 run, no `files`
                                  engine (under a minute on 2 cores; the README's first command)
          --num <n>               entries per workload (default 1,000,000; the `files` engine runs a tenth;
                                  objects: files and coders a tenth, at most 100,000; UserDefaults
                                  num/100, at most 5,000; synchronizing each, num/1,000, at most 500)
          --runs <r>              runs of every workload; the report gives the median, min and max (default 3)
          --value-size <bytes>    value size (default 100; keys are 16 bytes)
          --fillsync-num <n>      puts in fillsync (default 10,000)
          --only <a,b,...>        report only these workloads (others run when these need their store):
                                  \(WorkloadName.all.joined(separator: ", "));
                                  `objects` names the four objects workloads
          --engines <a,b,...>     only these engines: \(Engines.all.map { $0.name }.joined(separator: ", "))
                                  (the objects workloads run when `cask` is one of them, with all their variants)
          --dir <path>            where the stores are made (default: a new folder in $TMPDIR)
          --results <path>        where the report folder <date>/ is written (default: Benchmarks/results)
          --csv <path>            the CSV the run appends a row to for each target it measured (date, commit,
                                  run kind, machine, the medians, the ratio, the target, met or not; default:
                                  headlines.csv in the --results folder)
          --no-report             print RESULT lines and medians only (no report folder, no CSV rows)
          --csv-from <folder>     append the CSV rows of a saved report folder (its results.txt and report.md)
                                  to --csv (default: headlines.csv beside the folder), and exit
          --commit <hash>         with --csv-from: the commit of a run whose report does not name it
          --keep                  keep the stores afterwards (also CASK_BENCH_KEEP=1)
          --cask-no-auto-compaction   diagnostic: Cask with automaticCompaction off (the default is on)
          --cask-binary <path>    the `cask` tool the tool_* workloads run (default: .build/release/cask of this
                                  checkout, made by `swift build -c release --product cask` in its root)
          --open-existing <path>  time a read-only open of an existing Cask store and exit
          -h, --help              show this help
        """

    static func parse(_ arguments: [String]) throws -> BenchOptions {
        var options = BenchOptions()
        options.arguments = arguments
        var rest = arguments[...]
        var explicitNum = false, explicitFillSync = false, explicitRuns = false, explicitEngines = false
        func value(_ flag: String) throws -> String {
            guard let value = rest.popFirst() else { throw BenchError.usage("\(flag) needs a value") }
            return value
        }
        func count(_ flag: String, minimum: Int = 1) throws -> Int {
            let text = try value(flag)
            guard let n = Int(text.replacingOccurrences(of: ",", with: "").replacingOccurrences(of: "_", with: "")), n >= minimum else {
                throw BenchError.usage("\(flag) needs a whole number of at least \(minimum), not '\(text)'")
            }
            return n
        }
        while let argument = rest.popFirst() {
            switch argument {
            case "--help", "-h": options.help = true
            case "--quick": options.quick = true
            case "--num": options.num = try count(argument, minimum: 10); explicitNum = true
            case "--runs": options.runs = try count(argument); explicitRuns = true
            case "--value-size": options.valueSize = try count(argument)
            case "--fillsync-num": options.fillSyncCount = try count(argument, minimum: 16); explicitFillSync = true
            case "--dir": options.root = try value(argument)
            case "--results": options.resultsDirectory = try value(argument)
            case "--no-report": options.resultsDirectory = nil
            case "--csv": options.csvPath = try value(argument)
            case "--csv-from": options.csvFrom = try value(argument)
            case "--commit": options.commit = try value(argument)
            case "--keep": options.keep = true
            case "--cask-no-auto-compaction": options.caskAutoCompaction = false
            case "--open-existing": options.openExisting = try value(argument)
            case "--cask-binary": options.caskBinary = try value(argument)
            case "--worker": options.worker = try value(argument)
            case "--run": options.run = try count(argument, minimum: 0)
            case "--phase":
                let name = try value(argument)
                guard let phase = Phase(rawValue: name) else { throw BenchError.usage("--phase is main, sync, objects or tool, not '\(name)'") }
                options.phase = phase
            case "--only":
                let names = try value(argument).split(separator: ",").map(String.init)
                if let unknown = names.first(where: { !WorkloadName.all.contains($0) && WorkloadName.groups[$0] == nil }) {
                    throw BenchError.usage("unknown workload '\(unknown)'; the workloads are \(WorkloadName.all.joined(separator: ", "))")
                }
                options.only = Set(names.flatMap { WorkloadName.groups[$0] ?? [$0] })
            case "--engines":
                let names = try value(argument).split(separator: ",").map(String.init)
                if let unknown = names.first(where: { Engines.named($0) == nil }) {
                    throw BenchError.usage("unknown engine '\(unknown)'; the engines are \(Engines.all.map { $0.name }.joined(separator: ", "))")
                }
                options.engines = names
                explicitEngines = true
            default: throw BenchError.usage("unknown argument '\(argument)'")
            }
        }
        if options.csvPath != nil && options.resultsDirectory == nil && options.csvFrom == nil {
            throw BenchError.usage("--csv needs a report: --no-report writes neither the report folder nor the CSV rows")
        }
        if options.commit != nil && options.csvFrom == nil {
            throw BenchError.usage("--commit names the commit of a saved run, with --csv-from")
        }
        if options.quick {
            if !explicitNum { options.num = 100_000 }
            if !explicitFillSync { options.fillSyncCount = 1_000 }
            // Under half a minute on 2 cores: one run, and the slow file-per-object engine left out.
            if !explicitRuns { options.runs = 1 }
            if !explicitEngines { options.engines.removeAll { $0 == FilePerObjectEngine.name } }
        }
        return options
    }

    /// Whether any workload of `phase` is wanted (the objects and tool phases also need the `cask` engine).
    func runs(_ phase: Phase) -> Bool {
        if (phase == .objects || phase == .tool) && !engines.contains(CaskEngine.name) { return false }
        return only.map { !$0.isDisjoint(with: phase.workloads) } ?? true
    }

    /// The arguments a worker process gets for `engine` in `run`.
    func workerArguments(engine: String, phase: Phase, run: Int, directory: String) -> [String] {
        // --quick: a quarter of the objects (25,000 of 100,000), to keep the whole run under a minute.
        let count = phase == .objects && quick ? num / 4 : num
        var arguments = ["--worker", engine, "--phase", phase.rawValue, "--run", "\(run)", "--num", "\(count)", "--value-size", "\(valueSize)",
                         "--fillsync-num", "\(fillSyncCount)", "--dir", directory]
        if let only { arguments += ["--only", only.sorted().joined(separator: ",")] }
        if phase == .tool { arguments += ["--cask-binary", resolvedCaskBinary] }
        return arguments
    }
}
