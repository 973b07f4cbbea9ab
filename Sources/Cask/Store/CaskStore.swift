import Dispatch
import Synchronization

/// An embedded, append-only, log-structured key-value store in one directory.
///
/// Concurrency rules:
/// 1. A store is `Sendable`: call it from any thread or task. Reads run in parallel with each other
///    and with writes: a get of a small value takes no lock (``ReaderRegistry``), other reads take
///    a shared lock for one index lookup, then read without it.
/// 2. Writes are serialized by one writer mutex, in the order they acquire it; each write gets the
///    next sequence number, which decides "newest" everywhere (recovery, compaction).
/// 3. In `.fsync` mode a write waits for durability *outside* the writer mutex, so concurrent writers
///    share one `fdatasync` (group commit). The writer that leads a sync first waits, at most half
///    as long as the last sync took, for writers on their way, so that one sync covers them all.
/// 4. One process writes a store at a time (an advisory `flock` on `DIR/LOCK`); read-only opens take
///    no lock and see the store as it was when they opened, until ``refresh()``.
///
/// Durability on return from a write is the store's ``Durability``. Every record is checksummed;
/// a read never returns bytes that fail their checksum.
public final class CaskStore: Sendable {
    /// The store directory.
    public let directory: String
    public let options: Options
    /// What opening the store found: segments, records, cuts made, damage skipped.
    public let recoveryReport: RecoveryReport

    let fileSystem: any FileSystem
    /// Whether the writer stores records through the active segment's mapping (decided at open).
    let writesThroughMapping: Bool
    let lock: StoreLock?
    let state: ReadWriteLock<SharedState>
    /// Nil for a read-only store.
    let writer: Lock<StoreWriter>?
    let groupCommit: GroupCommit
    let background = DispatchQueue(label: "cask.background")
    let backgroundWork = DispatchGroup()
    let isClosed = Atomic(false)
    let flushTimer = Mutex<DispatchSourceTimerBox?>(nil)
    /// The live `changes(…)` streams.
    let observers = ObserverRegistry()
    /// When the timer that gives the next expiry notices fires (nil: none is set).
    let expiryTimer = Lock<UInt64?>(nil)
    /// Held for the whole of a compaction: one runs at a time, and `close()` waits for it.
    let compactionGate = Lock(false)
    /// The object API's coder pools and decoded-object cache (Objects/).
    let objects: ObjectSupport
    /// A read-only store: where `refresh()` reads each segment on from. Held for a whole refresh.
    let refreshEnds: Lock<[UInt64: Int64]>
    /// The dictionaries the store's segments name, and the one new records are compressed with.
    let dictionaries: DictionaryCatalog
    /// The store's encryption: its key, algorithm and id (nil: the store is not encrypted).
    let encryption: StoreEncryption?

    /// What readers and writers share, reached only through `state`'s lock (hence the unchecked
    /// exclusivity: the lock already rules out overlapping access).
    ///
    /// A class, so that a read borrows it in place: the lock lends a struct as a copy, which costs
    /// a retain and a release of each of its references on every get.
    final class SharedState {
        let index: KeyIndex
        let segments: SegmentTable
        @exclusivity(unchecked) var stats: SegmentAccounting
        /// Expiry times of the keys whose latest record has one.
        @exclusivity(unchecked) var expiries: ExpiryTable
        @exclusivity(unchecked) var closed = false
        /// Odd while a batch of several operations is applied to the index (under the exclusive
        /// lock), even otherwise: gets without the lock check it on both sides of their probe
        /// (``CaskStore/copyValueWithoutLock(key:into:)``), so that they too see a batch whole.
        let batchVersion = Atomic<UInt64>(0)
        /// Set once `expiries` held a key (``noteExpiries()``), never cleared: the one thing about
        /// expiries that listings without the lock may ask (they filter expired keys only if it is
        /// set). After `batchVersion`, which every get loads: stored once in a store's life.
        let expiriesUsed: Atomic<Bool>

