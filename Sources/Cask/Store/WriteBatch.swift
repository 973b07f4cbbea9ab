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
        operations.append(.put(key: Array(key), value: Array(value), expiresAt: CaskStore.nowMilliseconds() + duration.clampedMilliseconds))
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
        for operation in batch.operations {
            switch operation {
            case .put(let key, let value, _):
                try key.withBytes { (key) throws(CaskError) in try validate(key: key, valueLength: value.count) }
            case .delete(let key):
                try key.withBytes { (key) throws(CaskError) in try validate(key: key, valueLength: 0) }
            }
        }
        guard !batch.isEmpty else { return }
        guard writer != nil else {
            throw isClosed.load(ordering: .relaxed) ? CaskError.closed : CaskError.readOnly
        }
        let segmentLimit = Int64(UInt32.max) - Int64(SegmentHeader.length)
        let worstCase = batch.worstCaseLength
        guard worstCase <= segmentLimit else { throw CaskError.valueTooLarge(length: Int(worstCase), limit: Int(segmentLimit)) }
        _ = try append(batch)
    }
}
