import Foundation
/// How writes reach the disk, named as the issue names them and mapped per engine (see each
/// engine's ``Engine/describe(_:)`` and Benchmarks/README.md):
/// - `nosync`: every write is handed to the OS before it returns (survives the process being
///   killed, not a power cut). Cask `.os`.
/// - `batch1000`: writes are grouped 1000 to a transaction / write batch, each batch handed to the
///   OS when it commits. Cask `.buffered` (Cask has no batch API: its buffer is the batch).
/// - `sync`: every write is on stable storage before it returns. Cask `.fsync`.
enum WriteMode: String, CaseIterable, Sendable {
    case nosync, batch1000, sync

    /// Writes per transaction / batch.
    var batchSize: Int { self == .batch1000 ? 1000 : 1 }
}

/// What an engine can do, so a workload it cannot run is skipped rather than faked.
struct Capabilities: OptionSet, Sendable {
    let rawValue: Int
    static let reads = Capabilities(rawValue: 1 << 0)
    static let deletes = Capabilities(rawValue: 1 << 1)
    static let scans = Capabilities(rawValue: 1 << 2)
    /// Several threads may use it at once (through ``Engine/handleForAnotherThread()``).
    static let threads = Capabilities(rawValue: 1 << 3)
    static let reopen = Capabilities(rawValue: 1 << 4)
    /// Has a `batch1000` mode (an engine without batches is not run in it rather than run unbatched).
    static let batches = Capabilities(rawValue: 1 << 5)
    static let all: Capabilities = [.reads, .deletes, .scans, .threads, .reopen, .batches]
}

/// One store driven by the workloads: Cask or a peer, each in its own file of this folder.
///
/// Keys and values are passed as raw bytes that live only for the call (never keep the pointer).
/// An engine opened in `batch1000` mode collects writes until ``commitBatch()``; in the other
/// modes every write goes through at once and `commitBatch()` has nothing to do. Handles are used
/// by one thread at a time; ``handleForAnotherThread()`` gives another thread its own.
protocol Engine: AnyObject, Sendable {
    /// The name in RESULT lines.
    static var name: String { get }
    static var capabilities: Capabilities { get }
    /// What `mode` means for this engine, for the report (one sentence).
    static func describe(_ mode: WriteMode) -> String
    /// The engine runs num ÷ this many entries (and fillsync puts), when its cost per operation
    /// would make the full count take many minutes. 1 for Cask and the peers.
    static var divisor: Int { get }

    /// Opens the store in `directory`, creating it when missing.
    init(directory: String, mode: WriteMode) throws

    func put(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws
    func delete(_ key: UnsafeRawBufferPointer) throws
    /// Ends the current batch (`batch1000`), handing it to the OS; nothing to do in other modes.
    func commitBatch() throws
    /// Ends a write workload (timed): commits the last batch and hands everything to the OS.
    func finishWrites() throws
    /// Calls `body` with `key`'s value (the engine's own bytes or a copy, as its API gives them)
    /// and returns what `body` returns, or nil when the key is absent.
    func get<R>(_ key: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R?
    /// Visits every entry in the engine's own order; returns the number of entries.
    func scan(_ visit: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) -> Void) throws -> Int
    /// Visits the keys that start with `prefix` in ascending order — with their values when
    /// `values`, else with an empty value and without reading values — through the engine's own
    /// range API (a cursor or iterator positioned at the prefix); returns the number visited.
    func scanPrefix(_ prefix: UnsafeRawBufferPointer, values: Bool,
                    _ visit: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) -> Void) throws -> Int
    /// A handle for another thread on the same store: `self` when the engine is thread-safe,
    /// else a new connection / transaction context.
    func handleForAnotherThread() throws -> any Engine
    /// Returns once the work the engine started in the background on its own (compactions) is
    /// done, where its API can tell; nothing to do for engines without such work or such an API.
    func waitForBackgroundWork() throws
    func close() throws
}

extension Engine {
    static var divisor: Int { 1 }
    func finishWrites() throws { try commitBatch() }
    func delete(_ key: UnsafeRawBufferPointer) throws { throw BenchError.unsupported(Self.name, "delete") }
    func get<R>(_ key: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        throw BenchError.unsupported(Self.name, "get")
    }
    func scan(_ visit: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Void) throws -> Int {
        throw BenchError.unsupported(Self.name, "scan")
    }
    func handleForAnotherThread() throws -> any Engine { throw BenchError.unsupported(Self.name, "threads") }
    func waitForBackgroundWork() throws {}
    func scanPrefix(_ prefix: UnsafeRawBufferPointer, values: Bool, _ visit: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Void) throws -> Int {
        throw BenchError.unsupported(Self.name, "prefix scans")
    }
}

/// Whether `key` starts with `prefix`.
@inline(__always)
func hasPrefix(_ key: UnsafeRawBufferPointer, _ prefix: UnsafeRawBufferPointer) -> Bool {
    key.count >= prefix.count && (prefix.isEmpty || memcmp(key.baseAddress!, prefix.baseAddress!, prefix.count) == 0)
}

enum BenchError: Error, CustomStringConvertible {
    /// An engine call failed: engine, operation, the engine's own message.
    case engine(String, String, String)
    case unsupported(String, String)
    /// A workload's result is wrong (a value of the wrong length, a key not found…).
    case check(String)
    case usage(String)

    var description: String {
        switch self {
        case .engine(let engine, let operation, let message): "\(engine): \(operation) failed: \(message)"
        case .unsupported(let engine, let operation): "\(engine) does not support \(operation) in this benchmark"
        case .check(let message): "check failed: \(message)"
        case .usage(let message): message
        }
    }
}

/// Every engine the suite knows, in report order (Cask first, references last).
enum Engines {
    static let all: [any Engine.Type] = [
        CaskEngine.self, CaskEncryptedEngine.self, SQLiteEngine.self, LMDBEngine.self, LevelDBEngine.self, RocksDBEngine.self,
        FilePerObjectEngine.self, RawLogEngine.self,
    ]

    static func named(_ name: String) -> (any Engine.Type)? { all.first { $0.name == name } }
}
