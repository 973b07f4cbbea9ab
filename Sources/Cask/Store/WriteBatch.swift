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
        guard let writer else {
            throw isClosed.load(ordering: .relaxed) ? CaskError.closed : CaskError.readOnly
        }
        let worstCase = batch.operations.reduce(Int64(Limits.maxRecordHeaderLength + 8 + 5)) { total, operation in
            switch operation {
            case .put(let key, let value, _): total + Int64(Limits.maxRecordHeaderLength + key.count + value.count)
            case .delete(let key): total + Int64(Limits.maxRecordHeaderLength + key.count)
            }
        }
        let segmentLimit = Int64(UInt32.max) - Int64(SegmentHeader.length)
        guard worstCase <= segmentLimit else { throw CaskError.valueTooLarge(length: Int(worstCase), limit: Int(segmentLimit)) }
        let durability = options.durability
        _ = try appendDurably { () throws(CaskError) -> SyncPosition? in try writer.withLock { (w) throws(CaskError) -> SyncPosition in
            try w.checkUsable()
            try w.checkSequenceNumbersLeft(batch.count + 1, directory: directory)
            if w.end + worstCase > options.maxSegmentSize && w.end > Int64(SegmentHeader.length) {
                try rotate(&w)
            }
            let bufferStart = w.buffer.count, segmentEnd = w.end
            let firstSeq = w.nextSeq
            var locations: [RecordLocation] = []
            locations.reserveCapacity(batch.count)
            let segmentID = UInt32(w.active.id)
            for (position, operation) in batch.operations.enumerated() {
                let seq = firstSeq + UInt64(position)
                let length: Int
                switch operation {
                case .put(let key, let value, let expiresAt):
                    length = key.withUnsafeBytes { key in
                        value.withUnsafeBytes { value in
                            w.encoder.append(type: .put, seq: seq, key: key, value: value, expiresAt: expiresAt, batchMember: true, to: &w.buffer)
                        }
                    }
                case .delete(let key):
                    length = key.withUnsafeBytes { key in
                        w.encoder.append(type: .delete, seq: seq, key: key, value: UnsafeRawBufferPointer(start: nil, count: 0),
                                         expiresAt: nil, batchMember: true, to: &w.buffer)
                    }
                }
                locations.append(RecordLocation(segmentID: segmentID, offset: UInt32(w.end), length: UInt32(length)))
                w.end += Int64(length)
            }
            let commitSeq = firstSeq + UInt64(batch.count)
            var commitValue = ByteBuffer(capacity: 10)
            commitValue.append(varint: UInt64(batch.count))
            let commitKey = withUnsafeBytes(of: firstSeq.littleEndian) { Array($0) }
            let commitLength = commitKey.withUnsafeBytes { key in
                commitValue.withUnsafeBytes { value in
                    w.encoder.append(type: .batch, seq: commitSeq, key: key, value: value, expiresAt: nil, to: &w.buffer)
                }
            }
            w.end += Int64(commitLength)
            if durability != .buffered || w.buffer.count >= options.bufferSize {
                do throws(CaskError) { try w.flush(bufferLimit: options.bufferSize) } catch {
                    w.buffer.count = bufferStart
                    w.end = segmentEnd
                    throw error
                }
            }
            w.nextSeq = commitSeq + 1
            let activeID = w.active.id, written = w.flushed
            state.write { shared in
                shared.segments.noteWritten(segmentID, length: written)
                // Gets without the lock that overlap the entries' changes fall back to the lock.
                shared.batchVersion.add(1, ordering: .sequentiallyConsistent)
                atomicMemoryFence(ordering: .releasing)
                defer { shared.batchVersion.add(1, ordering: .releasing) }
                for (position, operation) in batch.operations.enumerated() {
                    let location = locations[position]
                    operation.key.withUnsafeBytes { key in
                        let old: RecordLocation?
                        switch operation {
                        case .put(_, let value, let expiresAt):
                            old = shared.index.upsert(key, location)
                            shared.expiries.set(key, expiresAt: expiresAt)
                            shared.stats.update(activeID) {
                                $0.append(seq: firstSeq + UInt64(position), valueLength: value.count, length: Int(location.length), live: true)
                            }
                        case .delete:
                            old = shared.index.remove(key)
                            shared.expiries.set(key, expiresAt: nil)
                            shared.stats.update(activeID) {
                                $0.append(seq: firstSeq + UInt64(position), valueLength: 0, length: Int(location.length), live: false)
                            }
                        }
                        if let old { shared.stats.update(UInt64(old.segmentID)) { $0.removeLive(bytes: old.length) } }
                    }
                }
                shared.stats.update(activeID) { $0.append(seq: commitSeq, valueLength: commitValue.count, length: commitLength, live: false) }
            }
            for (position, operation) in batch.operations.enumerated() {
                operation.key.withUnsafeBytes { key in
                    switch operation {
                    case .put(_, _, let expiresAt):
                        publish(.put, key: key, seq: firstSeq + UInt64(position), expiresAt: expiresAt, location: locations[position])
                    case .delete:
                        publish(.delete, key: key, seq: firstSeq + UInt64(position), expiresAt: nil, location: locations[position])
                    }
                }
            }
            return SyncPosition(segmentID: w.active.id, offset: w.end)
        } }
    }
}
