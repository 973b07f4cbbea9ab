import CLMDB

/// LMDB through its C API: one environment (`MDB_NOTLS`, 64 GiB map), the unnamed database,
/// one write transaction per put (or per 1000 in `batch1000`), a reset/renewed read
/// transaction per get.
final class LMDBEngine: Engine, @unchecked Sendable {  // Safe: a handle is used by one thread; other threads get their own read transaction.
    static let name = "lmdb"
    static let capabilities = Capabilities.all

    static func describe(_ mode: WriteMode) -> String {
        switch mode {
        case .nosync: "`MDB_NOSYNC`, one write transaction per put (the commit `write`s the dirty pages, no `fsync`)"
        case .batch1000: "`MDB_NOSYNC`, 1000 puts per write transaction"
        case .sync: "default flags: every commit `fdatasync`s data and meta page, one transaction per put"
        }
    }

    /// The environment, shared by the handles of several threads and closed by the first.
    private final class Environment: @unchecked Sendable {  // Safe: LMDB's env is thread-safe with MDB_NOTLS.
        var env: OpaquePointer?
        var dbi = MDB_dbi()
    }

    private let environment: Environment
    private let mode: WriteMode
    private let owner: Bool
    private var writeTxn: OpaquePointer?
    private var readTxn: OpaquePointer?

    init(directory: String, mode: WriteMode) throws {
        self.mode = mode
        owner = true
        environment = Environment()
        try makeDirectory(directory)
        try check(mdb_env_create(&environment.env), "env_create")
        try check(mdb_env_set_mapsize(environment.env, 64 << 30), "set_mapsize")
        var flags = UInt32(MDB_NOTLS)
        if mode != .sync { flags |= UInt32(MDB_NOSYNC) }
        try check(mdb_env_open(environment.env, directory, flags, 0o600), "env_open")
        var txn: OpaquePointer?
        try check(mdb_txn_begin(environment.env, nil, 0, &txn), "txn_begin")
        try check(mdb_dbi_open(txn, nil, 0, &environment.dbi), "dbi_open")
        try check(mdb_txn_commit(txn), "commit")
    }

    private init(sharing environment: Environment, mode: WriteMode) {
        self.environment = environment
        self.mode = mode
        owner = false
    }

    private func check(_ code: Int32, _ operation: String) throws {
        guard code == MDB_SUCCESS else { throw BenchError.engine(Self.name, operation, String(cString: mdb_strerror(code))) }
    }

    private func writeTransaction() throws -> OpaquePointer? {
        if let writeTxn { return writeTxn }
        try check(mdb_txn_begin(environment.env, nil, 0, &writeTxn), "txn_begin")
        return writeTxn
    }

    private func commitWrite() throws {
        guard let txn = writeTxn else { return }
        writeTxn = nil
        try check(mdb_txn_commit(txn), "commit")
    }

    private static func val(_ bytes: UnsafeRawBufferPointer) -> MDB_val {
        MDB_val(mv_size: bytes.count, mv_data: UnsafeMutableRawPointer(mutating: bytes.baseAddress))
    }

    func put(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws {
        var k = Self.val(key), v = Self.val(value)
        try check(mdb_put(try writeTransaction(), environment.dbi, &k, &v, 0), "put")
        if mode != .batch1000 { try commitWrite() }
    }

    func delete(_ key: UnsafeRawBufferPointer) throws {
        var k = Self.val(key)
        let code = mdb_del(try writeTransaction(), environment.dbi, &k, nil)
        if code != MDB_NOTFOUND { try check(code, "del") }
        if mode != .batch1000 { try commitWrite() }
    }

    func commitBatch() throws { try commitWrite() }

    /// A read-only transaction, renewed for each read (cheap: no allocation, no lock).
    private func withReadTransaction<R>(_ body: (OpaquePointer?) throws -> R) throws -> R {
        if let readTxn {
            try check(mdb_txn_renew(readTxn), "txn_renew")
        } else {
            try check(mdb_txn_begin(environment.env, nil, UInt32(MDB_RDONLY), &readTxn), "txn_begin")
        }
        defer { mdb_txn_reset(readTxn) }
        return try body(readTxn)
    }

    func get<R>(_ key: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        try withReadTransaction { txn in
            var k = Self.val(key), v = MDB_val()
            let code = mdb_get(txn, environment.dbi, &k, &v)
            if code == MDB_NOTFOUND { return nil }
            try check(code, "get")
            return try body(UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size))
        }
    }

    func scan(_ visit: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Void) throws -> Int {
        try withReadTransaction { txn in
            var cursor: OpaquePointer?
            try check(mdb_cursor_open(txn, environment.dbi, &cursor), "cursor_open")
            defer { mdb_cursor_close(cursor) }
            var k = MDB_val(), v = MDB_val(), count = 0
            while mdb_cursor_get(cursor, &k, &v, MDB_NEXT) == MDB_SUCCESS {
                visit(UnsafeRawBufferPointer(start: k.mv_data, count: k.mv_size), UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size))
                count += 1
            }
            return count
        }
    }

    /// A cursor at `MDB_SET_RANGE`, then `MDB_NEXT` while the prefix holds (the value comes with
    /// the key from the same page, so keys only costs the same here).
    func scanPrefix(_ prefix: UnsafeRawBufferPointer, values: Bool, _ visit: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Void) throws -> Int {
        try withReadTransaction { txn in
            var cursor: OpaquePointer?
            try check(mdb_cursor_open(txn, environment.dbi, &cursor), "cursor_open")
            defer { mdb_cursor_close(cursor) }
            var k = Self.val(prefix), v = MDB_val(), count = 0
            var code = mdb_cursor_get(cursor, &k, &v, MDB_SET_RANGE)
            while code == MDB_SUCCESS {
                let key = UnsafeRawBufferPointer(start: k.mv_data, count: k.mv_size)
                guard hasPrefix(key, prefix) else { break }
                visit(key, values ? UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size) : UnsafeRawBufferPointer(start: nil, count: 0))
                count += 1
                code = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)
            }
            if code != MDB_SUCCESS && code != MDB_NOTFOUND { try check(code, "cursor_get") }
            return count
        }
    }

    func handleForAnotherThread() throws -> any Engine { LMDBEngine(sharing: environment, mode: mode) }

    func close() throws {
        try commitWrite()
        if let readTxn { mdb_txn_abort(readTxn) }
        readTxn = nil
        if owner, environment.env != nil {
            mdb_env_close(environment.env)
            environment.env = nil
        }
    }
}
