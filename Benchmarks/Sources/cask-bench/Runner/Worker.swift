import Foundation

/// A worker process: one engine (or objects variant), one run, one phase; RESULT lines on stdout. The
/// coordinator starts one per engine and run, so an engine's memory, threads and page cache
/// habits do not leak into the next engine's figures, and peak RSS is the engine's own.
enum Worker {
    static func run(_ options: BenchOptions, engine name: String) throws {
        try makeDirectory(options.root)
        if options.phase == .tool {
            let data = BenchmarkData(count: options.num, valueSize: options.valueSize, seed: dataSeed)
            return try ToolSuite(data: data, root: options.root, run: options.run, only: options.only, cask: options.resolvedCaskBinary).runWorkloads()
        }
        if options.phase == .objects {
            let suite = ObjectsSuite(profiles: ProfileData(seed: dataSeed), num: options.num, root: options.root, run: options.run, only: options.only)
            return try suite.run(name)
        }
        // One call per concrete type, not one through `any Engine.Type`: opening the existential
        // would run the whole suite unspecialized, adding generic overhead (metadata lookups) to
        // every operation it times.
        switch name {
        case CaskEngine.name: try runSuite(CaskEngine.self, options: options)
        case CaskEncryptedEngine.name: try runSuite(CaskEncryptedEngine.self, options: options)
        case SQLiteEngine.name: try runSuite(SQLiteEngine.self, options: options)
        case LMDBEngine.name: try runSuite(LMDBEngine.self, options: options)
        case LevelDBEngine.name: try runSuite(LevelDBEngine.self, options: options)
        case RocksDBEngine.name: try runSuite(RocksDBEngine.self, options: options)
        case FilePerObjectEngine.name: try runSuite(FilePerObjectEngine.self, options: options)
        case RawLogEngine.name: try runSuite(RawLogEngine.self, options: options)
        default:
            // Engines.all lists the engines; this switch must name each of them.
            precondition(Engines.named(name) == nil, "Worker.run has no case for engine '\(name)' of Engines.all")
            throw BenchError.usage("unknown engine '\(name)'")
        }
    }

    /// The seed of every workload's data (BenchmarkData's values, the objects' profiles).
    static let dataSeed: UInt64 = 301

    private static func runSuite<E: Engine>(_ type: E.Type, options: BenchOptions) throws {
        let data = BenchmarkData(count: options.num / E.divisor, valueSize: options.valueSize, seed: dataSeed)
        let suite = EngineSuite<E>(data: data, root: options.root, run: options.run, fillSyncCount: options.fillSyncCount / E.divisor, only: options.only)
        switch options.phase {
        case .main: try suite.runMain()
        case .sync: try suite.runSync()
        case .objects, .tool: break  // run by ObjectsSuite and ToolSuite, above
        }
    }
}
