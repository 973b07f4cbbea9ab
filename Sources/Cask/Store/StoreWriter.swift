/// The writer's state: the active segment, the write buffer, the sequence counter.
/// Lives inside the store's writer mutex; every method runs with that mutex held.
package struct StoreWriter: ~Copyable {
    package var active: SegmentFile
    /// Logical end of the active segment, including bytes still in `buffer`.
    package var end: Int64
    /// Bytes of the active segment handed to the OS; `buffer` holds `flushed ..< end`.
    package var flushed: Int64
    /// The end of the space reserved in the active segment's file for writes through its mapping
    /// (the file's length, zero-filled past `flushed`); 0 when nothing is reserved.
    package var reserved: Int64 = 0
    /// Whether flushes store into the active segment's writable mapping rather than `pwrite` it:
    /// until the file system turns down a reservation (`fallocate` unsupported).
    package var writesThroughMapping: Bool
    /// `sync()` calls that found new writes since the active segment started (see ``hugePageSyncLimit``).
    package var syncsInSegment = 0
    /// Where the last counted sync found the segment's end.
    package var lastSyncedEnd: Int64 = 0
    /// Set when sealing a segment synced too often failed (a full disk, say): not retried at every
    /// sync; the segment's natural seal gives the next one 4 KiB pages anyway.
    package var syncSealFailed = false
    package var buffer: ByteBuffer
    /// Where the records of the write under way go (``CaskStore/append(_:)``), kept to save an
    /// allocation per write.
    var locations: [RecordLocation] = []
    package let encoder = RecordEncoder()
    package var nextSeq: UInt64
    package var nextSegmentID: UInt64
    /// Sealed segments written since their last `fdatasync` (os and buffered modes).
    package var unsyncedSealed: [SegmentFile] = []
    /// Set when the store can no longer write safely (a failed sync, or a failed rollback).
    package var failure: CaskError?
    package var closed = false
    /// When to compact a store small enough never to seal a segment (``CompactionWatch``).
    var compactionWatch = CompactionWatch()
    /// The active segment's dictionary, which its new records are compressed against.
    package private(set) var activeDictionary: LZ4Dictionary?
    /// The dictionary new segments name (the store's current one), nil for none: when it is not
    /// the active segment's, the next write seals the active segment first.
    package var dictionaryForNewSegments: CompressionDictionary?
    /// Collects values to train the store's first dictionary from; nil once training started, or
    /// when the store has a dictionary or does not train one.
    package var sampler: DictionarySampler?
    /// Watches how well the current dictionary compresses what is put (nil without one, or while a
    /// new one is trained).
    package var drift: DictionaryDrift?
    /// Set when sealing the active segment for a new dictionary failed: not retried at every write.
    package var dictionarySealFailed = false
    /// Whether new segments name a key prefix: not with ``CaskStore/Options/keyPrefixes`` off, nor
    /// in an encrypted store.
    package let choosesKeyPrefixes: Bool
    /// Samples the keys put (when ``choosesKeyPrefixes``), to choose the next segment's key prefix from.
    package var keyPrefixes: KeyPrefixChooser
    /// Set once the active segment was considered for an early seal (``wantsKeyPrefixSeal()``).
    package var keyPrefixSealConsidered = false
    /// The store's encryption (nil: not encrypted): new segments are sealed with it.
    let encryption: StoreEncryption?
    /// Set when no record may be sealed in the active segment any more, so that the next write
    /// seals it and goes on in a new one (and fails if that cannot be made): in an encrypted store,
    /// a segment that an earlier open wrote (a crash may have lost records it held, whose places a
    /// new record would then be sealed at again) and one where a write was rolled back (its bytes
    /// may have reached the file). No place of a segment is ever sealed twice with different bytes.
    package var mustSealBeforeWriting = false

    let fileSystem: any FileSystem
    let directory: String
    /// The store's options (segment size and mapping, durability, buffer size).
    let options: CaskStore.Options
    /// Whether new segments are mapped for the writer's stores (decided at open,
    /// ``CaskStore/Options/writesThroughMapping(in:)``).
    let mapsNewSegments: Bool
    /// The store's index, only to prefetch (``KeyIndex/prefetch(_:)``): its contents are read and
    /// written under the store's index lock. Only writers grow its table, and they hold this
    /// mutex, so the table cannot move while a write prefetches.
    let index: KeyIndex

    init(
        active: SegmentFile, length: Int64, nextSeq: UInt64, nextSegmentID: UInt64, options: CaskStore.Options, mapsNewSegments: Bool,
        fileSystem: any FileSystem, directory: String, index: KeyIndex, encryption: StoreEncryption?
    ) {
        self.options = options
        self.encryption = encryption
        self.mapsNewSegments = mapsNewSegments
        self.active = active
        activeDictionary = active.dictionary.loaded?.lz4
        writesThroughMapping = active.isWritable
        self.index = index
        end = length
        flushed = length
        lastSyncedEnd = length
        buffer = ByteBuffer(capacity: options.bufferSize)
        self.nextSeq = nextSeq
        self.nextSegmentID = nextSegmentID
        self.fileSystem = fileSystem
        self.directory = directory
        choosesKeyPrefixes = options.keyPrefixes && encryption == nil
        keyPrefixes = KeyPrefixChooser(sampling: choosesKeyPrefixes)
    }

    /// The key prefix a new segment names: the one the keys sampled lately share most, or the
    /// active segment's when too few were sampled; none without a chooser.
    package var keyPrefixForNewSegments: [UInt8] {
        guard choosesKeyPrefixes else { return [] }
        return keyPrefixes.hasEnoughSamples ? keyPrefixes.choice().prefix : active.keyPrefix
    }

    /// A segment that names no key prefix, once it holds this many bytes, is sealed early if the
    /// keys written to it share one worth ``earlySealSaving`` bytes a record: a new store's first
    /// segment above all, which starts before any key is seen and would otherwise go without for
    /// its whole ``CaskStore/Options/maxSegmentSize``.
    static let earlySealLength: Int64 = 4 << 20
    /// What a key prefix must save a record on average for ``earlySealLength`` to apply.
    static let earlySealSaving = 4.0

    /// Whether the active segment should be sealed now for a key prefix (``earlySealLength``, its
    /// header included). Considered once per segment; before and after, two flags read per write.
    @inline(__always)
    package mutating func wantsKeyPrefixSeal() -> Bool {
        guard choosesKeyPrefixes, !keyPrefixSealConsidered, end >= Self.earlySealLength else { return false }
        keyPrefixSealConsidered = true
        return active.keyPrefixRecord == nil && keyPrefixes.choice().savingPerRecord >= Self.earlySealSaving
    }

    /// Makes `dictionary` the one new segments name (the next write seals the active segment),
    /// and watches it for drift; no more samples are taken until it drifts.
    package mutating func adopt(_ dictionary: CompressionDictionary, expectedRatio: Double?, options: DictionaryOptions) {
        dictionaryForNewSegments = dictionary
        sampler = nil
        drift = DictionaryDrift(expectedRatio: expectedRatio, window: options.trainingSampleBytes)
    }

    package func checkUsable() throws(CaskError) {
        if closed { throw CaskError.closed(path: directory) }
        if let failure { throw failure }
    }

    /// Refuses, before a byte is written, a write that needs `count` sequence numbers when fewer
    /// than that are left below ``Limits/maxSeq`` (a put needs 1, a batch one per operation plus
    /// its commit record).
    package func checkSequenceNumbersLeft(_ count: Int, directory: String) throws(CaskError) {
        // Safe: `nextSeq` never passes `maxSeq + 1` (this check keeps it there), so no overflow.
        let left = Limits.maxSeq + 1 - nextSeq
        guard UInt64(count) > left else { return }
        throw CaskError.limitReached(
            path: directory,
            reason: "sequence numbers are exhausted (a write needs \(count), \(left) of \(Limits.maxSeq) are left); copy the store into a new one ('cask export' then 'cask import') to go on writing")
    }

    /// Reservations grow the active segment's file by this much at a time (by
    /// ``hugePageReservationStep`` in a segment with huge pages): one `fallocate` per about 8,000
    /// small records, and at most a step of unused space on disk.
    static let reservationStep: Int64 = 1 << 20
    /// The step for a segment mapped with huge pages (``SegmentFile/hasHugePages``): each
    /// reservation then ends on a 2 MiB boundary, so that the page cache can hold the segment in
    /// whole 2 MiB folios (a folio cannot reach past the end of the file), which reads map with one
    /// TLB entry each.
    ///
    /// Only `.os` mode asks for them. A 2 MiB folio is written back whole: in `.fsync` mode each
    /// `fdatasync` would write up to 2 MiB rather than the few KiB the sync is for (measured: 54×
    /// the bytes written, 40% fewer durable puts per second). In `.os` mode a segment is written
    /// back about once; ``hugePageSyncLimit`` bounds what explicit `sync()` calls cost.
    static let hugePageReservationStep = Int64(TableMemory.hugePageSize)
    /// The most zero bytes a writer leaves reserved after its last record (FORMAT.md, "Reserved space").
    package static let maxReservedSpace = hugePageReservationStep
    /// A segment mapped with huge pages in which `sync()` finds new writes more often than this is
    /// sealed at once, and the next segment has 4 KiB pages (the one after it gets huge pages again
    /// if it sees no more such syncs than this, as does the active segment after a reopen): each
    /// such sync may write back a whole 2 MiB folio, so a store that syncs often writes at most
    /// about 64 MiB more per huge-page segment.
    package static let hugePageSyncLimit = 32
    /// Whether the active segment has seen more syncs than ``hugePageSyncLimit``: it is sealed if it
    /// has huge pages, and the next segment gets none.
    package var syncedTooOften: Bool { syncsInSegment > Self.hugePageSyncLimit }

    /// Hands the buffer to the OS: stores it through the active segment's writable mapping, in
    /// space reserved ahead (one system call per reservation step; a `pwrite` of a small record
    /// costs about six times the copy), or `pwrite`s it. Either way the bytes are in the page
    /// cache on return: they survive the process being killed, and `fdatasync` makes them
    /// durable. On failure nothing is published: a partial `pwrite` is cut off again, the buffer
    /// is kept for a later attempt, and the error is thrown (a full disk fails the reservation,
    /// before anything is stored).
    package mutating func flush(bufferLimit: Int) throws(CaskError) {
        guard buffer.count > 0 else { return }
        let fd = active.fd
        let at = flushed
        let needed = at + Int64(buffer.count)
        if writesThroughMapping && needed <= Int64(active.mappedLength) && needed > reserved {
            // A reservation the file system cannot make turns mapped writes off for this segment.
            try reserve(upTo: needed)
        }
        if writesThroughMapping && needed <= Int64(active.mappedLength) {
            let file = active
            buffer.withUnsafeBytes { file.write($0, at: at) }
        } else {
            do throws(Errno) {
                try buffer.withUnsafeBytes { (raw) throws(Errno) in try fileSystem.writeAll(fd, from: raw, at: at) }
            } catch {
                do { try fileSystem.ftruncate(fd, length: at) } catch let truncateError {
                    failure = CaskError.io(operation: "ftruncate (rolling back a failed write)", path: active.path, errno: truncateError)
                }
                reserved = 0  // the cut took any reserved space with it
                // Sealed bytes may have reached the file at places the next records would take.
                if encryption != nil { mustSealBeforeWriting = true }
                throw CaskError.from(error, operation: "pwrite", path: active.path)
            }
        }
        flushed = end
        active.writtenLength.store(flushed, ordering: .releasing)
        buffer.reset(shrinkingTo: max(bufferLimit * 2, 64 << 10))
    }

    /// Reserves space in the active segment's file up to at least `needed` bytes, a step
    /// (``reservationStep`` or ``hugePageReservationStep``) at a time (never past the mapping), so
    /// that it ends on a multiple of the step. On a disk too full for a step, reserves only the
    /// pages `needed` reaches, so that a small write (a delete's tombstone above all, which is how
    /// space is freed) needs only its own bytes free. Where the file system cannot reserve, turns
    /// mapped writes off for this segment instead.
    private mutating func reserve(upTo needed: Int64) throws(CaskError) {
        let step = active.hasHugePages ? Self.hugePageReservationStep : Self.reservationStep
        let mapped = Int64(active.mappedLength)
        let from = max(reserved, flushed)
        var target = min(mapped, (needed + step - 1) / step * step)
        while true {
            do throws(Errno) {
                try fileSystem.allocate(active.fd, offset: from, length: target - from)
                reserved = target
                return
            } catch {
                if error == .notSupported || error == .invalidArgument {
                    writesThroughMapping = false
                    return
                }
                // A reservation that ran out of space part way may still have lengthened the file.
                try? fileSystem.ftruncate(active.fd, length: max(reserved, flushed))
                let pages = min(mapped, (needed + Self.smallReservationStep - 1) / Self.smallReservationStep * Self.smallReservationStep)
                guard error == .noSpace || error == .quotaExceeded, pages < target else {
                    throw CaskError.from(error, operation: "fallocate", path: active.path)
                }
                target = pages
            }
        }
    }

    /// What a reservation rounds to when the disk has no room for a whole step: a 4 KiB page.
    static let smallReservationStep: Int64 = 4096

    /// Gives back the reserved space past `end` (the file ends at its last record again), before
    /// the active segment is sealed or the store closes.
    package mutating func releaseReservation() throws(CaskError) {
        guard reserved > end else { return }
        do throws(Errno) { try fileSystem.ftruncate(active.fd, length: end) } catch {
            throw CaskError.io(operation: "ftruncate (releasing reserved space)", path: active.path, errno: error)
        }
        reserved = 0
    }

    /// Seals the active segment and starts the next one: flushes, gives back the reserved space (the
    /// sealed segment ends at its last record before the next one exists: only the newest segment
    /// can have reserved space left after a crash), in `.fsync` mode syncs it, creates the next
    /// segment, and publishes both to readers through `state`. Returns the sealed segment and its
    /// length: the store writes its hint (whose write syncs it, so that in `.os` and `.buffered`
    /// modes sealed segments reach the disk in the order they were sealed) and considers a
    /// compaction. If the next segment cannot be created, the writer goes on in this one.
    /// Takes the index lock.
    mutating func rotate(state: ReadWriteLock<CaskStore.SharedState>) throws(CaskError) -> (sealed: SegmentFile, length: Int64) {
        try flush(bufferLimit: options.bufferSize)
        let sealed = active
        try releaseReservation()
        if options.durability == .fsync {
            do { try fileSystem.fdatasync(sealed.fd) } catch {
                let syncFailure = CaskError.syncFailed(path: sealed.path, errno: error)
                failure = syncFailure
                throw syncFailure
            }
        }
        let next = try Self.createSegment(
            id: nextSegmentID, baseSeq: nextSeq, directory: directory, fileSystem: fileSystem,
            mapLength: options.segmentMapLength, writable: mapsNewSegments, hugePages: options.hugePageSegments && !syncedTooOften,
            dictionary: dictionaryForNewSegments, encryption: encryption, keyPrefix: keyPrefixForNewSegments)
        // Only now: if the next segment could not be created, the writer goes on in this one.
        sealed.endMappedWrites()
        nextSegmentID += 1
        if options.durability != .fsync { unsyncedSealed.append(sealed) }
        start(next, length: next.writtenLength.load(ordering: .relaxed))
        let sealedLength = sealed.writtenLength.load(ordering: .relaxed), nextEnd = end
        state.write { shared in
            shared.segments.noteWritten(UInt32(sealed.id), length: sealedLength)
            shared.segments[UInt32(next.id)] = next
            shared.stats.update(sealed.id) { $0.sealed = true }
            var stats = SegmentStats(id: next.id)
            stats.dictionaryID = next.dictionary.loaded?.id
            stats.headerBytes = next.contentStart
            stats.fileBytes = nextEnd
            shared.stats.append(stats)
        }
        return (sealed, sealedLength)
    }

    /// Makes `next` the active segment, whose length is `length`.
    package mutating func start(_ next: SegmentFile, length: Int64) {
        active = next
        activeDictionary = next.dictionary.loaded?.lz4
        end = length
        flushed = length
        reserved = 0
        writesThroughMapping = next.isWritable
        syncsInSegment = 0
        lastSyncedEnd = length
        syncSealFailed = false
        dictionarySealFailed = false
        mustSealBeforeWriting = false
        keyPrefixSealConsidered = false
    }

    /// Creates segment `id` with its header and makes its directory entry durable.
    /// `mapLength`: bytes to map up front (the segment's maximum size), 0 for `pread`;
    /// `writable`: map them for the writer's stores too (``flush(bufferLimit:)``); `hugePages`: in
    /// 2 MiB folios (``hugePageReservationStep``).
    /// The header of a new segment `id` and, in an encrypted store, its sealing: a new random salt
    /// and its cipher (a segment created again after a crash gets a new one too). `keyPrefix`: the
    /// key prefix it names (none in an encrypted store).
    package static func newHeader(
        id: UInt64, baseSeq: UInt64, dictionary: CompressionDictionary?, encryption: StoreEncryption?, keyPrefix: [UInt8] = []
    ) -> (SegmentHeader, SegmentSealing?) {
        guard let encryption else {
            return (SegmentHeader(
                segmentID: id, baseSeq: baseSeq, dictionaryID: dictionary?.id ?? 0, dictionaryChecksum: dictionary?.checksum ?? 0,
                keyPrefix: keyPrefix), nil)
        }
        let (salt, cipher) = encryption.newCipher()
        let sealing = SegmentHeader.Sealing(
            algorithm: encryption.algorithm, storeID: encryption.storeID, salt: salt, dictionarySalt: dictionary?.salt)
        return (SegmentHeader(segmentID: id, baseSeq: baseSeq, dictionaryID: dictionary?.id ?? 0, sealing: sealing),
                SegmentSealing(cipher: cipher, salt: salt))
    }

    package static func createSegment(
        id: UInt64, baseSeq: UInt64, directory: String, fileSystem: any FileSystem, mapLength: Int, writable: Bool, hugePages: Bool,
        dictionary: CompressionDictionary? = nil, encryption: StoreEncryption?, keyPrefix: [UInt8] = []
    ) throws(CaskError) -> SegmentFile {
        let path = directory + "/" + SegmentName.segment(id)
        guard id < UInt64(UInt32.max) else {
            throw CaskError.limitReached(
                path: directory, reason: "segment ids are exhausted (limit \(UInt32.max - 1)); copy the store into a new one ('cask export' then 'cask import') to go on writing")
        }
        // Once every seq is used the next is `maxSeq + 1`, which no header may hold; no record can
        // follow it either, so `maxSeq` is as true a base.
        let (segmentHeader, sealing) = newHeader(
            id: id, baseSeq: min(baseSeq, Limits.maxSeq), dictionary: dictionary, encryption: encryption, keyPrefix: keyPrefix)
        let header = segmentHeader.encoded(cipher: sealing?.cipher)
        let fd: Int32
        do {
            fd = try fileSystem.open(path, flags: O_RDWR | O_CREAT | O_EXCL, mode: 0o600)
        } catch {
            throw CaskError.from(error, operation: "create segment", path: path)
        }
        do {
            try header.withBytes { (raw) throws(Errno) in try fileSystem.writeAll(fd, from: raw, at: 0) }
            // The header before the name: a segment that a power cut leaves without its header is
            // damage unless it is the newest, and compaction outputs get newer ids than the active one.
            try fileSystem.fdatasync(fd)
            try fileSystem.syncDirectory(directory)
        } catch {
            fileSystem.close(fd)
            try? fileSystem.unlink(path)
            throw CaskError.from(error, operation: "create segment", path: path)
        }
        return SegmentFile(
            id: id, path: path, fd: fd, length: Int64(header.count), fileSystem: fileSystem, mapLength: mapLength, writable: writable,
            hugePages: hugePages, dictionary: dictionary.map { .loaded($0) } ?? .none, sealing: sealing, keyPrefix: segmentHeader.keyPrefix)
    }
}

#if canImport(Glibc)
import Glibc
#endif
