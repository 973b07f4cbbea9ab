#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// Deciding, from what was read, what each segment becomes: no I/O.
extension StoreRepair {
    // MARK: Deciding

    /// One record of the repaired segment, in file order.
    struct Item {
        var offset: Int64
        var length: Int64
        var type: RecordType
        var flags: UInt8
        var seq: UInt64
        var batchFirstSeq: UInt64
        /// For a commit record read from the segment: the member count its value states (nil for
        /// one rebuilt from the hint, whose value is the count its seqs give).
        var batchCount: UInt64?
        /// Nil: copied from the old segment; else the rebuilt bytes.
        var rebuilt: [UInt8]?
        var dropReason: String?
        /// What a dropped record is: damaged (a value that does not decompress), or part of a batch never applied.
        var dropKind = DamagedRange.Kind.record
        /// The key of a record read from the segment (nil for one rebuilt from the hint, never dropped).
        var key: [UInt8]? = nil
    }

    func planSegment(_ segment: SegmentAnalysis, nextSeq: UInt64, into plan: inout Plan) {
        var items = segment.records.map { record in
            Item(offset: record.offset, length: record.length, type: record.type, flags: record.flags, seq: record.seq,
                 batchFirstSeq: record.batchFirstSeq, batchCount: record.batchCount, dropReason: record.payloadProblem, key: record.key)
        }
        var lost = segment.suspected
        for entry in segment.hinted {
            if let bytes = Self.rebuild(entry, sealed: encryption != nil, keyPrefix: segment.keyPrefix) {
                items.append(Item(offset: entry.offset, length: entry.length, type: entry.type, flags: entry.flags, seq: entry.seq,
                                  batchFirstSeq: entry.type == .batch ? Self.littleEndian(entry.key) : 0, batchCount: nil, rebuilt: bytes))
            } else {
                lost.append(.init(file: segment.path, offset: entry.offset, type: entry.type, seq: entry.seq, key: entry.key, verified: true))
            }
        }
        items.sort { $0.offset < $1.offset }

        Self.dropUnappliedBatches(&items, tornTail: segment.corrupt.last.flatMap { $0.kind == .tornTail ? $0 : nil })

        var dropped = segment.corrupt.filter { $0.kind != .uncommittedBatch && $0.offset < segment.length }.map { range in
            var dropped = range
            dropped.reason = (range.kind == .tornTail ? "torn write at the end of the active segment: " : "damaged: ") + range.reason
            return dropped
        }
        var pieces: [Piece] = []
        var recordsDropped = 0, recordsRestored = 0
        for item in items {
            if item.dropKind == .tornTail {
                continue  // within the torn tail, reported as one range
            } else if let reason = item.dropReason {
                dropped.append(DamagedRange(
                    kind: item.dropKind, file: segment.path, segmentID: segment.id,
                    offset: item.offset, length: item.length, reason: "\(item.type) record, seq \(item.seq): \(reason)"))
                recordsDropped += 1
                // An intact record dropped (a member of a batch never applied, a value that does not
                // expand) is named by its key, as a record lost in a damaged range is when a hint
                // names it: whoever runs the repair sees every key it takes away.
                if let key = item.key, item.type != .batch {
                    lost.append(.init(file: segment.path, offset: item.offset, type: item.type, seq: item.seq, key: key, verified: true))
                }
            } else if let bytes = item.rebuilt {
                pieces.append(.bytes(bytes))
                recordsRestored += 1
            } else if case .copy(let offset, let length)? = pieces.last, offset + length == item.offset {
                pieces[pieces.count - 1] = .copy(offset: offset, length: length + item.length)
            } else {
                pieces.append(.copy(offset: item.offset, length: item.length))
            }
        }
        dropped.sort { $0.offset < $1.offset }

        // The header.
        var header: SegmentHeader
        var headerProblem: String?
        switch segment.header {
        case .success(let decoded):
            header = SegmentHeader(segmentID: segment.id, baseSeq: decoded.baseSeq, dictionaryID: decoded.dictionaryID,
                dictionaryChecksum: decoded.dictionaryChecksum, sealing: decoded.sealing, keyPrefix: decoded.keyPrefix)
            if decoded.segmentID != segment.id {
                headerProblem = "its header names segment \(decoded.segmentID)"
            }
        case .failure(let problem):
            // No record in a segment has a seq below its base seq.
            let lowest = items.filter { $0.dropReason == nil }.map(\.seq).min()
            let sealing = encryption.map {
                SegmentHeader.Sealing(algorithm: $0.algorithm, storeID: $0.storeID, salt: FileCipher.randomSalt(), dictionarySalt: nil)
            }
            // The key prefix the records were read with: the one the segment's hint holds.
            header = SegmentHeader(
                segmentID: segment.id, baseSeq: min(lowest ?? nextSeq, Limits.maxSeq), sealing: sealing,
                keyPrefix: encryption == nil ? segment.keyPrefix : [])
            headerProblem = segment.headerReason ?? "invalid segment header (\(problem.explanation))"
        }

        let changesSegment = headerProblem != nil || !dropped.isEmpty || recordsRestored > 0
        var repair = SegmentRepair(id: segment.id)
        if changesSegment {
            let tag = Int64(encryption == nil ? 0 : FileCipher.tagLength)  // a rebuilt record is sealed as it is written
            let newLength = pieces.reduce(Int64(header.byteCount)) { total, piece in
                switch piece {
                case .copy(_, let length): total + length
                case .bytes(let bytes): total + Int64(bytes.count) + tag
                }
            }
            var change = RepairReport.Change(
                kind: .rewriteSegment, file: segment.path, bytesBefore: segment.length, bytesAfter: newLength,
                droppedRanges: dropped, recordsDropped: recordsDropped, recordsRestored: recordsRestored, reason: "")
            let isPrefix: Bool = switch pieces.count {
            case 0: true
            case 1: if case .copy(Int64(header.byteCount), _) = pieces[0] { true } else { false }
            default: false
            }
            if headerProblem == nil && isPrefix {
                change.kind = .truncateSegment
                change.reason = segment.corrupt.last?.kind == .tornTail
                    ? "cut the torn tail of the active segment (a write a crash interrupted)"
                    : "cut the damaged end of the segment"
                repair.truncateTo = newLength
            } else {
                var reasons: [String] = []
                if let headerProblem { reasons.append("\(headerProblem); written anew with base seq \(header.baseSeq)") }
                let ranges = segment.corrupt.filter { $0.kind != .uncommittedBatch && $0.offset < segment.length }.count
                if ranges > 0 {
                    reasons.append(encryption == nil
                        ? "\(ranges) damaged range\(ranges == 1 ? "" : "s") dropped, every intact record kept byte for byte"
                        : "\(ranges) damaged range\(ranges == 1 ? "" : "s") dropped, every intact record kept (sealed again with a new salt)")
                }
                if recordsDropped > 0 { reasons.append("\(recordsDropped) unreadable or never applied record\(recordsDropped == 1 ? "" : "s") dropped") }
                change.reason = reasons.joined(separator: "; ")
                repair.rewrite = (header, pieces)
                if case .success(let decoded) = segment.header { repair.sourceSalt = decoded.sealing?.salt }
            }
            plan.report.changes.append(change)
            plan.backupFiles.append(SegmentName.segment(segment.id))
        }
        plan.report.lostRecords += lost

        if segment.hasHint && (changesSegment || segment.hintProblem != nil) {
            let hintName = SegmentName.hint(segment.id)
            let hintPath = path(hintName)
            let before = (try? size(of: hintName)) ?? 0
            repair.hintChange = plan.report.changes.count
            plan.report.changes.append(.init(
                kind: .rebuildHint, file: hintPath, bytesBefore: before, bytesAfter: nil,
                reason: changesSegment ? "its segment changes" : "invalid: \(segment.hintProblem ?? "")"))
            plan.backupFiles.append(hintName)
        }
        if repair.rewrite != nil || repair.truncateTo != nil || repair.hintChange != nil { plan.segments.append(repair) }
    }

