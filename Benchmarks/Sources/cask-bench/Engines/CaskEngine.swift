import Cask
import Foundation

/// How a Cask engine opens its store: as users get it, or encrypted (issue 26).
protocol CaskFlavor: Sendable {
    static var name: String { get }
    static var encryption: Encryption { get }
}

/// Cask as users get it.
enum PlainCask: CaskFlavor {
    static var name: String { "cask" }
    static var encryption: Encryption { .none }
}

/// Cask with `Options.encryption = .key(…)` (a fixed key), with the algorithm a new store gets on
/// this CPU (AES-256-GCM where it has AES-NI), or the one `CASK_BENCH_ALGORITHM` names
/// (`xchacha20poly1305`, to see what a CPU without AES-NI pays): the same workloads side by side with `cask`.
enum EncryptedCask: CaskFlavor {
    static var name: String { "cask-encrypted" }
    static var encryption: Encryption {
        let named = ProcessInfo.processInfo.environment["CASK_BENCH_ALGORITHM"].flatMap { name in
            EncryptionAlgorithm.allCases.first { "\($0)".lowercased().replacingOccurrences(of: "-", with: "") == name.lowercased() }
        }
        return .key(Array(0..<32).map { UInt8($0) }, algorithm: named)
    }
}

/// Cask as users get it (``PlainCask``).
typealias CaskEngine = CaskStoreEngine<PlainCask>
/// Cask encrypted (``EncryptedCask``).
typealias CaskEncryptedEngine = CaskStoreEngine<EncryptedCask>

/// Cask through its public API. Modes: nosync = `.os`, batch1000 = `.buffered`, sync = `.fsync`.
final class CaskStoreEngine<Flavor: CaskFlavor>: Engine {
    static var name: String { Flavor.name }
    static var capabilities: Capabilities { Capabilities.all }

    static func durability(_ mode: WriteMode) -> Durability {
        switch mode {
        case .nosync: .os
        case .batch1000: .buffered
        case .sync: .fsync
        }
    }

    static func describe(_ mode: WriteMode) -> String {
        switch mode {
        case .nosync: "durability `.os`: each put copied into the newest segment's mapping before it returns (the page cache, as after a `pwrite`)"
        case .batch1000: "durability `.buffered`: puts collect in a 256 KiB buffer written with one `pwrite` when full (and `flush()` at the end); no batch API, so \"batches\" are the buffer"
        case .sync: "durability `.fsync`: put returns after `fdatasync`; concurrent writers share one (group commit)"
        }
    }

    /// Cask's automatic compaction (on by default, as users get it); `--cask-no-auto-compaction`
    /// turns it off to see what it costs (the coordinator passes it to workers in the environment).
    static var automaticCompaction: Bool { ProcessInfo.processInfo.environment[autoCompactionVariable] != "0" }
    static var autoCompactionVariable: String { "CASK_BENCH_AUTO_COMPACTION" }

    let store: CaskStore

    init(directory: String, mode: WriteMode) throws {
        var options = CaskStore.Options(durability: Self.durability(mode))
        options.automaticCompaction = Self.automaticCompaction
        options.encryption = Flavor.encryption
        store = try CaskStore.open(at: directory, options: options)
    }

    init(store: CaskStore) { self.store = store }

    func put(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws { try store.put(key, value) }

    func delete(_ key: UnsafeRawBufferPointer) throws { try store.delete(key) }

    /// In `.buffered` mode the end of a workload hands the buffer to the OS, as a peer's last
    /// batch commit does; between batches there is nothing to do.
    func commitBatch() throws {}

    func finishWrites() throws { try store.flush() }

    /// `withValue`: the value lent to `body` without a copy into an array (from the mapping, or
    /// expanded on the stack), as LMDB lends a pointer into its map.
    func get<R>(_ key: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        // `withValue` at `R == Void`, so that it is compiled specialized even when this method runs
        // unspecialized (a `Result<R, …>` here cost a metadata lookup per call).
        var result: R?, failure: (any Error)?
        try store.withValue(key) { (value: UnsafeRawBufferPointer) -> Void in
            do { result = try body(value) } catch { failure = error }
        }
        if let failure { throw failure }
        return result
    }

    /// `forEach`: the keys in order from the ordered index, each record read from its segment's
    /// mapping, checksummed and expanded into a reused buffer.
    func scan(_ visit: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Void) throws -> Int {
        var count = 0
        try store.forEach { key, value in
            visit(key, value)
            count += 1
        }
        return count
    }

    /// Keys only: `forEachKey` (no value read, no allocation per key); with values: `forEach`.
    func scanPrefix(_ prefix: UnsafeRawBufferPointer, values: Bool, _ visit: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Void) throws -> Int {
        var count = 0
        let range = KeyRange.prefix(prefix)
        if values {
            try store.forEach(in: range) { key, value in
                visit(key, value)
                count += 1
            }
        } else {
            try store.forEachKey(in: range) { key in
                visit(key, UnsafeRawBufferPointer(start: nil, count: 0))
                count += 1
            }
        }
        return count
    }

    func handleForAnotherThread() throws -> any Engine { self }

    /// The compactions and hint files that the fill and the overwrites set off.
    func waitForBackgroundWork() throws { store.waitForBackgroundWork() }

    func close() throws { try store.close() }
}
