import Dispatch
import Synchronization

extension CaskStore {
    /// Sets `key` to `value`.
    ///
    /// Durable on return as the store's ``Durability`` says. Throws ``CaskError/emptyKey``,
    /// ``CaskError/keyTooLong(length:limit:)`` or ``CaskError/valueTooLarge(length:limit:)`` before
    /// writing anything; ``CaskError/diskFull(path:)`` after rolling the record back.
    /// Complexity: O(key + value): one LZ4 compression, one checksum, and (outside `.buffered`) one
    /// copy into the segment's mapping (one `pwrite` where writes are not mapped, see
    /// ``Options/memoryMapping``). Contiguous collections (`[UInt8]`, `ArraySlice`, `Data`) are
    /// not copied.
    @inlinable
    public func put(_ key: some Collection<UInt8>, _ value: some Collection<UInt8>) throws(CaskError) {
        try Self.withContiguousBytes(key) { (key) throws(CaskError) in
            try Self.withContiguousBytes(value) { (value) throws(CaskError) in
                _ = try write(.put, key: key, value: value)
            }
        }
    }

    /// Sets the UTF-8 bytes of `key` to `value`.
    @inlinable
    public func put(_ key: String, _ value: some Collection<UInt8>) throws(CaskError) {
        try put(key.utf8, value)
    }

    /// Sets `key` to `value` until `expiresAfter` from now (wall-clock time): from then on the key
    /// reads as absent (`get`, `contains`, `count`, `keys`), across reopens, and compaction drops its
    /// record. A later put without expiry makes the key permanent again. A negative duration
    /// expires at once; one past the last time a record holds (in 584 million years: `.seconds(.max)`)
    /// is that time.
    @inlinable
    public func put(_ key: some Collection<UInt8>, _ value: some Collection<UInt8>, expiresAfter duration: Duration) throws(CaskError) {
        try put(key, value, expiresAtMilliseconds: duration.expiry(after: Self.nowMilliseconds()))
    }

    @inlinable
    public func put(_ key: String, _ value: some Collection<UInt8>, expiresAfter duration: Duration) throws(CaskError) {
        try put(key.utf8, value, expiresAfter: duration)
    }

    /// Sets `key` to `value` until the wall-clock time `milliseconds` since 1970-01-01 UTC.
    @inlinable
    public func put(_ key: some Collection<UInt8>, _ value: some Collection<UInt8>, expiresAtMilliseconds milliseconds: UInt64) throws(CaskError) {
        try Self.withContiguousBytes(key) { (key) throws(CaskError) in
            try Self.withContiguousBytes(value) { (value) throws(CaskError) in
                _ = try write(.put, key: key, value: value, expiresAt: milliseconds)
            }
        }
    }

    /// Deletes `key` by appending a tombstone. Returns whether the key existed; deleting a key that
    /// reads as absent (missing, or its expiry passed) writes nothing and returns false, as
    /// ``contains(_:)`` would. Durable on return as for `put`.
    @inlinable @discardableResult
    public func delete(_ key: some Collection<UInt8>) throws(CaskError) -> Bool {
        try Self.withContiguousBytes(key) { (key) throws(CaskError) in
            try write(.delete, key: key, value: UnsafeRawBufferPointer(start: nil, count: 0))
        }
    }

    @inlinable @discardableResult
    public func delete(_ key: String) throws(CaskError) -> Bool {
        try delete(key.utf8)
    }

    /// Calls `body` with the bytes of `collection`, without copying when they are contiguous.
    @inlinable
    static func withContiguousBytes<C: Collection<UInt8>, R>(
        _ collection: C, _ body: (UnsafeRawBufferPointer) throws(CaskError) -> R
    ) throws(CaskError) -> R {
        var result: Result<R, CaskError>?
        collection.withContiguousStorageIfAvailable { buffer in
            result = Result { () throws(CaskError) in try body(UnsafeRawBufferPointer(buffer)) }
        }
        if let result { return try result.get() }
        return try Array(collection).withBytes(body)
    }

    /// Hands the writes waiting in the `.buffered` mode buffer to the OS: from then on they survive
    /// the process being killed (not a power cut: that is ``sync()``). Nothing to do in other modes.
    public func flush() throws(CaskError) {
        guard let writer else {
            if isClosed.load(ordering: .relaxed) { throw CaskError.closed(path: directory) }
            return
        }
        try writer.withLock { (w) throws(CaskError) in
            try w.checkUsable()
            try Self.flushBuffer(&w, bufferLimit: options.bufferSize, state: state)
        }
    }

