import Synchronization

/// Puts and deletes to apply together, all or nothing: ``CaskStore/write(_:)``.
///
/// ```swift
/// var batch = WriteBatch()
/// batch.put("drafts/ada/1001", draft)
/// batch.delete("drafts/ada/0999")
/// try store.write(batch)
/// ```
public struct WriteBatch: Sendable {
    enum Operation: Sendable {
        case put(key: [UInt8], value: [UInt8], expiresAt: UInt64?)
        case delete(key: [UInt8])

        var key: [UInt8] {
            switch self {
            case .put(let key, _, _), .delete(let key): key
            }
        }
    }

    private(set) var operations: [Operation] = []
    /// The operations of ``set(_:forKey:expiresAfter:)``, whose values are encoded with the store's
    /// coder when the batch is written: the position of each one's (empty) put, and its encoding.
    private var objects: [(position: Int, encode: @Sendable (CaskStore) throws(CaskError) -> [UInt8])] = []

    public init() {}

    public var count: Int { operations.count }
    public var isEmpty: Bool { operations.isEmpty }

    public mutating func put(_ key: some Collection<UInt8>, _ value: some Collection<UInt8>) {
        operations.append(.put(key: Array(key), value: Array(value), expiresAt: nil))
    }

    public mutating func put(_ key: String, _ value: some Collection<UInt8>) {
        put(key.utf8, value)
    }

    /// A put whose key expires `duration` after ``CaskStore/write(_:)`` is called.
    public mutating func put(_ key: some Collection<UInt8>, _ value: some Collection<UInt8>, expiresAfter duration: Duration) {
        operations.append(.put(key: Array(key), value: Array(value), expiresAt: duration.expiry(after: CaskStore.nowMilliseconds())))
    }

    /// A put whose key (its UTF-8 bytes) expires `duration` after ``CaskStore/write(_:)`` is called.
    public mutating func put(_ key: String, _ value: some Collection<UInt8>, expiresAfter duration: Duration) {
        put(key.utf8, value, expiresAfter: duration)
    }

    /// A put whose key expires at the wall-clock time `milliseconds` since 1970-01-01 UTC, as
    /// ``CaskStore/put(_:_:expiresAtMilliseconds:)`` (a time already past makes the key absent).
    public mutating func put(_ key: some Collection<UInt8>, _ value: some Collection<UInt8>, expiresAtMilliseconds milliseconds: UInt64) {
        operations.append(.put(key: Array(key), value: Array(value), expiresAt: milliseconds))
    }

    public mutating func delete(_ key: some Collection<UInt8>) {
        operations.append(.delete(key: Array(key)))
    }

    public mutating func delete(_ key: String) {
        delete(key.utf8)
    }

    /// Sets `key` to `value`, encoded with the coder of the store the batch is written to (its
    /// ``CaskStore/ObjectOptions/coder``), as ``CaskStore/set(_:forKey:coder:)`` would: at
    /// ``CaskStore/write(_:)``, which throws ``CaskError/objectEncodingFailed(key:type:codingPath:reason:)``
    /// and writes nothing of the batch when a value does not encode.
    /// An optional `value` that is `nil` deletes the key, as `store.set` does.
    public mutating func set<T: Encodable & Sendable>(_ value: T, forKey key: String, expiresAfter duration: Duration? = nil) {
        if let optional = value as? any ObjectOptionalValue, optional.isNone { return delete(key) }
        let expiresAt = duration.map { $0.expiry(after: CaskStore.nowMilliseconds()) }
        objects.append((operations.count, { (store) throws(CaskError) in try store.encodeObject(value, forKey: key) }))
        operations.append(.put(key: Array(key.utf8), value: [], expiresAt: expiresAt))
    }

    /// The batch with the values of its ``set(_:forKey:expiresAfter:)`` operations encoded for `store`.
    func encodingObjects(for store: CaskStore) throws(CaskError) -> WriteBatch {
        guard !objects.isEmpty else { return self }
        var encoded = self
        encoded.objects = []
        for object in objects {
            guard case .put(let key, _, let expiresAt) = operations[object.position] else { preconditionFailure("a set is a put") }
            encoded.operations[object.position] = .put(key: key, value: try object.encode(store), expiresAt: expiresAt)
        }
        return encoded
    }
}

extension CaskStore {
    /// Applies every operation of `batch` in order, or none of them — also across a crash at any
    /// instant: after a reopen, either all of the batch is visible or nothing of it.
    ///
    /// The operations are written as one unit: their records, marked as batch members, then a commit
    /// record (FORMAT.md, "Batches"), in one `pwrite` (`.os`), one buffer (`.buffered`) or under one
    /// `fdatasync` (`.fsync`). Readers see the batch all at once. Durable on return as for `put`.
    /// Every key and value is checked first: one that is refused fails the whole batch, unwritten.
    public func write(_ batch: WriteBatch) throws(CaskError) {
        guard let batch = try prepared(batch) else { return }
        _ = try append(batch)
    }

    /// `batch` with its objects encoded and every operation checked, or nil when it is empty.
    func prepared(_ batch: WriteBatch) throws(CaskError) -> WriteBatch? {
        let batch = try batch.encodingObjects(for: self)
        for operation in batch.operations {
            switch operation {
            case .put(let key, let value, _):
                try key.withBytes { (key) throws(CaskError) in try validate(key: key, valueLength: value.count) }
            case .delete(let key):
                try key.withBytes { (key) throws(CaskError) in try validate(key: key, valueLength: 0) }
            }
        }
        // A read-only (or closed) store refuses even a batch with nothing in it, as it refuses any write.
        guard writer != nil else {
            throw isClosed.load(ordering: .relaxed) ? CaskError.closed(path: directory) : CaskError.readOnly(path: directory)
        }
        guard !batch.isEmpty else { return nil }
        let segmentLimit = Int64(UInt32.max) - Int64(SegmentHeader.maxLength)
        let worstCase = batch.worstCaseLength
        guard worstCase <= segmentLimit else { throw CaskError.valueTooLarge(length: Int(worstCase), limit: Int(segmentLimit)) }
        return batch
    }
}

extension CaskStore {
    /// Deletes every key in `range` in one batch (``write(_:)``): readers, and the store after a
    /// crash, see all of them gone or none. Returns how many keys it deleted.
    ///
    /// The keys are those live when the range is listed (``keys(in:after:limit:order:)``); a key
    /// created after that is kept, one overwritten after it is deleted. O(log n + k) to list the k
    /// keys, then one batch of k tombstones; the keys are held in memory meanwhile.
    @discardableResult
    public func delete(in range: KeyRange) throws(CaskError) -> Int {
        var batch = WriteBatch()
        try forEachKey(in: range) { key in batch.delete(key) }
        try write(batch)
        return batch.count
    }

    /// Deletes every key that starts with `prefix`, as one batch: ``delete(in:)`` of `.prefix(prefix)`.
    @discardableResult
    public func delete(prefix: some Sequence<UInt8>) throws(CaskError) -> Int {
        try delete(in: .prefix(prefix))
    }

    /// Deletes every key that starts with `prefix` (its UTF-8 bytes), as one batch.
    @discardableResult
    public func delete(prefix: String) throws(CaskError) -> Int {
        try delete(in: .prefix(prefix))
    }
}