        /// Sets ``expiriesUsed`` if `expiries` holds a key: after every change that may give a key
        /// an expiry, under the exclusive lock.
        @inline(__always)
        func noteExpiries() {
            if !expiries.isEmpty && !expiriesUsed.load(ordering: .relaxed) { expiriesUsed.store(true, ordering: .releasing) }
        }

        init(index: KeyIndex, segments: SegmentTable, stats: SegmentAccounting, expiries: ExpiryTable) {
            self.index = index
            self.segments = segments
            self.stats = stats
            self.expiries = expiries
            expiriesUsed = Atomic(!expiries.isEmpty)
        }
    }

    // MARK: Opening and closing

    /// Opens (or creates) the store in `directory` and recovers its index.
    ///
    /// Complexity: O(records) on the first open after a crash; O(keys) read from hint files otherwise.
    /// Throws ``CaskError/notAStore(path:)`` for a writable open with `createIfMissing` false of a
    /// directory that holds no store,
    /// ``CaskError/locked(path:holderPID:)`` when another process has it open for writing
    /// (``CaskError/alreadyOpen(path:)`` when another `CaskStore` of this one has),
    /// ``CaskError/invalidArgument(name:reason:)`` for an option out of range,
    /// ``CaskError/directoryMissing(path:)``, ``CaskError/notWritable(path:errno:)``,
    /// ``CaskError/unsupportedFormat(path:version:)`` or an I/O error. A torn tail is cut and
    /// damaged records are skipped — both listed in ``recoveryReport`` — never a reason to fail.
    public static func open(at directory: String, options: Options = Options()) throws(CaskError) -> CaskStore {
        try CaskStore(directory: directory, options: options)
    }

