#if canImport(Glibc)
import Glibc
#endif

extension CaskStore {
    /// The value of `key`, or nil when it is absent (or expired).
    ///
    /// One index lookup and one `pread` (or a copy from the write buffer for data not yet flushed).
    /// The record's checksum and key are verified: a damaged record throws
    /// ``CaskError/corruptRecord(path:offset:reason:)``, never returns wrong bytes.
    /// Thread-safe; runs in parallel with other reads and with writes.
    @inlinable
    public func get(_ key: some Collection<UInt8>) throws(CaskError) -> [UInt8]? {
        try Self.withContiguousBytes(key) { (key) throws(CaskError) in try read(key: key) }
    }

    @inlinable
    public func get(_ key: String) throws(CaskError) -> [UInt8]? {
        try get(key.utf8)
    }

    /// Whether `key` has a value. One index lookup, no I/O.
    @inlinable
    public func contains(_ key: some Collection<UInt8>) throws(CaskError) -> Bool {
        try Self.withContiguousBytes(key) { (key) throws(CaskError) in try lookup(key: key) }
    }

    @inlinable
    public func contains(_ key: String) throws(CaskError) -> Bool {
        try contains(key.utf8)
    }

    @usableFromInline
    func lookup(key: UnsafeRawBufferPointer) throws(CaskError) -> Bool {
        try state.read { (shared) throws(CaskError) in
            if shared.closed { throw CaskError.closed }
            guard shared.index.lookup(key) != nil else { return false }
            return shared.expiries.isEmpty || !shared.expiries.isExpired(key, now: Self.nowMilliseconds())
        }
    }

    /// The number of keys (expired keys excluded). O(1), plus O(keys with an expiry) when there are any.
    public var count: Int {
        state.read { shared in
            shared.index.count - (shared.expiries.isEmpty ? 0 : shared.expiries.expiredCount(now: Self.nowMilliseconds()))
        }
    }

    /// All keys, sorted bytewise (optionally only those starting with `prefix`); expired keys excluded.
    /// Complexity: O(n log n) in the number of keys; copies every key.
    public func keys(prefix: [UInt8] = []) throws(CaskError) -> [[UInt8]] {
        var keys: [[UInt8]] = try state.read { (shared) throws(CaskError) in
            if shared.closed { throw CaskError.closed }
            var keys: [[UInt8]] = []
            keys.reserveCapacity(prefix.isEmpty ? shared.index.count : 16)
            let now = Self.nowMilliseconds()
            shared.index.forEach { key, _ in
                guard key.count >= prefix.count && key.prefix(prefix.count).elementsEqual(prefix) else { return }
                if shared.expiries.isEmpty || !shared.expiries.isExpired(key, now: now) { keys.append(Array(key)) }
            }
            return keys
        }
        keys.sort { $0.lexicographicallyPrecedes($1) }
        return keys
    }

    // MARK: The read path

    @usableFromInline
    func read(key: UnsafeRawBufferPointer) throws(CaskError) -> [UInt8]? {
        try readRecord(key: key)?.value
    }

    /// A value and the expiry time of the record it was read from (nil: it never expires).
    typealias ValueAndExpiry = (value: [UInt8], expiresAt: UInt64?)

    /// The value of `key` and the expiry of the record it comes from, or nil when it is absent or expired.
    func readRecord(key: UnsafeRawBufferPointer) throws(CaskError) -> ValueAndExpiry? {
        let found = try state.read { (shared) throws(CaskError) -> (RecordLocation, SegmentFile)? in
            if shared.closed { throw CaskError.closed }
            guard let location = shared.index.lookup(key), let file = shared.segments[location.segmentID] else { return nil }
            return (location, file)
        }
        guard let (location, file) = found else { return nil }
        let end = Int64(location.offset) + Int64(location.length)
        if end > file.writtenLength.load(ordering: .acquiring), let writer {
            // Still in the write buffer (buffered mode): decode it there, under the writer mutex.
            let buffered: Result<ValueAndExpiry?, CaskError>? = writer.withLock { w in
                guard w.active === file, Int64(location.offset) >= w.flushed else { return nil }
                let start = Int(Int64(location.offset) - w.flushed)
                return w.buffer.withUnsafeBytes { buffer in
                    Result { () throws(CaskError) in
                        try Self.decodeRecord(UnsafeRawBufferPointer(rebasing: buffer[start..<(start + Int(location.length))]),
                                             key: key, file: file, offset: location.offset)
                    }
                }
            }
            if let buffered { return try buffered.get() }
        }
        // Never touch mapped bytes the file may not have (that would be SIGBUS, not an error).
        if end <= file.writtenLength.load(ordering: .acquiring), let mapped = file.mappedBytes(location) {
            return try Self.decodeRecord(mapped, key: key, file: file, offset: location.offset)
        }
        let length = Int(location.length)
        return try withScratchBytes(length) { (buffer) throws(CaskError) -> ValueAndExpiry? in
            try file.read(location, into: buffer)
            return try Self.decodeRecord(UnsafeRawBufferPointer(buffer), key: key, file: file, offset: location.offset)
        }
    }

    /// Validates a whole record and returns its value and expiry (nil if it has expired).
    static func decodeRecord(
        _ record: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, file: SegmentFile, offset: UInt32
    ) throws(CaskError) -> ValueAndExpiry? {
        let header: RecordHeader
        switch RecordHeader.validate(record) {
        case .success(let valid): header = valid
        case .failure(let problem):
            throw CaskError.corruptRecord(path: file.path, offset: Int64(offset), reason: problem.description)
        }
        guard header.recordLength == record.count, header.type == .put else {
            throw CaskError.corruptRecord(path: file.path, offset: Int64(offset), reason: "record does not match the index")
        }
        let storedKey = UnsafeRawBufferPointer(rebasing: record[header.headerLength..<(header.headerLength + header.keyLength)])
        guard storedKey.elementsEqual(key) else {
            throw CaskError.corruptRecord(path: file.path, offset: Int64(offset), reason: "record holds a different key")
        }
        if let expiresAt = header.expiresAt, expiresAt <= Self.nowMilliseconds() { return nil }
        let payloadStart = header.headerLength + header.keyLength
        let payload = UnsafeRawBufferPointer(rebasing: record[payloadStart..<(payloadStart + header.storedLength)])
        guard header.isCompressed else { return (Array(payload), header.expiresAt) }
        var ok = true
        let value = [UInt8](unsafeUninitializedCapacity: header.valueLength) { buffer, initialized in
            ok = LZ4Decompressor.decompress(payload, into: UnsafeMutableRawBufferPointer(buffer))
            initialized = ok ? header.valueLength : 0
        }
        guard ok else {
            throw CaskError.corruptRecord(path: file.path, offset: Int64(offset), reason: "LZ4 payload does not expand to \(header.valueLength) bytes")
        }
        return (value, header.expiresAt)
    }

    @usableFromInline
    static func nowMilliseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return UInt64(now.tv_sec) * 1000 + UInt64(now.tv_nsec) / 1_000_000
    }
}
