import CLevelDB

/// LevelDB through `leveldb/c.h` with its default options (4 MiB write buffer, 8 MiB block cache,
/// Snappy compression, no Bloom filter — db_bench's defaults).
final class LevelDBEngine: Engine, @unchecked Sendable {  // Safe: LevelDB is thread-safe; the batch is only used in batch1000, by one thread.
    static let name = "leveldb"
    static let capabilities = Capabilities.all

    static func describe(_ mode: WriteMode) -> String {
        switch mode {
        case .nosync: "`WriteOptions.sync=false`: each put appended to the log with `write`"
        case .batch1000: "`sync=false`, one `WriteBatch` of 1000 puts per `Write`"
        case .sync: "`sync=true`: the log is `fdatasync`ed for every write (concurrent writers are grouped)"
        }
    }

    private let mode: WriteMode
    private let options: OpaquePointer?
    private let writeOptions: OpaquePointer?
    private let readOptions: OpaquePointer?
    private let batch: OpaquePointer?
    private var batched = 0
    private var db: OpaquePointer?

    init(directory: String, mode: WriteMode) throws {
        self.mode = mode
        options = leveldb_options_create()
        leveldb_options_set_create_if_missing(options, 1)
        writeOptions = leveldb_writeoptions_create()
        leveldb_writeoptions_set_sync(writeOptions, mode == .sync ? 1 : 0)
        readOptions = leveldb_readoptions_create()
        batch = leveldb_writebatch_create()
        db = try Self.call("open") { leveldb_open(options, directory, &$0) }
    }

    /// Runs a C call that reports failure through a `char**` error, which must be freed.
    private static func call<R>(_ operation: String, _ body: (inout UnsafeMutablePointer<CChar>?) -> R) throws -> R {
        var error: UnsafeMutablePointer<CChar>?
        let result = body(&error)
        if let error {
            defer { leveldb_free(error) }
            throw BenchError.engine(name, operation, String(cString: error))
        }
        return result
    }

    private static func chars(_ bytes: UnsafeRawBufferPointer) -> UnsafePointer<CChar>? {
        bytes.baseAddress?.assumingMemoryBound(to: CChar.self)
    }

    func put(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws {
        if mode == .batch1000 {
            leveldb_writebatch_put(batch, Self.chars(key), key.count, Self.chars(value), value.count)
            batched += 1
            return
        }
        try Self.call("put") { leveldb_put(db, writeOptions, Self.chars(key), key.count, Self.chars(value), value.count, &$0) }
    }

    func delete(_ key: UnsafeRawBufferPointer) throws {
        if mode == .batch1000 {
            leveldb_writebatch_delete(batch, Self.chars(key), key.count)
            batched += 1
            return
        }
        try Self.call("delete") { leveldb_delete(db, writeOptions, Self.chars(key), key.count, &$0) }
    }

    func commitBatch() throws {
        guard batched > 0 else { return }
        try Self.call("write") { leveldb_write(db, writeOptions, batch, &$0) }
        leveldb_writebatch_clear(batch)
        batched = 0
    }

    /// `leveldb_get` returns a `malloc`ed copy, freed here.
    func get<R>(_ key: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        var length = 0
        guard let value = try Self.call("get", { leveldb_get(db, readOptions, Self.chars(key), key.count, &length, &$0) }) else { return nil }
        defer { leveldb_free(value) }
        return try body(UnsafeRawBufferPointer(start: value, count: length))
    }

    func scan(_ visit: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Void) throws -> Int {
        let iterator = leveldb_create_iterator(db, readOptions)
        defer { leveldb_iter_destroy(iterator) }
        var count = 0
        leveldb_iter_seek_to_first(iterator)
        while leveldb_iter_valid(iterator) != 0 {
            var keyLength = 0, valueLength = 0
            let key = leveldb_iter_key(iterator, &keyLength)
            let value = leveldb_iter_value(iterator, &valueLength)
            visit(UnsafeRawBufferPointer(start: key, count: keyLength), UnsafeRawBufferPointer(start: value, count: valueLength))
            count += 1
            leveldb_iter_next(iterator)
        }
        try Self.call("iterate") { leveldb_iter_get_error(iterator, &$0) }
        return count
    }

    /// An iterator sought to the prefix, then `next` while the prefix holds.
    func scanPrefix(_ prefix: UnsafeRawBufferPointer, values: Bool, _ visit: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Void) throws -> Int {
        let iterator = leveldb_create_iterator(db, readOptions)
        defer { leveldb_iter_destroy(iterator) }
        var count = 0
        leveldb_iter_seek(iterator, prefix.baseAddress?.assumingMemoryBound(to: CChar.self), prefix.count)
        while leveldb_iter_valid(iterator) != 0 {
            var keyLength = 0, valueLength = 0
            let key = UnsafeRawBufferPointer(start: leveldb_iter_key(iterator, &keyLength), count: 0)
            let whole = UnsafeRawBufferPointer(start: key.baseAddress, count: keyLength)
            guard hasPrefix(whole, prefix) else { break }
            if values {
                let value = leveldb_iter_value(iterator, &valueLength)
                visit(whole, UnsafeRawBufferPointer(start: value, count: valueLength))
            } else {
                visit(whole, UnsafeRawBufferPointer(start: nil, count: 0))
            }
            count += 1
            leveldb_iter_next(iterator)
        }
        try Self.call("iterate") { leveldb_iter_get_error(iterator, &$0) }
        return count
    }

    func handleForAnotherThread() throws -> any Engine { self }

    func close() throws {
        try commitBatch()
        if let db { leveldb_close(db) }
        db = nil
        leveldb_writebatch_destroy(batch)
        leveldb_readoptions_destroy(readOptions)
        leveldb_writeoptions_destroy(writeOptions)
        leveldb_options_destroy(options)
    }
}
