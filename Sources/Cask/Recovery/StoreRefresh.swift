#if canImport(Glibc)
import Glibc
#endif

/// What a read-only store must add to its index to catch up with the writer of another process
/// (``CaskStore/refresh()``): the records appended to the segments it knows since it last read
/// them, and the segments created since.
///
/// That is enough — the index after applying them in seq order is what an open would build — as
/// long as every such record is newer than all the handle knows and no segment it knows is gone.
/// A compaction breaks both (its outputs hold copies of older records; its inputs are deleted):
/// then the plan is ``Outcome/reload(_:)``, and the caller recovers the directory afresh.
///
/// Only whole commits are taken: a scan stops before a torn record or a batch whose commit record
/// is not written yet, and the next one starts there.
struct StoreRefresh {
    let directory: String
    let fileSystem: any FileSystem
    let mapReads: Bool
    /// Where the new segments' dictionaries are loaded.
    let dictionaries: DictionaryCatalog

    /// One record to apply: a put, a delete, or a batch's commit record (counted, not indexed).
    struct Record {
        var key: [UInt8]
        var type: RecordType
        var seq: UInt64
        var valueLength: Int
        var expiresAt: UInt64?
        var location: RecordLocation
    }

    struct Plan {
        /// In seq order.
        var records: [Record] = []
        /// Segments new since the last refresh, with their stats (records not yet counted).
        var newSegments: [(file: SegmentFile, stats: SegmentStats)] = []
        /// Where each segment read now ends (where the next refresh reads it from).
        var ends: [UInt64: Int64] = [:]
        /// Damage found in what was read (a torn end is not damage: it is read again next time).
        var damage: [DamagedRange] = []
    }

    enum Outcome {
        case plan(Plan)
        /// The cheap path does not hold (why): recover the whole directory.
        case reload(String)
    }

    /// The plan, given the segments the handle holds, where it read each to, and the highest seq it knows.
    func plan(known: [UInt64: SegmentFile], ends: [UInt64: Int64], maxSeq: UInt64) throws(CaskError) -> Outcome {
        let listing = try StoreDirectory(listing: directory, encryption: dictionaries.encryption, fileSystem: fileSystem)
        let listed = Set(listing.segmentIDs)
        if let gone = known.keys.sorted().first(where: { !listed.contains($0) }) {
            return .reload("segment \(gone) was removed (a compaction)")
        }
        var plan = Plan()
        for id in known.keys.sorted() {
            let file = known[id]!
            let end = ends[id] ?? file.writtenLength.load(ordering: .relaxed)
            let length: Int64
            do { length = try fileSystem.fileSize(file.fd) } catch {
                throw CaskError.io(operation: "fstat", path: file.path, errno: error)
            }
            guard length > end else { continue }
            try read(file: file, from: end, length: length, into: &plan)
        }
        for id in listing.segmentIDs where known[id] == nil {
            let segmentPath = directory + "/" + SegmentName.segment(id)
            let opened: OpenFile
            do { opened = try fileSystem.openFile(segmentPath, flags: O_RDONLY, mode: 0) } catch {
                if error == .noEntry { return .reload("segment \(id) was removed while listed (a compaction)") }
                throw CaskError.from(error, operation: "open", path: segmentPath, reading: true)
            }
            let length: Int64
            do { length = try fileSystem.fileSize(opened.descriptor) } catch {
                throw CaskError.io(operation: "fstat", path: segmentPath, errno: error)
            }
            let isActive = id == listing.activeSegmentID
            var reader = SegmentReader(
                fd: opened.descriptor, id: id, path: segmentPath, length: length, isActive: isActive, lockHeld: false,
                encryption: dictionaries.encryption, fileSystem: fileSystem)
            let (header, headerDamage) = try reader.readHeader()
            // Being created: its header is not all written yet. The next refresh reads it.
            if headerDamage?.kind == .tornTail { break }
            // Any other segment's damaged header (one with a hint file is never a torn creation):
            // the full recovery reads what it can behind it, with the hint, and reports it.
            if let headerDamage, !isActive { return .reload("the header of segment \(id) is damaged (\(headerDamage.reason))") }
            let dictionary = header.map { dictionaries.dictionary(of: $0) } ?? .none
            let file = SegmentFile(
                id: id, path: segmentPath, fd: opened.take(), length: length, fileSystem: fileSystem, mapLength: mapReads ? Int(length) : 0,
                writable: false, hugePages: false, dictionary: dictionary, sealing: reader.sealing, keyPrefix: reader.keyPrefix)
            var stats = SegmentStats(id: id)
            stats.headerBytes = reader.contentStart
            stats.fileBytes = reader.contentStart
            stats.dictionaryID = dictionary.id == 0 ? nil : dictionary.id
            plan.newSegments.append((file, stats))
            plan.ends[id] = reader.contentStart
            if let damage = headerDamage, damage.kind == .segmentHeader, damage.length == length, dictionaries.encryption != nil {
                plan.damage.append(damage)  // an encrypted segment whose header does not authenticate: nothing of it is read
                continue
            }
            try read(file: file, from: reader.contentStart, length: length, into: &plan)
        }
        if let older = plan.records.first(where: { $0.seq <= maxSeq }) {
            return .reload("segment \(older.location.segmentID) holds a record (seq \(older.seq)) older than what this handle read (a compaction's copy)")
        }
        plan.records.sort { $0.seq < $1.seq }
        return .plan(plan)
    }

    /// Reads the records of `file` from `start` to `length` into the plan: whole ones, batch
    /// members only with their commit record.
    private func read(file: SegmentFile, from start: Int64, length: Int64, into plan: inout Plan) throws(CaskError) {
        let id = UInt32(file.id)
        var reader = SegmentReader(file: file, length: length, isActive: true, lockHeld: false, encryption: dictionaries.encryption, fileSystem: fileSystem)
        var batch = BatchAssembler()
        var records: [Record] = []
        let outcome = try reader.readRecords(
            from: start, settled: start, batch: &batch,
            onRecord: { offset, header, bytes in
                guard header.flags & RecordFlags.batchMember == 0 else { return }
                let key = header.key(in: bytes, prefix: file.keyPrefixBytes)
                records.append(Record(
                    key: key, type: header.type, seq: header.seq, valueLength: header.valueLength, expiresAt: header.expiresAt,
                    location: RecordLocation(segmentID: id, offset: UInt32(offset), length: UInt32(header.recordLength))))
            },
            onBatch: { members in
                for member in members {
                    records.append(Record(
                        key: member.key, type: member.type, seq: member.seq, valueLength: member.valueLength, expiresAt: member.expiresAt,
                        location: member.location))
                }
            })
        // Records past the end found (members of a batch not yet committed) wait for the next refresh.
        let end = outcome.contentEnd
        plan.records += records.filter { Int64($0.location.offset) < end }
        plan.ends[file.id] = end
        plan.damage += outcome.damageInside
    }
}
