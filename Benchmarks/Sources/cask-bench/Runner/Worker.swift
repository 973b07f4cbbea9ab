import Foundation

/// A worker process: one engine, one run, every workload; RESULT lines on stdout. The
/// coordinator starts one per engine and run, so an engine's memory, threads and page cache
/// habits do not leak into the next engine's figures, and peak RSS is the engine's own.
enum Worker {
    static func run(_ options: BenchOptions, engine name: String) throws {
        guard let type = Engines.named(name) else { throw BenchError.usage("unknown engine '\(name)'") }
        try makeDirectory(options.root)
        try runSuite(type, options: options)
    }

    private static func runSuite<E: Engine>(_ type: E.Type, options: BenchOptions) throws {
        let data = BenchmarkData(count: options.num / E.divisor, valueSize: options.valueSize, seed: 301)
        let suite = EngineSuite<E>(data: data, root: options.root, run: options.run, fillSyncCount: options.fillSyncCount / E.divisor, only: options.only)
        switch options.phase {
        case .main: try suite.runMain()
        case .sync: try suite.runSync()
        }
    }
}
