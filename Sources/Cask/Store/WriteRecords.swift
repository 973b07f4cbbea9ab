/// What one write appends, for the one write path (``CaskStore/append(_:)``): the operations of a
/// put or a delete (one, on its own) or of a batch (each a batch member, then a commit record,
/// FORMAT.md, "Batches"). Keys and values are checked before they get here.
protocol WriteRecords: ~Copyable {
    /// Operations, not counting a batch's commit record.
    var count: Int { get }
    /// Written as batch members followed by a commit record, and applied to readers at once.
    var isBatch: Bool { get }
    /// The most bytes the records can take in a segment (commit record included).
    var worstCaseLength: Int64 { get }
    /// Whether the write is to be skipped: a delete of a key that has no entry writes nothing.
    /// Asked under the writer mutex (a put never takes the index lock for it).
    func isNoOp(in state: ReadWriteLock<CaskStore.SharedState>) -> Bool
    /// Calls `body` with each operation in order: its position, type, key, value and expiry.
    func forEach(_ body: (_ position: Int, _ type: RecordType, _ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, _ expiresAt: UInt64?) -> Void)
}

/// A put or a delete of one key, on its own: its key and value are the caller's, not copied.
struct SingleWrite: WriteRecords {
    let type: RecordType
    let key: UnsafeRawBufferPointer
    let value: UnsafeRawBufferPointer
    let expiresAt: UInt64?

    var count: Int { 1 }
    var isBatch: Bool { false }
    var worstCaseLength: Int64 { Int64(Limits.maxRecordOverhead + key.count + value.count) }

    /// A delete of a key that reads as absent — missing, or expired — writes nothing.
    func isNoOp(in state: ReadWriteLock<CaskStore.SharedState>) -> Bool {
        guard type == .delete else { return false }
        return state.read { shared in
            shared.index.lookup(key) == nil
                || (!shared.expiries.isEmpty && shared.expiries.isExpired(key, now: CaskStore.nowMilliseconds()))
        }
    }

    @inline(__always)
    func forEach(_ body: (Int, RecordType, UnsafeRawBufferPointer, UnsafeRawBufferPointer, UInt64?) -> Void) {
        body(0, type, key, value, expiresAt)
    }
}

extension WriteBatch: WriteRecords {
    var isBatch: Bool { true }

    var worstCaseLength: Int64 {
        // The commit record: a header, the first seq (8 bytes) and the count (a varint of up to 5 bytes).
        operations.reduce(Int64(Limits.maxRecordOverhead + 8 + 5)) { total, operation in
            switch operation {
            case .put(let key, let value, _): total + Int64(Limits.maxRecordOverhead + key.count + value.count)
            case .delete(let key): total + Int64(Limits.maxRecordOverhead + key.count)
            }
        }
    }

    func isNoOp(in state: ReadWriteLock<CaskStore.SharedState>) -> Bool { false }

    func forEach(_ body: (Int, RecordType, UnsafeRawBufferPointer, UnsafeRawBufferPointer, UInt64?) -> Void) {
        for (position, operation) in operations.enumerated() {
            switch operation {
            case .put(let key, let value, let expiresAt):
                key.withUnsafeBytes { key in value.withUnsafeBytes { value in body(position, .put, key, value, expiresAt) } }
            case .delete(let key):
                key.withUnsafeBytes { key in body(position, .delete, key, UnsafeRawBufferPointer(start: nil, count: 0), nil) }
            }
        }
    }
}