    /// Drops what the reader would not apply once the segment is rewritten (``BatchAssembler``,
    /// the one statement of the batch rules): among the records kept, in file order, a member
    /// whose batch does not complete, and the commit record of a batch whose members are not all
    /// there. A record the hint rebuilt can complete a batch the segment's damage had broken.
    /// Members inside `tornTail` go with it (the range is reported, not each record). One pass
    /// decides: a commit record takes its members whether its batch is whole or not. A record
    /// dropped because its value does not expand still counts as a member, as it does for the open
    /// (which indexes such a record and fails its read): dropping it must not make whole a batch the
    /// open found with too many members.
    static func dropUnappliedBatches(_ items: inout [Item], tornTail: DamagedRange?) {
        var assembler = BatchAssembler()
        var applied = Set<Int>()
        var indexAt: [Int64: Int] = [:]
        for index in items.indices {
            let item = items[index]
            if item.flags & RecordFlags.batchMember != 0 {
                indexAt[item.offset] = index
                assembler.hold(.init(
                    key: [], type: item.type, seq: item.seq, valueLength: 0, expiresAt: nil,
                    location: RecordLocation(segmentID: 0, offset: UInt32(truncatingIfNeeded: item.offset), length: 0)))
                continue
            }
            guard item.type == .batch else { continue }
            switch assembler.commit(firstSeq: item.batchFirstSeq, commitSeq: item.seq, count: item.batchCount) {
            case .whole(let members) where members.allSatisfy({ indexAt[Int64($0.location.offset)].map { items[$0].dropReason == nil } ?? true }):
                applied.formUnion(members.compactMap { indexAt[Int64($0.location.offset)] })
            case .whole, .incomplete:
                // Incomplete, or whole with a member that is dropped (its value does not expand): it
                // cannot stay whole once the segment is rewritten.
                items[index].rebuilt = nil
                items[index].dropReason = "the commit record of a batch whose members are not all there (never applied)"
                items[index].dropKind = .uncommittedBatch
            }
        }
        for index in items.indices where items[index].dropReason == nil && items[index].flags & RecordFlags.batchMember != 0 && !applied.contains(index) {
            items[index].rebuilt = nil
            if let tornTail, tornTail.contains(items[index].offset) {
                items[index].dropReason = ""
                items[index].dropKind = .tornTail
            } else {
                items[index].dropReason = "a member of a batch without its commit record (never applied)"
                items[index].dropKind = .uncommittedBatch
            }
        }
    }

