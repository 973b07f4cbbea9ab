import CSQLite

/// SQLite through its C API: one `WITHOUT ROWID` table `kv(key BLOB PRIMARY KEY, value BLOB)` in
/// WAL mode, prepared statements, `INSERT OR REPLACE` per put.
final class SQLiteEngine: Engine, @unchecked Sendable {  // Safe: a handle is used by one thread; other threads get their own connection.
    static let name = "sqlite"
    static let capabilities = Capabilities.all

    static func describe(_ mode: WriteMode) -> String {
        switch mode {
        case .nosync: "WAL, `synchronous=OFF`, one autocommit statement per put (each commit `write`s the WAL frame)"
        case .batch1000: "WAL, `synchronous=OFF`, `BEGIN` … 1000 statements … `COMMIT`"
        case .sync: "WAL, `synchronous=FULL` (the WAL is synced at every commit), one statement per put"
        }
    }

    private let directory: String
    private let mode: WriteMode
    private var db: OpaquePointer?
    private var insert: OpaquePointer?
    private var select: OpaquePointer?
    private var remove: OpaquePointer?
    /// Keys (and entries) from ?1 up to ?2: a prefix's range on the primary key's B-tree.
    private var rangeKeys: OpaquePointer?
    private var rangeEntries: OpaquePointer?
    private var inTransaction = false

    init(directory: String, mode: WriteMode) throws {
        self.directory = directory
        self.mode = mode
        try makeDirectory(directory)
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        guard sqlite3_open_v2(directory + "/kv.sqlite", &db, flags, nil) == SQLITE_OK else {
            defer { sqlite3_close(db) }
            throw error("open")
        }
        sqlite3_busy_timeout(db, 10_000)
        try execute("PRAGMA journal_mode=WAL")
        try execute("PRAGMA synchronous=\(mode == .sync ? "FULL" : "OFF")")
        try execute("CREATE TABLE IF NOT EXISTS kv(key BLOB PRIMARY KEY, value BLOB) WITHOUT ROWID")
        insert = try prepare("INSERT OR REPLACE INTO kv(key, value) VALUES(?1, ?2)")
        select = try prepare("SELECT value FROM kv WHERE key = ?1")
        remove = try prepare("DELETE FROM kv WHERE key = ?1")
        rangeKeys = try prepare("SELECT key FROM kv WHERE key >= ?1 AND key < ?2 ORDER BY key")
        rangeEntries = try prepare("SELECT key, value FROM kv WHERE key >= ?1 AND key < ?2 ORDER BY key")
    }

    private func error(_ operation: String) -> BenchError {
        BenchError.engine(Self.name, operation, db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory")
    }

    private func execute(_ sql: String) throws {
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else { throw error(sql) }
    }

    private func prepare(_ sql: String) throws -> OpaquePointer? {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil) == SQLITE_OK else { throw error(sql) }
        return statement
    }

    /// Runs a bound statement to completion. `nil` destructor = SQLITE_STATIC: SQLite does not copy
    /// the bytes, which stay valid for the call.
    private func run(_ statement: OpaquePointer?, _ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer? = nil) throws {
        defer { sqlite3_reset(statement) }
        sqlite3_bind_blob(statement, 1, key.baseAddress, Int32(key.count), nil)
        if let value { sqlite3_bind_blob(statement, 2, value.baseAddress, Int32(value.count), nil) }
        guard sqlite3_step(statement) == SQLITE_DONE else { throw error("step") }
    }

    private func beginIfBatching() throws {
        if mode == .batch1000 && !inTransaction {
            try execute("BEGIN")
            inTransaction = true
        }
    }

    func put(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws {
        try beginIfBatching()
        try run(insert, key, value)
    }

    func delete(_ key: UnsafeRawBufferPointer) throws {
        try beginIfBatching()
        try run(remove, key)
    }

    func commitBatch() throws {
        guard inTransaction else { return }
        inTransaction = false
        try execute("COMMIT")
    }

    func get<R>(_ key: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        defer { sqlite3_reset(select) }
        sqlite3_bind_blob(select, 1, key.baseAddress, Int32(key.count), nil)
        switch sqlite3_step(select) {
        case SQLITE_ROW:
            let bytes = sqlite3_column_blob(select, 0)
            return try body(UnsafeRawBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(select, 0))))
        case SQLITE_DONE: return nil
        default: throw error("select")
        }
    }

    func scan(_ visit: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Void) throws -> Int {
        let statement = try prepare("SELECT key, value FROM kv")
        defer { sqlite3_finalize(statement) }
        var count = 0
        while true {
            switch sqlite3_step(statement) {
            case SQLITE_ROW:
                let key = UnsafeRawBufferPointer(start: sqlite3_column_blob(statement, 0), count: Int(sqlite3_column_bytes(statement, 0)))
                let value = UnsafeRawBufferPointer(start: sqlite3_column_blob(statement, 1), count: Int(sqlite3_column_bytes(statement, 1)))
                visit(key, value)
                count += 1
            case SQLITE_DONE: return count
            default: throw error("scan")
            }
        }
    }

    /// The range [prefix, prefix with its last byte raised) through a prepared statement (the
    /// benchmark's prefixes end in a digit, never 0xFF).
    func scanPrefix(_ prefix: UnsafeRawBufferPointer, values: Bool, _ visit: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Void) throws -> Int {
        let statement = values ? rangeEntries : rangeKeys
        defer { sqlite3_reset(statement) }
        var end = Array(prefix)
        end[end.count - 1] += 1
        sqlite3_bind_blob(statement, 1, prefix.baseAddress, Int32(prefix.count), nil)
        return try end.withUnsafeBytes { end in
            sqlite3_bind_blob(statement, 2, end.baseAddress, Int32(end.count), nil)
            var count = 0
            while true {
                switch sqlite3_step(statement) {
                case SQLITE_ROW:
                    let key = UnsafeRawBufferPointer(start: sqlite3_column_blob(statement, 0), count: Int(sqlite3_column_bytes(statement, 0)))
                    let value = values
                        ? UnsafeRawBufferPointer(start: sqlite3_column_blob(statement, 1), count: Int(sqlite3_column_bytes(statement, 1)))
                        : UnsafeRawBufferPointer(start: nil, count: 0)
                    visit(key, value)
                    count += 1
                case SQLITE_DONE: return count
                default: throw error("range")
                }
            }
        }
    }

    /// A second connection to the same database (readers run beside the writer in WAL mode).
    func handleForAnotherThread() throws -> any Engine { try SQLiteEngine(directory: directory, mode: mode) }

    func close() throws {
        try commitBatch()
        for statement in [insert, select, remove, rangeKeys, rangeEntries] { sqlite3_finalize(statement) }
        insert = nil; select = nil; remove = nil
        guard sqlite3_close(db) == SQLITE_OK else { throw error("close") }
        db = nil
    }
}
