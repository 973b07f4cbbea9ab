import Synchronization
#if canImport(Glibc)
import Glibc
#endif

extension CaskStore {
    /// The value of `key`, or nil when it is absent (or expired).
    ///
    /// One index lookup and one read of the record: from the segment's mapping (or with `pread`
    /// when reads are not mapped, or from the write buffer for data not yet flushed). The record's
    /// checksum and key are verified: a damaged record throws
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

    /// Calls `body` with the value of `key` without copying it into an array, and returns what
    /// `body` returns; nil when the key is absent (or expired), without calling `body`.
    ///
    /// The bytes are valid only during the call: do not let them escape. The same lookup and
    /// checks as ``get(_:)-(Collection<UInt8>)``. A value of up to 1 KiB is copied (or expanded)
    /// into a buffer on the stack; a larger one is passed straight from the segment's mapping, or
    /// expanded into a temporary buffer when compressed. `body` runs under no lock and may call
    /// the store. Thread-safe.
    @inlinable
    public func withValue<R>(_ key: some Collection<UInt8>, _ body: (UnsafeRawBufferPointer) -> R) throws(CaskError) -> R? {
        // The store's side is not generic, so that it is compiled specialized once, here, rather
        // than run unspecialized (a metadata lookup per call) for every caller's `R`.
        var result: R?
        try Self.withContiguousBytes(key) { (key) throws(CaskError) in try visitValue(key: key) { result = body($0) } }
        return result
    }