    /// Makes every write that returned before this call durable (`fdatasync`), in any durability mode.
    /// Concurrent callers and `.fsync` writers share one `fdatasync`.
    public func sync() throws(CaskError) {
        guard let target = try syncTarget(writer), let writer else { return }
        try groupCommit.waitUntilDurable(target, force: true, writer: writer)
    }

    /// For a sync: flushes the write buffer and returns the end of what is written, or nil for a
    /// read-only store. Throws ``CaskError/closed(path:)``.
    func syncTarget(_ writer: Lock<StoreWriter>?) throws(CaskError) -> SyncPosition? {
        guard let writer else {
            if isClosed.load(ordering: .relaxed) { throw CaskError.closed(path: directory) }
            return nil
        }
        return try writer.withLock { (w) throws(CaskError) -> SyncPosition in
            try w.checkUsable()
            try Self.flushBuffer(&w, bufferLimit: options.bufferSize, state: state)
            if w.end > w.lastSyncedEnd {
                w.syncsInSegment += 1
                w.lastSyncedEnd = w.end
            }
            if w.active.hasHugePages && w.syncedTooOften && !w.syncSealFailed {
                // A store that syncs this often goes on in 4 KiB pages (see `hugePageSyncLimit`).
                // Best effort: if the next segment cannot be made, it goes on in this one (not
                // retried at each sync), and the sync below covers everything written either way.
                do { try rotate(&w) } catch { w.syncSealFailed = true }
            }
            return SyncPosition(segmentID: w.active.id, offset: w.end)
        }
    }

    // MARK: The write path

    /// Hands the write buffer to the OS (``StoreWriter/flush(bufferLimit:)``) and tells the
    /// segment table how much of the active segment that makes written
    /// (``SegmentTable/noteWritten(_:length:)``), so that gets read it on their fast path. Every
    /// flush outside a put or a rotation (which tell the table under the lock they already take)
    /// goes through here. Under the writer mutex; takes the index lock.
    static func flushBuffer(_ w: inout StoreWriter, bufferLimit: Int, state: ReadWriteLock<SharedState>) throws(CaskError) {
        try w.flush(bufferLimit: bufferLimit)
        let id = UInt32(w.active.id), length = w.flushed
        state.write { shared in shared.segments.noteWritten(id, length: length) }
    }

    func validate(key: UnsafeRawBufferPointer, valueLength: Int) throws(CaskError) {
        if key.isEmpty { throw CaskError.emptyKey }
        if key.count > Limits.maxKeyLength { throw CaskError.keyTooLong(length: key.count, limit: Limits.maxKeyLength) }
        if valueLength > options.maxValueSize { throw CaskError.valueTooLarge(length: valueLength, limit: options.maxValueSize) }
    }

    /// Appends one put or delete and points the index at it. Returns false for a delete of a
    /// missing key (which writes nothing).
    @usableFromInline @discardableResult
    func write(_ type: RecordType, key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, expiresAt: UInt64? = nil) throws(CaskError) -> Bool {
        try validate(key: key, valueLength: value.count)
        return try append(SingleWrite(type: type, key: key, value: value, expiresAt: expiresAt))
    }

    /// The one write path, for a put, a delete and a batch: under the writer mutex, seals the
    /// active segment if the records might not fit, encodes them (a batch's as members, then its
    /// commit record) into the write buffer, flushes it (outside `.buffered` mode, or when full;
    /// on failure the records are rolled back and nothing changed), points the index at them under
    /// one hold of its lock (a batch seen whole by lock-free gets too: `batchVersion`), and tells
    /// observers; then, in `.fsync` mode, waits for their sync with the other writers
    /// (``GroupCommit``). Returns false when it wrote nothing (``WriteRecords/isNoOp(in:)``).
    func append(_ records: some WriteRecords) throws(CaskError) -> Bool {
        guard let writer else {
            throw isClosed.load(ordering: .relaxed) ? CaskError.closed(path: directory) : CaskError.readOnly(path: directory)
        }
        guard options.durability == .fsync else { return try appendRecords(records, writer) != nil }
        return try groupCommit.append(writer: writer) { () throws(CaskError) in try appendRecords(records, writer) } != nil
    }