    private init(directory: String, options: Options) throws(CaskError) {
        let fileSystem = options.fileSystem
        try options.validate()
        guard !directory.isEmpty else {
            throw .invalidArgument(name: "directory", reason: "is empty; give the store's directory, such as \"./store\"")
        }
        self.directory = directory
        self.options = options
        self.fileSystem = fileSystem
        groupCommit = GroupCommit(fileSystem: fileSystem)
        objects = ObjectSupport(options.objects)

        switch fileSystem.isDirectory(directory) {
        case .some(true):
            // Before the lock file is made: an open that must not create a store makes nothing there.
            if !options.createIfMissing && !options.readOnly, try !StoreDirectory.holdsStore(at: directory, fileSystem: fileSystem) {
                throw CaskError.notAStore(path: directory)
            }
        case .some(false):
            throw CaskError.io(operation: "open store", path: directory, errno: .notDirectory)
        case .none:
            guard options.createIfMissing, !options.readOnly else {
                // Missing, or there but not to be reached: a loop of links, a parent this process may not search.
                do throws(Errno) { try fileSystem.probeDirectory(directory) } catch {
                    if error != .noEntry { throw CaskError.io(operation: "open store directory", path: directory, errno: error) }
                }
                throw CaskError.directoryMissing(path: directory)
            }
            let parent = Self.parent(of: directory)
            var made = false
            do throws(Errno) {
                try fileSystem.makeDirectory(directory, mode: 0o700)
                made = true
            } catch {
                // What stops a creation is the parent: name it.
                if error == .noEntry { throw CaskError.parentMissing(path: directory, parent: parent) }
                if error == .permissionDenied || error == .readOnlyFileSystem { throw CaskError.notWritable(path: parent, errno: error) }
                if error != .exists { throw CaskError.from(error, operation: "create directory", path: directory) }
                // The name exists but is no directory to stat: a link to nothing or a loop of links
                // (or a directory another process made meanwhile, which opens).
                do throws(Errno) { try fileSystem.probeDirectory(directory) } catch {
                    throw CaskError.io(operation: "open store directory", path: directory, errno: error)
                }
            }
            if made {
                do throws(Errno) { try fileSystem.syncDirectory(parent) } catch {
                    throw CaskError.from(error, operation: "sync the directory that holds the store", path: parent)
                }
            }
        }
        if !options.readOnly {
            guard fileSystem.isWritable(directory) else { throw CaskError.notWritable(path: directory, errno: .permissionDenied) }
            lock = try StoreLock(directory: directory, fileSystem: fileSystem)
        } else {
            lock = nil
        }
        writesThroughMapping = options.writesThroughMapping(in: directory)

        let encryption = try StoreEncryption.open(
            directory: directory, requested: options.encryption, creating: !options.readOnly, fileSystem: fileSystem)
        self.encryption = encryption
        let dictionaries = DictionaryCatalog(directory: directory, fileSystem: fileSystem, encryption: encryption)
        self.dictionaries = dictionaries
        var recovered = try StoreRecovery(
            directory: directory, fileSystem: fileSystem, writable: !options.readOnly, maxSegmentSize: options.maxSegmentSize,
            mapReads: options.memoryMapping, mapWrites: writesThroughMapping, hugePages: options.hugePageSegments,
            dictionaries: dictionaries, encryption: encryption
        ).run()
        recoveryReport = recovered.report
        refreshEnds = Lock(options.readOnly ? recovered.contentEnds : [:])

        if options.readOnly {
            writer = nil
        } else {
            // The newest dictionary is the current one; those no segment names are deleted.
            if options.dictionaries.enabled { dictionaries.chooseCurrent(among: recovered.dictionaryFiles) }
            try dictionaries.removeUnused(listed: recovered.dictionaryFiles, named: Set(recovered.segments.values.map(\.dictionary.id)))
            let current = options.dictionaries.enabled ? dictionaries.current : nil
            let active: SegmentFile
            if let recoveredActive = recovered.active {
                active = recoveredActive
            } else {
                active = try StoreWriter.createSegment(
                    id: recovered.nextSegmentID, baseSeq: recovered.nextSeq, directory: directory, fileSystem: fileSystem,
                    mapLength: options.segmentMapLength, writable: writesThroughMapping, hugePages: options.hugePageSegments,
                    dictionary: current, encryption: encryption)
                recovered.nextSegmentID += 1
                recovered.segments[active.id] = active
                var stats = SegmentStats(id: active.id)
                stats.dictionaryID = active.dictionary.loaded?.id
                stats.headerBytes = active.contentStart
                stats.fileBytes = active.contentStart
                recovered.stats[active.id] = stats
            }
            var newWriter = StoreWriter(
                active: active, length: active.writtenLength.load(ordering: .relaxed), nextSeq: recovered.nextSeq,
                nextSegmentID: recovered.nextSegmentID, options: options, mapsNewSegments: writesThroughMapping, fileSystem: fileSystem,
                directory: directory, index: recovered.index, encryption: encryption)
            // An encrypted store goes on writing in a segment of its own: records an earlier open
            // sealed in the one it kept may have been lost in a crash, and a place is never sealed twice.
            newWriter.mustSealBeforeWriting = encryption != nil && recovered.active != nil
            if let current { newWriter.adopt(current, expectedRatio: current.ratio, options: options.dictionaries) }
            if options.dictionaries.enabled && current == nil {
                newWriter.sampler = DictionarySampler(target: options.dictionaries.trainingSampleBytes)
            }
            writer = Lock(newWriter)
        }
        let segments = SegmentTable()
        segments.add(recovered.segments.map { (UInt32($0.key), $0.value) })
        state = ReadWriteLock(SharedState(
            index: recovered.index, segments: segments, stats: SegmentAccounting(recovered.stats.values), expiries: recovered.expiries))

        if !options.readOnly {
            if options.writeHints {
                for id in recovered.segmentsNeedingHints {
                    if let file = recovered.segments[id] { scheduleHint(for: file, length: file.writtenLength.load(ordering: .relaxed)) }
                }
            }
            if options.durability == .buffered && options.flushInterval > 0 { startFlushTimer() }
            if let smallStore = smallStoreCompaction {
                // A small store left mostly dead (the app was killed before its idle check) is
                // compacted once this open has been idle for the delay.
                writer?.withLock { w in
                    if smallStore.compactor.smallStoreIsDue(floor: CompactionWatch.idleFloor) { smallStore.armIdleCheck(&w) }
                }
            }
        }
    }

