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
    /// ``Options/memoryMappedReads``). Contiguous collections (`[UInt8]`, `ArraySlice`, `Data`) are
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
    /// record. A later put without expiry makes the key permanent again.
    @inlinable
    public func put(_ key: some Collection<UInt8>, _ value: some Collection<UInt8>, expiresAfter duration: Duration) throws(CaskError) {
        try put(key, value, expiresAtMilliseconds: Self.nowMilliseconds() + duration.clampedMilliseconds)
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

    /// Deletes `key` by appending a tombstone. Returns whether the key existed; deleting a missing
    /// key writes nothing. Durable on return as for `put`.
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
            if isClosed.load(ordering: .relaxed) { throw CaskError.closed }
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
        guard let writer else {
            if isClosed.load(ordering: .relaxed) { throw CaskError.closed }
            return
        }
        let target = try writer.withLock { (w) throws(CaskError) -> SyncPosition in
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
        try waitUntilDurable(target, force: true)
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

    /// Appends one record and points the index at it. Returns false for a delete of a missing key.
    @usableFromInline @discardableResult
    func write(_ type: RecordType, key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, expiresAt: UInt64? = nil) throws(CaskError) -> Bool {
        try validate(key: key, valueLength: value.count)
        guard let writer else {
            throw isClosed.load(ordering: .relaxed) ? CaskError.closed : CaskError.readOnly
        }
        let durability = options.durability
        let target = try appendDurably { () throws(CaskError) -> SyncPosition? in try writer.withLock { (w) throws(CaskError) -> SyncPosition? in
            try w.checkUsable()
            if type == .delete, state.read({ $0.index.lookup(key) }) == nil { return nil }
            try w.checkSequenceNumbersLeft(1, directory: directory)
            let worstCase = Int64(Limits.maxRecordHeaderLength + key.count + value.count)
            if w.end + worstCase > options.maxSegmentSize && w.end > Int64(SegmentHeader.length) {
                try rotate(&w)
            }
            // The index's misses then overlap the compression and the write.
            w.index.prefetch(key)
            let start = w.buffer.count
            let seq = w.nextSeq
            let length = w.encoder.append(type: type, seq: seq, key: key, value: value, expiresAt: expiresAt, to: &w.buffer)
            let offset = w.end
            w.end += Int64(length)
            if durability != .buffered || w.buffer.count >= options.bufferSize {
                do throws(CaskError) { try w.flush(bufferLimit: options.bufferSize) } catch {
                    w.buffer.count = start
                    w.end = offset
                    throw error
                }
            }
            w.nextSeq += 1
            let location = RecordLocation(segmentID: UInt32(w.active.id), offset: UInt32(offset), length: UInt32(length))
            let segmentID = w.active.id, written = w.flushed
            state.write { shared in
                shared.segments.noteWritten(location.segmentID, length: written)
                let old = type == .put ? shared.index.upsert(key, location) : shared.index.remove(key)
                shared.expiries.set(key, expiresAt: type == .put ? expiresAt : nil)
                if let old { shared.stats.update(UInt64(old.segmentID)) { $0.removeLive(bytes: old.length) } }
                shared.stats.update(segmentID) { $0.append(seq: seq, valueLength: value.count, length: length, live: type == .put) }
            }
            publish(type == .put ? .put : .delete, key: key, seq: seq, expiresAt: expiresAt, location: location)
            return SyncPosition(segmentID: w.active.id, offset: w.end)
        } }
        return target != nil
    }

    /// Seals the active segment and starts the next one. Runs under the writer mutex.
    /// The sealed segment's hint is written in the background; writing it also syncs the segment, so
    /// that in `.os` and `.buffered` modes sealed segments reach the disk in the order they were
    /// sealed. `followUp`: consider a compaction, in the background (`compact()` seals without it:
    /// it compacts at once).
    func rotate(_ w: inout StoreWriter, followUp: Bool = true) throws(CaskError) {
        try w.flush(bufferLimit: options.bufferSize)
        let sealed = w.active
        // The sealed segment ends at its last record before the next one exists (and, in `.fsync`
        // mode, before its sync): only the newest segment can have reserved space left after a crash.
        try w.releaseReservation()
        if options.durability == .fsync {
            do { try fileSystem.fdatasync(sealed.fd) } catch {
                let failure = CaskError.syncFailed(path: sealed.path, errno: error)
                w.failure = failure
                throw failure
            }
        }
        let next = try StoreWriter.createSegment(
            id: w.nextSegmentID, baseSeq: w.nextSeq, directory: directory, fileSystem: fileSystem,
            mapLength: options.segmentMapLength, writable: writesThroughMapping,
            hugePages: options.hugePageSegments && !w.syncedTooOften)
        // Only now: if the next segment could not be created, the writer goes on in this one.
        sealed.endMappedWrites()
        w.nextSegmentID += 1
        if options.durability != .fsync { w.unsyncedSealed.append(sealed) }
        w.start(next, length: next.writtenLength.load(ordering: .relaxed))
        let sealedLength = sealed.writtenLength.load(ordering: .relaxed)
        state.write { shared in
            shared.segments.noteWritten(UInt32(sealed.id), length: sealedLength)
            shared.segments[UInt32(next.id)] = next
            shared.stats.update(sealed.id) { $0.sealed = true }
            var stats = SegmentStats(id: next.id)
            stats.fileBytes = w.end
            shared.stats.append(stats)
        }
        if options.writeHints { scheduleHint(for: sealed, length: sealedLength) }
        guard followUp else { return }
        scheduleCompactionIfDue()
    }

    /// Writes a segment's hint file on the background queue (`close()` waits for it).
    func scheduleHint(for file: SegmentFile, length: Int64) {
        // Captures the store's parts, not the store: its deinit (which waits for this group) must
        // never run on this queue.
        let directory = directory, fileSystem = fileSystem, writer = writer, syncState = syncState
        background.async(group: backgroundWork) {
            // A failed hint costs only open time later; the segment is scanned instead.
            do throws(CaskError) { _ = try HintWriter.write(for: file, length: length, directory: directory, fileSystem: fileSystem) } catch {
                // But a failed fdatasync may have dropped the segment's data, and the kernel reports
                // that only once: a later sync of the segment would succeed. Remember it.
                if case .syncFailed = error { Self.noteSyncFailure(error, writer: writer, syncState: syncState) }
            }
        }
    }

    /// From now on writes, syncs and close fail with `failure`.
    static func noteSyncFailure(_ failure: CaskError, writer: Lock<StoreWriter>?, syncState: ConditionLock<SyncState>) {
        writer?.withLock { w in if w.failure == nil { w.failure = failure } }
        syncState.withLock { sync, waiter in
            if sync.failure == nil { sync.failure = failure }
            waiter.signal()  // a leader gathering writers need not wait any longer
        }
    }

    // MARK: Group commit

    /// Runs `append` (a write under the writer mutex, returning where its records end, or nil when it
    /// wrote nothing), then, in `.fsync` mode, waits until they are durable. Meanwhile the writer
    /// counts as arriving, so that a sync leader starting then waits for it and covers it too.
    @inline(__always)
    func appendDurably(_ append: () throws(CaskError) -> SyncPosition?) throws(CaskError) -> SyncPosition? {
        guard options.durability == .fsync else { return try append() }
        syncState.withLock { sync, _ in sync.arriving += 1 }
        /// The writer is not coming after all: nothing written, or the write failed.
        func withdraw() {
            syncState.withLock { sync, waiter in
                sync.arriving -= 1
                Self.wakeGatheringLeader(sync, waiter)
            }
        }
        let target: SyncPosition?
        do throws(CaskError) { target = try append() } catch {
            withdraw()
            throw error
        }
        guard let target else {
            withdraw()
            return nil
        }
        try waitUntilDurable(target, force: false, arriving: true)
        return target
    }

    /// Returns once everything up to `target` is on stable storage. The first waiter becomes the
    /// leader and runs one `fdatasync` for all; the others wait for it. `force` always syncs
    /// (for `sync()` in modes whose writes do not track durability). `arriving`: the caller was
    /// counted as arriving (``appendDurably(_:)``) and now waits as a writer.
    func waitUntilDurable(_ target: SyncPosition, force: Bool, arriving: Bool = false) throws(CaskError) {
        guard let writer else {
            assert(!arriving, "only a writable store counts writers in")
            return
        }
        var needsOwnSync = force, arriving = arriving
        var registered = false
        /// The writer stops waiting (a leader gathering writers may be waiting for that).
        func leave(_ sync: inout SyncState, _ waiter: ConditionLock<SyncState>.Waiter) {
            guard registered else { return }
            registered = false
            if let position = sync.waiting.firstIndex(of: target) { sync.waiting.remove(at: position) }
            Self.wakeGatheringLeader(sync, waiter)
        }
        while true {
            let decision: SyncDecision = syncState.withLock { sync, waiter in
                if arriving {
                    arriving = false
                    sync.arriving -= 1
                    sync.waiting.append(target)
                    registered = true
                    Self.wakeGatheringLeader(sync, waiter)
                }
                while true {
                    if let failure = sync.failure {
                        leave(&sync, waiter)
                        return .failed(failure)
                    }
                    if !needsOwnSync && sync.synced >= target {
                        leave(&sync, waiter)
                        return .done
                    }
                    if !sync.syncing { break }
                    waiter.wait()
                }
                sync.syncing = true
                Self.gatherArrivingWriters(&sync, waiter)
                return .lead
            }
            switch decision {
            case .done: return
            case .failed(let failure): throw failure
            case .lead: break
            }
            let result = syncEverythingWritten(writer)
            syncState.withLock { sync, waiter in
                sync.syncing = false
                switch result {
                case .success(let (position, duration)):
                    if sync.synced < position { sync.synced = position }
                    sync.lastSyncNanoseconds = duration
                case .failure(let failure):
                    sync.failure = failure
                    leave(&sync, waiter)
                }
                waiter.broadcast()
            }
            switch result {
            case .success: needsOwnSync = false
            case .failure(let failure):
                writer.withLock { $0.failure = failure }
                throw failure
            }
        }
    }

    /// Wakes the leader gathering writers once the last of them has arrived (or left). Only then:
    /// each wake-up costs the leader a context switch.
    static func wakeGatheringLeader(_ sync: borrowing SyncState, _ waiter: ConditionLock<SyncState>.Waiter) {
        if sync.syncing && !sync.writersOnTheirWay { waiter.signal() }
    }

    /// A new leader waits for the writers on their way — those that have begun a write, and those
    /// the last sync covered that have not left yet (in a loop of durable writes each is back with
    /// its next write within microseconds) — so that its `fdatasync` covers them too, rather than
    /// each sync covering about half of the writers. It waits at most half as long as the last sync
    /// took (and at most 1 ms): a lone writer never waits, and nobody waits for a writer that does
    /// not come back.
    static func gatherArrivingWriters(_ sync: inout SyncState, _ waiter: ConditionLock<SyncState>.Waiter) {
        guard sync.writersOnTheirWay else { return }
        let deadline = ConditionLock<SyncState>.monotonicNanoseconds() + min(sync.lastSyncNanoseconds / 2, 1_000_000)
        while sync.writersOnTheirWay && sync.failure == nil && ConditionLock<SyncState>.monotonicNanoseconds() < deadline {
            waiter.waitForSignal(untilNanoseconds: deadline)
        }
    }

    enum SyncDecision {
        case done, lead
        case failed(CaskError)
    }

    /// The group-commit leader's work: `fdatasync` every segment with unsynced writes. Returns the
    /// position synced and how long the `fdatasync`s took.
    private func syncEverythingWritten(_ writer: Lock<StoreWriter>) -> Result<(SyncPosition, UInt64), CaskError> {
        let (active, position, sealed, failure) = writer.withLock { w in
            let sealed = w.unsyncedSealed
            w.unsyncedSealed.removeAll()
            return (w.active, SyncPosition(segmentID: w.active.id, offset: w.flushed), sealed, w.failure)
        }
        // After a failed sync (say, sealing a segment) a new one may succeed although the failed one
        // dropped data written before it: never report durability past a failure.
        if let failure { return .failure(failure) }
        let start = ConditionLock<SyncState>.monotonicNanoseconds()
        for file in sealed + [active] {
            do throws(Errno) { try fileSystem.fdatasync(file.fd) } catch {
                return .failure(CaskError.syncFailed(path: file.path, errno: error))
            }
        }
        return .success((position, ConditionLock<SyncState>.monotonicNanoseconds() - start))
    }

    // MARK: Buffered mode

    func startFlushTimer() {
        let timer = DispatchSource.makeTimerSource(queue: background)
        let interval = DispatchTimeInterval.microseconds(Int(options.flushInterval * 1_000_000))
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