    /// The part of ``append(_:)`` under the writer mutex, without the wait for a sync: returns
    /// where the records end (the position to sync), or nil when it wrote nothing.
    func appendRecords(_ records: some WriteRecords, _ writer: Lock<StoreWriter>) throws(CaskError) -> SyncPosition? {
        let durability = options.durability
        return try writer.withLock { (w) throws(CaskError) -> SyncPosition? in
            try w.checkUsable()
            if records.isNoOp(in: state) { return nil }
            let isBatch = records.isBatch
            try w.checkSequenceNumbersLeft(records.count + (isBatch ? 1 : 0), directory: directory)
            if w.mustSealBeforeWriting { try rotate(&w) }
            if (w.dictionaryForNewSegments?.id ?? 0) != w.active.dictionary.id, !w.dictionarySealFailed {
                // A new dictionary (or none, dictionaries being off): seal the active segment so
                // that the next one names it. If that fails the writer goes on in this one; the
                // segment's natural seal retries.
                do throws(CaskError) { try rotate(&w) } catch { w.dictionarySealFailed = true }
                try w.checkUsable()  // a failed sync while sealing fails the store
            }
            if w.end + records.worstCaseLength > options.maxSegmentSize && w.end > w.active.contentStart {
                try rotate(&w)
            } else if w.wantsKeyPrefixSeal() {
                // If that fails the writer goes on in this one, as for a dictionary.
                do throws(CaskError) { try rotate(&w) } catch {}
                try w.checkUsable()
            }
            let bufferStart = w.buffer.count, segmentEnd = w.end
            let firstSeq = w.nextSeq
            let segmentID = UInt32(w.active.id)
            let dictionary = w.activeDictionary
            let cipher = w.active.sealing?.cipher
            let keyPrefix = w.active.keyPrefixBytes  // the active segment outlives the write
            // A batch's locations go in `w.locations`; a put's or delete's is `single`.
            var single = RecordLocation(segmentID: segmentID, offset: 0, length: 0)
            if isBatch { w.locations.removeAll(keepingCapacity: true) }
            records.forEach { position, type, key, value, expiresAt in
                // The index's misses then overlap the compression and the write.
                if !isBatch { w.index.prefetch(key) }
                if type == .put && w.sampler != nil { w.sampler!.add(value) }
                if w.choosesKeyPrefixes { w.keyPrefixes.note(key) }
                let length = w.encoder.append(
                    type: type, seq: firstSeq + UInt64(position), key: key, value: value, expiresAt: expiresAt, batchMember: isBatch,
                    dictionary: dictionary, cipher: cipher, offset: w.end, keyPrefix: keyPrefix, to: &w.buffer)
                if w.drift != nil && type == .put && value.count >= RecordEncoder.minimumCompressibleLength && dictionary != nil,
                   w.drift!.note(valueLength: value.count, storedLength: w.encoder.lastStoredLength) {
                    w.drift = nil
                    w.sampler = DictionarySampler(target: options.dictionaries.trainingSampleBytes)
                }
                single = RecordLocation(segmentID: segmentID, offset: UInt32(w.end), length: UInt32(length))
                if isBatch { w.locations.append(single) }
                w.end += Int64(length)
            }
            let commitSeq = firstSeq + UInt64(records.count)
            var commitLength = 0, commitValueLength = 0
            if isBatch {
                // The commit record: the batch's first seq as its key, its member count as its value.
                var commitValue = ByteBuffer(capacity: 10)
                commitValue.append(varint: UInt64(records.count))
                commitValueLength = commitValue.count
                commitLength = withUnsafeBytes(of: firstSeq.littleEndian) { key in
                    commitValue.withUnsafeBytes { value in
                        w.encoder.append(type: .batch, seq: commitSeq, key: key, value: value, expiresAt: nil, cipher: cipher, offset: w.end, to: &w.buffer)
                    }
                }
                w.end += Int64(commitLength)
            }
            if durability != .buffered || w.buffer.count >= options.bufferSize {
                do throws(CaskError) { try w.flush(bufferLimit: options.bufferSize) } catch {
                    w.buffer.count = bufferStart
                    w.end = segmentEnd
                    throw error
                }
            }
            w.nextSeq = isBatch ? commitSeq + 1 : commitSeq
            let written = w.flushed
            state.write { shared in
                shared.segments.noteWritten(segmentID, length: written)
                if isBatch {
                    // Gets without the lock that overlap the entries' changes fall back to the lock.
                    shared.batchVersion.add(1, ordering: .sequentiallyConsistent)
                    atomicMemoryFence(ordering: .releasing)
                }
                records.forEach { position, type, key, value, expiresAt in
                    let location = isBatch ? w.locations[position] : single
                    let old = type == .put ? shared.index.upsert(key, location) : shared.index.remove(key)
                    shared.expiries.set(key, expiresAt: type == .put ? expiresAt : nil, seq: firstSeq + UInt64(position))
                    if type == .put && expiresAt != nil { shared.noteExpiries() }
                    if let old { shared.stats.update(UInt64(old.segmentID)) { $0.removeLive(bytes: old.length) } }
                    shared.stats.update(UInt64(segmentID)) {
                        $0.append(seq: firstSeq + UInt64(position), valueLength: value.count, length: Int(location.length), live: type == .put)
                    }
                }
                if isBatch {
                    shared.stats.update(UInt64(segmentID)) { $0.append(seq: commitSeq, valueLength: commitValueLength, length: commitLength, live: false) }
                    shared.batchVersion.add(1, ordering: .releasing)
                }
            }
            records.forEach { position, type, key, _, expiresAt in
                publish(
                    type == .put ? .put : .delete, key: key, seq: firstSeq + UInt64(position), expiresAt: expiresAt,
                    location: isBatch ? w.locations[position] : single)
            }
            if options.automaticCompaction && options.idleCompactionDelay > 0 { watchForCompaction(&w, appending: w.end - segmentEnd) }
            if w.sampler?.isFull == true { startTraining(&w) }
            return SyncPosition(segmentID: w.active.id, offset: w.end)
        }
    }