    /// Flushes and syncs everything written, writes the active segment's hint file, waits for
    /// background work, and releases the lock. Later calls on the store throw
    /// ``CaskError/closed(path:)``. Calling `close()` again does nothing.
    ///
    /// When the disk is too full for the writes still in the buffer (`.buffered`), it throws
    /// ``CaskError/diskFull(path:)`` and the store stays open with all of them: free space and
    /// close again (or `sync()`), and nothing acknowledged is lost. If the final flush or sync fails
    /// otherwise the error is thrown, and the store is closed all the same. A hint file that cannot
    /// be written is no error: everything is synced, and the next open scans the segment instead.
    public func close() throws(CaskError) {
        // A buffer the disk has no room for: thrown before anything is closed, so that no other
        // call sees the store closed meanwhile. (A write that slips in after this is caught below.)
        if let writer, !isClosed.load(ordering: .acquiring) {
            let full = writer.withLock { (w) -> CaskError? in
                guard !w.closed, w.failure == nil else { return nil }
                do throws(CaskError) { try w.flush(bufferLimit: options.bufferSize) } catch {
                    if case .diskFull = error { return error }
                    return nil  // the flush below meets it again, and closes
                }
                return nil
            }
            if let full { throw full }
        }
        guard !isClosed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        var firstError: CaskError?
        if let writer {
            let closing = writer.withLock { (w) -> Closing in
                guard w.failure == nil else {
                    // The store stopped writing after a failure: what it buffered or wrote since may be lost.
                    w.closed = true
                    firstError = w.failure
                    return .failed
                }
                do throws(CaskError) {
                    try w.flush(bufferLimit: options.bufferSize)
                } catch .diskFull(let path) {
                    // The flush rolled back what it could not write; the buffer keeps it.
                    return .keptOpen(.diskFull(path: path))
                } catch {
                    w.closed = true
                    firstError = error
                    return .failed
                }
                defer { w.closed = true }
                do throws(CaskError) {
                    // The active segment ends at its last record again (before the sync below).
                    try w.releaseReservation()
                    // Oldest first, as in a sync: a power cut in between must not leave newer records
                    // on disk without older ones.
                    for file in w.unsyncedSealed + [w.active] {
                        do throws(Errno) { try fileSystem.fdatasync(file.fd) } catch {
                            throw CaskError.syncFailed(path: file.path, errno: error)
                        }
                    }
                    w.unsyncedSealed.removeAll()
                } catch {
                    firstError = error
                    return .failed
                }
                return .closed(active: w.active, length: w.end)
            }
            if case .keptOpen(let error) = closing {
                isClosed.store(false, ordering: .releasing)
                throw error
            }
            if case .closed(let active, let length) = closing, options.writeHints, length > active.contentStart {
                // Only open time rides on it, as on a hint written in the background.
                _ = try? HintWriter.write(for: active, length: length, directory: directory, encryption: encryption, fileSystem: fileSystem)
            }
        }
        flushTimer.withLock { box in
            box?.timer.cancel()
            box = nil
        }
        compactionGate.withLock { _ in }  // a running compaction finishes its swap first
        observers.finishAll()
        backgroundWork.wait()
        state.write { shared in
            shared.closed = true
            shared.segments.removeAll()
        }
        lock?.release()
        if let firstError { throw firstError }
    }

    /// How the writer's part of ``close()`` ended.
    private enum Closing {
        /// Flushed and synced: the active segment's hint file is written next.
        case closed(active: SegmentFile, length: Int64)
        /// Closed after a failure (thrown at the end).
        case failed
        /// Not closed: the disk is too full for the buffered writes, which stay.
        case keptOpen(CaskError)
    }

    deinit {
        if !isClosed.load(ordering: .acquiring) { try? close() }
    }

    static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}

/// Boxes a timer so that it can live in a `Mutex`; touched only under that mutex.
struct DispatchSourceTimerBox: @unchecked Sendable {
    let timer: any DispatchSourceTimer
}