    /// The bytes of a record a hint entry describes completely — a delete or a batch commit — or nil.
    /// `sealed` (an encrypted store's entry): its plain form, which the rewrite seals at its place.
    /// `keyPrefix`: the key prefix the segment's header names, which the record's key may elide.
    static func rebuild(_ entry: HintedRecord, sealed: Bool, keyPrefix: [UInt8]) -> [UInt8]? {
        var value: [UInt8] = []
        switch entry.type {
        case .put:
            return nil
        case .delete:
            guard entry.valueLength == 0 else { return nil }
        case .batch:
            // A commit record's value is its batch's member count, which its key and seq give.
            let first = littleEndian(entry.key)
            guard entry.key.count == 8, first < entry.seq else { return nil }
            var count = entry.seq - first
            repeat {
                value.append(UInt8(count & 0x7F) | (count >= 0x80 ? 0x80 : 0))
                count >>= 7
            } while count > 0
            guard value.count == entry.valueLength else { return nil }
        }
        var buffer = ByteBuffer(capacity: Limits.maxRecordOverhead + entry.key.count + value.count)
        entry.key.withBytes { key in
            value.withBytes { value in
                keyPrefix.withBytes { keyPrefix in
                    _ = RecordEncoder().append(
                        type: entry.type, seq: entry.seq, key: key, value: value, expiresAt: nil,
                        batchMember: entry.flags & RecordFlags.batchMember != 0, keyPrefix: keyPrefix, to: &buffer)
                }
            }
        }
        let bytes = buffer.copyBytes()
        guard Int64(bytes.count + (sealed ? FileCipher.tagLength : 0)) == entry.length,
              case .success(let header) = bytes.withBytes({ RecordHeader.validate($0, keyPrefixLength: keyPrefix.count) }),
              header.type == entry.type, header.flags | (sealed ? RecordFlags.encrypted : 0) == entry.flags, header.seq == entry.seq
        else { return nil }
        return bytes
    }
}