    /// Seals the active segment and starts the next one (``StoreWriter/rotate(state:)``), then
    /// writes the sealed segment's hint in the background and, with `followUp`, considers a
    /// compaction there (`compact()` seals without it: it compacts at once). Under the writer mutex.
    func rotate(_ w: inout StoreWriter, followUp: Bool = true) throws(CaskError) {
        let (sealed, length) = try w.rotate(state: state)
        if options.writeHints { scheduleHint(for: sealed, length: length) }
        guard followUp else { return }
        scheduleCompactionIfDue()
    }

    /// Writes a segment's hint file on the low-priority thread (``LowPriorityThread``; `close()`
    /// waits for it).
    func scheduleHint(for file: SegmentFile, length: Int64) {
        // Captures the store's parts, not the store: its deinit (which waits for this group) must
        // never run on the thread that the group waits for.
        let directory = directory, fileSystem = fileSystem, writer = writer, groupCommit = groupCommit, encryption = encryption
        // At a low priority: while the application keeps every core busy, a hint can wait (it
        // only makes the next open faster), and a reader or a writer should not.
        LowPriorityThread.shared.async(group: backgroundWork) {
            Self.writeHint(
                for: file, length: length, directory: directory, encryption: encryption, fileSystem: fileSystem, writer: writer,
                groupCommit: groupCommit)
        }
    }

    /// Writes a sealed segment's hint file (none for a retired segment).
    static func writeHint(
        for file: SegmentFile, length: Int64, directory: String, encryption: StoreEncryption?, fileSystem: any FileSystem,
        writer: Lock<StoreWriter>?, groupCommit: GroupCommit
    ) {
        // A failed hint costs only open time later; the segment is scanned instead.
        do throws(CaskError) {
            _ = try HintWriter.write(for: file, length: length, directory: directory, encryption: encryption, fileSystem: fileSystem)
        } catch {
            // But a failed fdatasync may have dropped the segment's data, and the kernel reports
            // that only once: a later sync of the segment would succeed. Remember it.
            if case .syncFailed = error { GroupCommit.noteFailure(error, writer: writer, groupCommit: groupCommit) }
        }
    }

    // MARK: Buffered mode

    func startFlushTimer() {
        let timer = DispatchSource.makeTimerSource(queue: background)
        // At most a day: any longer is "flush when the buffer fills" all the same, and a larger
        // count of microseconds would not fit an Int.
        let interval = DispatchTimeInterval.microseconds(Int(min(options.flushInterval, 86_400) * 1_000_000))
        timer.schedule(deadline: .now() + interval, repeating: interval)
        // Captures the writer, not the store: the store's deinit must never run on this queue.
        let writer = writer, state = state, bufferSize = options.bufferSize
        timer.setEventHandler {
            // A failed flush keeps the buffer; the next write or sync reports the error.
            writer?.withLock { w in
                guard !w.closed, w.failure == nil else { return }
                try? CaskStore.flushBuffer(&w, bufferLimit: bufferSize, state: state)
            }
        }
        timer.resume()
        flushTimer.withLock { $0 = DispatchSourceTimerBox(timer: timer) }
    }
}

extension SegmentStats {
    mutating func append(seq: UInt64, valueLength: Int, length: Int, live: Bool) {
        noteRecord(seq: seq, valueLength: valueLength)
        fileBytes += Int64(length)
        if live {
            liveBytes += Int64(length)
            liveRecords += 1
        }
    }

    mutating func removeLive(bytes: UInt32) {
        liveBytes -= Int64(bytes)
        liveRecords -= 1
    }
}