    @inlinable
    public func withValue<R>(_ key: String, _ body: (UnsafeRawBufferPointer) -> R) throws(CaskError) -> R? {
        try withValue(key.utf8, body)
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
            if shared.closed { throw CaskError.closed(path: directory) }
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

    // MARK: The read path

    @usableFromInline
    func read(key: UnsafeRawBufferPointer) throws(CaskError) -> [UInt8]? {
        if let quick = try withQuickValue(key: key, { $0.map { Array($0) } }) { return quick }
        return try readRecord(key: key)?.value
    }

    /// Calls `body` with the value of `key` if it has one (see ``withValue(_:_:)-(Collection<UInt8>,_)``).
    @usableFromInline
    func visitValue(key: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> Void) throws(CaskError) {
        let settled: Void? = try withQuickValue(key: key) { value in if let value { body(value) } }
        if settled != nil { return }
        _ = try withRecord(key: key) { (valid, file, offset) throws(CaskError) in
            try Self.withValueBytes(of: valid, file: file, offset: offset) { body($0) }
        }
    }

    /// The fast path of a get (``copyValueWithoutLock(key:into:)``, into a stack buffer): calls `body`
    /// with the value, or with nil when the key has none, and returns what it returns; returns nil
    /// without calling `body` when the full path must settle the get. `body` runs under no lock.
    private func withQuickValue<R>(key: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer?) -> R) throws(CaskError) -> R? {
        try withScratchBytes(Self.smallValueLimit) { (buffer) throws(CaskError) -> R? in
            switch copyValueWithoutLock(key: key, into: buffer) {
            case .absent: return body(nil)
            case .copied(let count): return body(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            case .fallBack, .tooLarge: return nil
            }
        }
    }

    /// What ``copyValueWithoutLock(key:into:)`` found.
    enum QuickRead {
        /// The key has no value (or it has expired).
        case absent
        /// The value is the first `count` bytes of the buffer.
        case copied(count: Int)
        /// The value has `length` bytes, more than the buffer holds; nothing was copied.
        case tooLarge(length: Int)
        /// Not the common case: the full path (``withRecord(key:_:)``) must settle it.
        case fallBack
    }

    /// The common case of a get, done whole without the store's lock: looks `key` up in the index
    /// and the segment table as published to lock-free readers, checks its record in the segment's
    /// mapping, and copies or expands the value into `buffer`.
    ///
    /// Runs inside ``ReaderRegistry/read(_:)``, which keeps the table and the mapping alive (the
    /// index frees a table it grew out of, and the segment table lets a retired segment's mapping
    /// go, only after the readers inside have left), so two reader threads write no shared line
    /// and take no reference to the segment file. What the probe returns is checked by the record
    /// itself (checksum, lengths, key): a probe beside an update that pairs one record's place with
    /// another's length, or that lands on another key's entry, fails those checks. Returns
    /// `.tooLarge`, having copied nothing, for a value larger than `buffer`, and `.fallBack` for
    /// everything else: a record that is not mapped or not yet written, any failed check (which
    /// the full path, under the lock, settles or reports), a closed store. Never calls out of the
    /// store.
    func copyValueWithoutLock(key: UnsafeRawBufferPointer, into buffer: UnsafeMutableRawBufferPointer) -> QuickRead {
        var expiresAt: UInt64?
        return copyEntryWithoutLock(key: key, into: buffer, expiresAt: &expiresAt)
    }

    /// Keys a listing reads after the one it reads now, whose cache misses a read starts early so
    /// that they overlap: the index lines of `index`, and the record of `record` (a key whose
    /// index lines were asked for a few reads before, or this waits for them).
    struct ReadAhead {
        var index: UnsafeRawBufferPointer?
        var record: UnsafeRawBufferPointer?
        static var none: ReadAhead { ReadAhead(index: nil, record: nil) }
    }

    /// ``copyValueWithoutLock(key:into:)``, and the expiry of the record the value was read from
    /// (nil: it never expires), for listings of entries; first starts loading what `ahead` names
    /// (prefetches: they never fault, and a key that moved meanwhile only costs a wasted load).
    @inline(__always)
    func copyEntryWithoutLock(
        key: UnsafeRawBufferPointer, into buffer: UnsafeMutableRawBufferPointer, expiresAt: inout UInt64?,
        prefetching ahead: ReadAhead = .none
    ) -> QuickRead {
        state.withoutLocking { shared in ReaderRegistry.shared.read { () -> QuickRead in
            guard !isClosed.load(ordering: .acquiring) else { return .fallBack }
            Self.startLoading(ahead, shared: shared)
            // A batch changes several entries: a get that overlaps the change (the version is odd
            // meanwhile, or differs after) could see part of it, so it asks under the lock, where
            // a batch is all or nothing.
            let version = shared.batchVersion.load(ordering: .acquiring)
            guard version & 1 == 0 else { return .fallBack }
            let found = probeAndCopy(key: key, into: buffer, shared: shared, expiresAt: &expiresAt)
            atomicMemoryFence(ordering: .acquiring)
            return shared.batchVersion.load(ordering: .relaxed) == version ? found : .fallBack
        } }
    }

    /// Starts loading the lines of what `ahead` names, for a listing that reads the first few
    /// entries of a slice next. Never faults.
    func prefetchWithoutLock(_ ahead: ReadAhead) {
        state.withoutLocking { shared in ReaderRegistry.shared.read {
            guard !isClosed.load(ordering: .acquiring) else { return }
            Self.startLoading(ahead, shared: shared)
        } }
    }

    /// Inside the reader registry: prefetches the index lines and the record `ahead` names.
    @inline(__always)
    private static func startLoading(_ ahead: ReadAhead, shared: SharedState) {
        if let index = ahead.index { shared.index.prefetchWithoutLock(index) }
        if let record = ahead.record, case .location(let location) = shared.index.probableLocationWithoutLock(record),
           let (bytes, _, _, _) = shared.segments.writtenMappedRecord(location) {
            SegmentFile.prefetch(record: bytes)
        }
    }

    /// ``copyValueWithoutLock(key:into:)`` inside the reader registry, once a batch is ruled out.
    @inline(__always)
    private func probeAndCopy(
        key: UnsafeRawBufferPointer, into buffer: UnsafeMutableRawBufferPointer, shared: SharedState, expiresAt: inout UInt64?
    ) -> QuickRead {
        // The entries on the key's path whose hash bits match, in order: the first is the key's
        // own but for about 1% of gets, whose first is another key's.
        for candidate in 0..<Self.quickCandidates {
            let location: RecordLocation
            switch shared.index.probableLocationWithoutLock(key, skipping: candidate) {
            // No entry on the path matches: absent. (After another key's record, a probe again
            // from the start may skip this key's own entry, if the entries before it changed in
            // between: only the lock can then tell.)
            case .absent: return candidate == 0 ? .absent : .fallBack
            case .unsure: return .fallBack
            case .location(let found): location = found
            }
            guard let (record, dictionary, cipher, keyPrefix) = shared.segments.writtenMappedRecord(location) else { return .fallBack }
            SegmentFile.prefetch(record: record)
            guard let cipher else {
                switch Self.checkRecord(
                    record, key: key, explaining: false, cipher: nil, keyPrefix: keyPrefix, offset: location.offset, plain: Self.noPlain) {
                case .valid(let valid): return Self.copy(valid, dictionary: dictionary, into: buffer, expiresAt: &expiresAt)
                case .expired: return .absent
                case .mismatch: return .fallBack
                case .otherKey: continue
                }
            }
            // A sealed record is opened into a buffer of its own on the stack (its key and payload).
            let found = withScratchBytes(record.count) { plain -> QuickRead? in
                switch Self.checkRecord(
                    record, key: key, explaining: false, cipher: cipher.takeUnretainedValue(), keyPrefix: keyPrefix, offset: location.offset,
                    plain: plain) {
                case .valid(let valid): return Self.copy(valid, dictionary: dictionary, into: buffer, expiresAt: &expiresAt)
                case .expired: return .absent
                case .mismatch: return .fallBack
                case .otherKey: return nil
                }
            }
            if let found { return found }
        }
        return .fallBack
    }

    /// The end of the quick path: copies (or expands) the value of the record the probe found and
    /// checked into `buffer`.
    @inline(__always)
    private static func copy(
        _ valid: ValidRecord, dictionary: UnsafeRawBufferPointer?, into buffer: UnsafeMutableRawBufferPointer, expiresAt: inout UInt64?
    ) -> QuickRead {
        let header = valid.header
        guard header.valueLength <= buffer.count else { return .tooLarge(length: header.valueLength) }
        expiresAt = header.expiresAt
        if header.usesDictionary {
            // A dictionary that could not be loaded: the locked path reports it.
            guard let dictionary,
                  LZ4BlockExpander.expand(
                    valid.payload, into: UnsafeMutableRawBufferPointer(rebasing: buffer[..<header.valueLength]), dictionary: dictionary)
            else { return .fallBack }
        } else if header.isCompressed {
            guard LZ4BlockExpander.expand(valid.payload, into: UnsafeMutableRawBufferPointer(rebasing: buffer[..<header.valueLength]))
            else { return .fallBack }
        } else {
            guard valid.payload.count <= buffer.count else { return .fallBack }
            if valid.payload.count > 0 { buffer.baseAddress!.copyMemory(from: valid.payload.baseAddress!, byteCount: valid.payload.count) }
        }
        return .copied(count: header.valueLength)
    }

    /// A value and the expiry time of the record it was read from (nil: it never expires).
    typealias ValueAndExpiry = (value: [UInt8], expiresAt: UInt64?)

    /// The value of `key` and the expiry of the record it comes from, or nil when it is absent or expired.
    func readRecord(key: UnsafeRawBufferPointer) throws(CaskError) -> ValueAndExpiry? {
        try withRecord(key: key) { (valid, file, offset) throws(CaskError) in
            (try Self.value(of: valid, file: file, offset: offset), valid.header.expiresAt)
        }
    }

    /// Calls `body` with the latest record of `key`, checked whole (checksum, lengths, type, key);
    /// nil when the key is absent or the record has expired. `body` runs at most once, under no lock.
    ///
    /// Reads the record at the key's probable location (``KeyIndex/probableLocation(_:)``), whose
    /// key the record's own checks compare; only when those fail does it look the key up exactly
    /// and read again, and then a failure is the record's.
    func withRecord<R>(
        key: UnsafeRawBufferPointer, _ body: (ValidRecord, SegmentFile, UInt32) throws(CaskError) -> R
    ) throws(CaskError) -> R? {
        guard let (probable, probableFile) = try locate(key: key, exactly: false) else { return nil }
        do {
            return try withRecord(key: key, at: probable, in: probableFile, body)
        } catch .corruptRecord {
            // Another key's entry with the same tag, or a damaged record: settle it exactly.
            guard let (location, file) = try locate(key: key, exactly: true) else { return nil }
            do {
                return try withRecord(key: key, at: location, in: file, body)
            } catch .corruptRecord(let path, let offset, let reason) {
                // A damaged record of a key whose expiry, as the index has it, has passed: the key
                // is absent all the same, as `keys()`, `count` and `contains` have it (FORMAT.md).
                if state.read({ !$0.expiries.isEmpty && $0.expiries.isExpired(key, now: Self.nowMilliseconds()) }) { return nil }
                throw CaskError.corruptRecord(path: path, offset: offset, reason: reason)
            }
        }
    }

    /// Calls `body` with the record of `key` at `location` of `file`, checked whole; nil when it
    /// has expired. The record is read from the file's mapping, or copied out of the write buffer
    /// (so that `body` does not run under the writer mutex), or read with `pread`; a sealed one is
    /// opened into a scratch buffer of its own.
    private func withRecord<R>(
        key: UnsafeRawBufferPointer, at location: RecordLocation, in file: SegmentFile,
        _ body: (ValidRecord, SegmentFile, UInt32) throws(CaskError) -> R
    ) throws(CaskError) -> R? {
        let end = Int64(location.offset) + Int64(location.length)
        return try withScratchBytes(file.sealing == nil ? 0 : Int(location.length)) { (plain) throws(CaskError) -> R? in
            // Never touch mapped bytes the file may not have (that would be SIGBUS, not an error).
            if end <= file.writtenLength.load(ordering: .acquiring), let mapped = file.mappedBytes(location) {
                guard let valid = try Self.validateRecord(mapped, key: key, file: file, offset: location.offset, plain: plain) else { return nil }
                return try body(valid, file, location.offset)
            }
            return try withScratchBytes(Int(location.length)) { (buffer) throws(CaskError) -> R? in
                let buffered = end > file.writtenLength.load(ordering: .acquiring)
                    && withBufferedRecord(location, in: file, { record in buffer.copyMemory(from: record) }) != nil
                // Not (or no longer) in the buffer: then it has been handed to the file.
                if !buffered { try file.read(location, into: buffer) }
                guard let valid = try Self.validateRecord(UnsafeRawBufferPointer(buffer), key: key, file: file, offset: location.offset, plain: plain)
                else { return nil }
                return try body(valid, file, location.offset)
            }
        }
    }

    /// Where the latest record of `key` is, with its segment file, or nil when the key is absent.
    ///
    /// The caller holds the file while it reads: a compaction that retires the segment meanwhile
    /// then cannot close its descriptor or release its mapping.
    /// With `exactly` false, the location is only probable (``KeyIndex/probableLocation(_:)``):
    /// the caller must check the key of the record there.
    func locate(key: UnsafeRawBufferPointer, exactly: Bool = true) throws(CaskError) -> (RecordLocation, SegmentFile)? {
        try state.read { (shared) throws(CaskError) -> (RecordLocation, SegmentFile)? in
            if shared.closed { throw CaskError.closed(path: directory) }
            guard var location = exactly ? shared.index.lookup(key) : shared.index.probableLocation(key) else { return nil }
            var found = shared.segments[location.segmentID]
            if found == nil && !exactly {
                // The probable entry is another key's, pointing where no segment is: an index
                // built from a hint that disagreed with its segment can hold one once a compaction
                // drops that record. It says nothing about this key: look it up exactly.
                guard let exact = shared.index.lookup(key) else { return nil }
                location = exact
                found = shared.segments[location.segmentID]
            }
            guard let file = found else { return nil }
            // Before the retain of `file` and the unlock, whose atomic instructions wait for all
            // earlier loads: the record's miss then runs alongside them.
            file.prefetch(location)
            return (location, file)
        }
    }

    /// Calls `body` with the bytes of the record at `location` of `file` if they are still in the
    /// write buffer (`.buffered` mode, not flushed yet); nil when they are not there.
    ///
    /// `body` runs under the writer mutex: it must be short and must not call the store.
    func withBufferedRecord<R>(_ location: RecordLocation, in file: SegmentFile, _ body: (UnsafeRawBufferPointer) -> R) -> R? {
        guard let writer else { return nil }
        return writer.withLock { w in
            guard w.active === file, Int64(location.offset) >= w.flushed else { return nil }
            let start = Int(Int64(location.offset) - w.flushed)
            return w.buffer.withUnsafeBytes { buffer in
                body(UnsafeRawBufferPointer(rebasing: buffer[start..<(start + Int(location.length))]))
            }
        }
    }

    @usableFromInline
    static func nowMilliseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return UInt64(now.tv_sec) * 1000 + UInt64(now.tv_nsec) / 1_000_000
    }
}
