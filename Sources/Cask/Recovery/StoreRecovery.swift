#if canImport(Glibc)
import Glibc
#endif

/// Rebuilds the index from the files of a store directory when it is opened.
///
/// For each segment, in id order: validate the header, load its hint file if there is a valid one,
/// then scan whatever the hint does not cover. The newest record of each key wins by sequence
/// number (never by file order), and deletes shadow older puts seen in any order. A torn tail of
/// the active segment is cut (in a writable open); any other damage is skipped by resynchronising
/// and reported, never silently dropped.
package struct StoreRecovery {
    package struct Result {
        package var index: KeyIndex
        package var segments: [UInt64: SegmentFile] = [:]
        package var stats: [UInt64: SegmentStats] = [:]
        package var nextSeq: UInt64 = 1
        /// The segment to keep appending to, with its valid length, or nil to start a new one.
        package var active: SegmentFile?
        package var nextSegmentID: UInt64 = 1
        /// Clean sealed segments without a hint that covers them.
        package var segmentsNeedingHints: [UInt64] = []
        /// Expiry times of the keys whose winning record has one.
        package var expiries = ExpiryTable()
        /// Where each segment's contents end (before a torn tail, reserved space or a batch not
        /// yet committed): where ``StoreRefresh`` reads on from.
        package var contentEnds: [UInt64: Int64] = [:]
        /// Set when a hint turned out inconsistent after part of it was applied.
        var inconsistentHint: UInt64?
        /// Sizes the index for the records of segments without a hint.
        var scanSizing: ScanSizing?
        package var report = RecoveryReport()
        /// The dictionary files the listing found, by id.
        package var dictionaryFiles: [UInt32] = []
    }

    let directory: String
    let fileSystem: any FileSystem
    let writable: Bool
    let maxSegmentSize: Int64
    let mapReads: Bool
    /// Map the segment kept open for writing writable (``SegmentFile/write(_:at:)``).
    let mapWrites: Bool
    /// ...and in 2 MiB folios (``StoreWriter/hugePageReservationStep``).
    let hugePages: Bool
    /// Where the segments' dictionaries are loaded (each once).
    let dictionaries: DictionaryCatalog
    /// The store's encryption (nil: not encrypted).
    let encryption: StoreEncryption?

    package init(
        directory: String, fileSystem: any FileSystem, writable: Bool, maxSegmentSize: Int64, mapReads: Bool, mapWrites: Bool = false,
        hugePages: Bool = false, dictionaries: DictionaryCatalog, encryption: StoreEncryption?
    ) {
        self.dictionaries = dictionaries
        self.encryption = encryption
        self.directory = directory
        self.fileSystem = fileSystem
        self.writable = writable
        self.maxSegmentSize = maxSegmentSize
        self.mapReads = mapReads
        self.mapWrites = mapWrites
        self.hugePages = hugePages
    }

    package func run() throws(CaskError) -> Result {
        // A read-only open beside a writer: a compaction may remove a listed segment before it is
        // opened (its records are in outputs newer than the listing). Start again from a new listing.
        var attempts = 0
        while true {
            do {
                return try runOnce()
            } catch .io(operation: "open", path: _, errno: .noEntry) where !writable && attempts < 100 {
                attempts += 1
            }
        }
    }

    private func runOnce() throws(CaskError) -> Result {
        let listing = try StoreDirectory(listing: directory, encryption: encryption, fileSystem: fileSystem)
        // In a directory that holds no store yet, no file is the store's, whatever its name: a
        // writer's open deletes none and adopts no dictionary among them.
        let holdsStore = listing.holdsStore
        if writable && holdsStore {
            for name in listing.leftovers { try? fileSystem.unlink(path(name)) }
            if listing.hasRekeyMarker { CaskStore.finishRekey(of: directory, fileSystem: fileSystem) }
        }
        var manifestProblem: DamagedRange?
        switch listing.manifest {
        case .valid(let inputs)?:
            // The segments it lists were replaced by segments already on disk. A writable open
            // finishes the compaction; a read-only one just leaves them out (the listing did).
            if writable {
                do { try StoreDirectory.finishCompaction(retiring: inputs, in: directory, fileSystem: fileSystem) } catch {
                    throw CaskError.from(error, operation: "finish an interrupted compaction", path: path(CompactionManifest.fileName))
                }
            }
        case .invalid(let reason)?:
            // Reported and ignored: nothing is deleted on its word.
            let size = (try? fileSystem.fileSize(atPath: path(CompactionManifest.fileName))) ?? 0
            manifestProblem = DamagedRange(kind: .compactionManifest, file: path(CompactionManifest.fileName), segmentID: nil, offset: 0, length: size, reason: reason)
        case nil:
            break
        }
        let ids = listing.segmentIDs
        var hinted = listing.hintedIDs
        var carriedTruncations: [RecoveryReport.Truncation] = []
        var distrustedHints: [InvalidHint] = []
        attempt: while true {
            var result = Result(index: KeyIndex(minimumCapacity: 1024))
            result.report.truncations = carriedTruncations
            result.report.invalidHints = distrustedHints
            result.report.ignoredFiles = listing.ignoredFiles
            result.dictionaryFiles = holdsStore ? listing.dictionaryIDs : []
            dictionaries.noteListed(listing.dictionaryIDs)  // so that a new dictionary takes another id
            if let manifestProblem { result.report.damagedRanges.append(manifestProblem) }
            result.index.reserve(hintedEntries(ids.filter { hinted.contains($0) }))
            result.scanSizing = ScanSizing(bytesToScan: unhintedBytes(ids.filter { !hinted.contains($0) }), index: result.index)
            result.index.beginRecovery()
            for id in ids {
                try recoverSegment(id: id, isActive: id == listing.activeSegmentID, hasHint: hinted.contains(id), into: &result)
                if let distrusted = result.inconsistentHint {
                    // A hint passed its checksums but not its parse, after part of it was applied:
                    // start over without it (cuts already made stay made, and reported).
                    // It is damaged like any invalid hint (a block's raw length is not under its
                    // checksum): report it and, in a writable open, remove it.
                    hinted.remove(distrusted)
                    carriedTruncations = result.report.truncations
                    distrustedHints.append(InvalidHint(
                        file: path(SegmentName.hint(distrusted)), segmentID: distrusted,
                        reason: "its header and block checksums hold but an entry does not parse (a damaged block length)"))
                    if writable { try? fileSystem.unlink(path(SegmentName.hint(distrusted))) }
                    continue attempt
                }
            }
            return finish(result, ids: ids)
        }
    }

    /// The entries the hint files of `ids` declare in their headers (each header checked, each
    /// count capped at what its segment could hold), so that the index is sized once for all of
    /// them rather than grown, and rehashed, hint by hint. Unreadable hints count 0.
    private func hintedEntries(_ ids: [UInt64]) -> Int {
        var total = 0
        for id in ids {
            guard let header = SegmentReader.hintHeader(at: path(SegmentName.hint(id)), fileSystem: fileSystem),
                  let segmentLength = try? fileSystem.fileSize(atPath: path(SegmentName.segment(id)))
            else { continue }
            total += header.withUnsafeBytes { Self.declaredEntries($0, segmentLength: segmentLength) } ?? 0
        }
        return total
    }

    /// The bytes after the header of the segments `ids` (which have no hint), as listed now.
    private func unhintedBytes(_ ids: [UInt64]) -> Int64 {
        ids.reduce(0) { total, id in
            total + max(((try? fileSystem.fileSize(atPath: path(SegmentName.segment(id)))) ?? 0) - Int64(SegmentHeader.length), 0)
        }
    }

    /// The entry count a hint file's header declares, if the header's checksum holds; capped at what
    /// a segment of `segmentLength` bytes could hold (9 bytes is the smallest record).
    static func declaredEntries(_ hint: UnsafeRawBufferPointer, segmentLength: Int64) -> Int? {
        HintFile.declaredSummary(hint).map { Int(min($0.entryCount, UInt64(segmentLength / 9))) }
    }

    private func finish(_ recovered: Result, ids: [UInt64]) -> Result {
        var result = recovered
        result.index.endRecovery()
        result.report.segments = ids.count
        result.nextSegmentID = (ids.last ?? 0) + 1
        return result
    }

    func path(_ name: String) -> String { directory + "/" + name }

    private func recoverSegment(id: UInt64, isActive: Bool, hasHint: Bool, into result: inout Result) throws(CaskError) {
        let segmentPath = path(SegmentName.segment(id))
        let keepOpenForWriting = writable && isActive
        let opened: OpenFile
        do {
            opened = try fileSystem.openFile(segmentPath, flags: keepOpenForWriting ? O_RDWR : O_RDONLY, mode: 0)
        } catch {
            throw CaskError.from(error, operation: "open", path: segmentPath, reading: !keepOpenForWriting)
        }
        var length: Int64
        do { length = try fileSystem.fileSize(opened.descriptor) } catch {
            throw CaskError.from(error, operation: "fstat", path: segmentPath, reading: true)
        }
        // The file object owns the descriptor from here, and closes it.
        let fd = opened.take()

        // Header.
        var reader = SegmentReader(
            fd: fd, id: id, path: segmentPath, length: length, isActive: isActive, lockHeld: writable, encryption: encryption, fileSystem: fileSystem)
        var (header, headerDamage): (SegmentHeader?, DamagedRange?)
        do { (header, headerDamage) = try reader.readHeader() } catch {
            fileSystem.close(fd)
            throw error
        }
        if let header { result.nextSeq = max(result.nextSeq, header.baseSeq) }
        if let torn = headerDamage, torn.kind == .tornTail {
            guard keepOpenForWriting else {
                // A read-only open beside a writer creating the segment (or after a crash while it
                // did): no record is in it yet, and what its header will say (dictionary, salt) is
                // not known. It is left out, so that a refresh takes it as a new segment and reads
                // it from its header once that is written.
                fileSystem.close(fd)
                result.report.damagedRanges.append(torn)
                return
            }
            // A crash while the segment was being created: its header is cut short, or has the right
            // length but was not all written (zeros), and no record follows it. Rewrite the header
            // (encrypted: with a new salt, as for any new segment).
            let (rewritten, headerCipher) = StoreWriter.newHeader(id: id, baseSeq: min(result.nextSeq, Limits.maxSeq), dictionary: nil, encryption: encryption)
            do {
                try fileSystem.ftruncate(fd, length: 0)
                try rewritten.encoded(cipher: headerCipher?.cipher).withBytes { (raw) throws(Errno) in try fileSystem.writeAll(fd, from: raw, at: 0) }
                try fileSystem.fdatasync(fd)  // before any newer segment can exist, as for a new segment
            } catch {
                fileSystem.close(fd)
                throw CaskError.from(error, operation: "rewrite segment header", path: segmentPath)
            }
            result.report.truncations.append(.init(
                file: segmentPath, offset: 0, bytesRemoved: length, reason: "segment header was incomplete; rewritten"))
            length = Int64(rewritten.byteCount)
            reader = SegmentReader(
                fd: fd, id: id, path: segmentPath, length: length, isActive: isActive, lockHeld: writable, encryption: encryption, fileSystem: fileSystem)
            do { (header, headerDamage) = try reader.readHeader() } catch {
                fileSystem.close(fd)
                throw error
            }
        }
        let dictionary = header.map { dictionaries.dictionary(of: $0) } ?? .none
        // The active segment may go on growing: map it at its maximum size.
        let mapLength = !mapReads ? 0 : Int(keepOpenForWriting ? max(length, maxSegmentSize) : length)
        var stats = SegmentStats(id: id)
        stats.dictionaryID = dictionary.id == 0 ? nil : dictionary.id
        stats.sealed = !isActive
        stats.headerBytes = reader.contentStart
        stats.fileBytes = length

        // Hint.
        var batch = BatchAssembler()
        var scanFrom = reader.contentStart
        var settled: Int64?
        var hintCovers: Int64 = 0
        var lostTail: DamagedRange?
        var hintDamage: [DamagedRange] = []
        // A hint names its segment itself: it is used behind a damaged header too, but for an
        // encrypted store's, which names it by the salt in the header.
        if hasHint && (encryption == nil || reader.sealing != nil) {
            switch loadHint(
                id: id, segmentLength: length, sealing: reader.hintSealing, keyPrefix: header.map { $0.keyPrefix }, into: &result, stats: &stats,
                batch: &batch) {
            case .applied(let covered, let settledByHint, let damage, let keyPrefix):
                hintDamage = damage
                if result.inconsistentHint != nil {
                    fileSystem.close(fd)
                    return
                }
                // Behind a damaged header, the key prefix the hint holds rebuilds the keys of the
                // records that elide it.
                if header == nil {
                    reader.takeKeyPrefix(fromHint: keyPrefix)
                    stats.headerBytes = reader.contentStart
                }
                scanFrom = covered
                settled = settledByHint
                hintCovers = covered
                result.report.segmentsFromHints += 1
            case .invalid(let invalid, let lost):
                result.report.invalidHints.append(invalid)
                lostTail = lost
                // The hint is kept: it may be the only record of what a damaged segment held (a
                // repair reads it). Only the active segment's goes, which new writes could make
                // look valid again while it describes other records.
                if writable && isActive && lost == nil { try? fileSystem.unlink(path(SegmentName.hint(id))) }
            }
        }

        let file = SegmentFile(
            id: id, path: segmentPath, fd: fd, length: length, fileSystem: fileSystem, mapLength: mapLength,
            writable: keepOpenForWriting && mapWrites, hugePages: hugePages, dictionary: dictionary, sealing: reader.sealing,
            keyPrefix: reader.keyPrefix)

        // The records the hint does not cover. Their keys land at random in the index, as a hint's
        // do: they are applied a few records behind, their lines prefetched meanwhile.
        let pending = PendingIndexUpdates(index: result.index)
        var tailMembers: [Int64] = []
        let keyPrefix = file.keyPrefixBytes  // the file outlives the scan
        // Where the keys of records that elide the prefix are put together (untouched otherwise).
        let keyScratch = UnsafeMutableRawBufferPointer.allocate(byteCount: keyPrefix.isEmpty ? 0 : Limits.maxKeyLength, alignment: 1)
        defer { keyScratch.deallocate() }
        let outcome = try reader.readRecords(
            from: min(scanFrom, length), settled: settled, batch: &batch,
            onRecord: { offset, header, bytes in
                Self.count(seq: header.seq, valueLength: header.valueLength, into: &result, stats: &stats)
                result.scanSizing?.noteScanned(length: header.recordLength)
                if header.flags & RecordFlags.batchMember != 0 {
                    tailMembers.append(offset)
                    return
                }
                guard header.type != .batch else { return }
                Self.index(key: header.key(in: bytes, prefix: keyPrefix, scratch: keyScratch), type: header.type, seq: header.seq,
                           expiresAt: header.expiresAt,
                           location: RecordLocation(segmentID: UInt32(id), offset: UInt32(offset), length: UInt32(header.recordLength)),
                           into: &result, stats: &stats, pending: pending)
            },
            onBatch: { members in
                for member in members {
                    member.key.withUnsafeBytes { key in
                        Self.index(key: key, type: member.type, seq: member.seq, expiresAt: member.expiresAt, location: member.location,
                                   into: &result, stats: &stats, pending: pending)
                    }
                }
            })
        Self.drain(pending, into: &result, stats: &stats)
        /// From here on the segment ends at `newLength`; `cutting` truncates the file there too.
        func end(at newLength: Int64, cutting: Bool) throws(CaskError) {
            if cutting {
                do { try fileSystem.ftruncate(fd, length: newLength) } catch {
                    throw CaskError.from(error, operation: "ftruncate", path: segmentPath)
                }
            }
            length = newLength
            file.writtenLength.store(newLength, ordering: .relaxed)
            stats.fileBytes = newLength
        }
        // A read-only open beside a live writer: the file may have shrunk while it was read (the
        // writer gave back its reserved space). It ends where the read found its end.
        if outcome.fileLength < length { try end(at: outcome.fileLength, cutting: false) }
        var damage = outcome.damage
        if keepOpenForWriting && outcome.contentEnd < length {
            // Reserved space is given back; a torn tail is cut, and the cut reported.
            if let tail = outcome.tornTail {
                damage.removeLast()
                if tail.offset < hintCovers {
                    // The cut reaches into what the hint describes (members it lists end the
                    // segment): the hint would describe records that are gone. It goes.
                    try? fileSystem.unlink(path(SegmentName.hint(id)))
                    hintCovers = 0
                }
                result.report.truncations.append(.init(file: segmentPath, offset: tail.offset, bytesRemoved: length - tail.offset, reason: tail.reason))
                stats.records -= tailMembers.filter { $0 >= tail.offset }.count
            }
            try end(at: outcome.contentEnd, cutting: true)
        }
        if let lostTail { damage.append(lostTail) }
        damage += hintDamage
        stats.damaged = !damage.isEmpty
        result.report.damagedRanges += damage

        // A damaged segment is never appended to: a new one starts, so the damage stays where it is.
        // (Nor is an encrypted store's: its writer seals it before its first write, see ``StoreWriter``.)
        if keepOpenForWriting && length < maxSegmentSize && damage.isEmpty {
            result.active = file
        } else {
            stats.sealed = true
            if writable && damage.isEmpty && hintCovers < length { result.segmentsNeedingHints.append(id) }
        }
        result.segments[id] = file
        result.stats[id] = stats
        result.contentEnds[id] = min(length, outcome.contentEnd)
    }

    /// Counts one valid record, from a scan or a hint.
    static func count(seq: UInt64, valueLength: Int, into result: inout Result, stats: inout SegmentStats) {
        result.report.recordsScanned += 1
        stats.noteRecord(seq: seq, valueLength: valueLength)
        if seq >= result.nextSeq { result.nextSeq = seq + 1 }
    }

    /// Indexes one put or delete (not a batch member held for its commit) through `pending`: at once
    /// (depth 0) or a few records later, in the same order. Static, as are `apply` and `removeLive`,
    /// so that its closures capture no copy of `self` (a retain of each of its references per record).
    static func index(
        key: UnsafeRawBufferPointer, type: RecordType, seq: UInt64, expiresAt: UInt64?, location: RecordLocation,
        into result: inout Result, stats: inout SegmentStats, pending: PendingIndexUpdates
    ) {
        guard key.count <= PendingIndexUpdates.maxQueuedKeyLength else {
            drain(pending, into: &result, stats: &stats)
            return apply(key: key, type: type, seq: seq, expiresAt: expiresAt, location: location, into: &result, stats: &stats)
        }
        if let due = pending.add(key: key, type: type, seq: seq, expiresAt: expiresAt, location: location) {
            apply(key: due.key, type: due.type, seq: due.seq, expiresAt: due.expiresAt, location: due.location, into: &result, stats: &stats)
        }
    }

    /// Applies every update still waiting in `pending`, in order.
    static func drain(_ pending: PendingIndexUpdates, into result: inout Result, stats: inout SegmentStats) {
        pending.drain { update in
            apply(key: update.key, type: update.type, seq: update.seq, expiresAt: update.expiresAt, location: update.location,
                  into: &result, stats: &stats)
        }
    }

    /// Indexes a record (that is not an uncommitted batch member).
    static func apply(
        key: UnsafeRawBufferPointer, type: RecordType, seq: UInt64, expiresAt: UInt64?, location: RecordLocation,
        into result: inout Result, stats: inout SegmentStats
    ) {
        let isDelete = type == .delete
        switch result.index.recover(key, location, seq: seq, isDelete: isDelete) {
        case .inserted:
            if !isDelete { stats.liveBytes += Int64(location.length); stats.liveRecords += 1 }
            if expiresAt != nil || !result.expiries.isEmpty { result.expiries.set(key, expiresAt: isDelete ? nil : expiresAt, seq: seq) }
        case .replaced(let old, let wasDelete):
            if !wasDelete { removeLive(old, result: &result, stats: &stats) }
            if !isDelete { stats.liveBytes += Int64(location.length); stats.liveRecords += 1 }
            if expiresAt != nil || !result.expiries.isEmpty { result.expiries.set(key, expiresAt: isDelete ? nil : expiresAt, seq: seq) }
        case .superseded:
            break
        }
    }

    private static func removeLive(_ old: RecordLocation, result: inout Result, stats: inout SegmentStats) {
        if UInt64(old.segmentID) == stats.id {
            stats.liveBytes -= Int64(old.length)
            stats.liveRecords -= 1
        } else {
            result.stats[UInt64(old.segmentID)]?.liveBytes -= Int64(old.length)
            result.stats[UInt64(old.segmentID)]?.liveRecords -= 1
        }
    }
}
