#if canImport(Glibc)
import Glibc
#endif

/// Loading a segment's hint file in place of reading the segment (FORMAT.md, "Hint files").
extension StoreRecovery {
    enum HintLoad {
        /// Applied; the segment bytes it covers, where its last entry that is not a batch member ends,
        /// the incomplete batches it lists (damage, as a read of the records would find), and the key
        /// prefix it holds (the segment header's).
        case applied(covered: Int64, settled: Int64, damage: [DamagedRange], keyPrefix: [UInt8])
        /// Unusable, and why; the segment is read in full instead. `lostTail`: the hint describes
        /// more than the segment holds.
        case invalid(InvalidHint, lostTail: DamagedRange?)
    }

    /// Applies a hint file, or says why it cannot be used. `sealing`: an encrypted store's, for the
    /// segment; `keyPrefix`: the key prefix its header names, nil when the header is damaged.
    func loadHint(
        id: UInt64, segmentLength: Int64, sealing: HintFile.Sealing?, keyPrefix: [UInt8]?, into result: inout Result, stats: inout SegmentStats,
        batch: inout BatchAssembler
    ) -> HintLoad {
        let hintPath = path(SegmentName.hint(id)), segmentPath = path(SegmentName.segment(id))
        let bytes: [UInt8]
        switch SegmentReader.readHint(of: id, segmentLength: segmentLength, at: hintPath, beyondSegment: false, sealing: sealing, fileSystem: fileSystem) {
        case .read(let read): bytes = read
        case .unusable(let invalid):
            // Unreadable, or too long for this segment; its header alone says whether the segment lost its tail.
            return .invalid(invalid, lostTail: SegmentReader.lostTail(
                segmentID: id, path: segmentPath, segmentLength: segmentLength, hintPath: hintPath, sealing: sealing, fileSystem: fileSystem))
        }
        var loaded = stats
        var loadedBatch = batch
        var incomplete: [DamagedRange] = []
        var settled = stats.headerBytes
        let pending = PendingIndexUpdates(index: result.index)
        let outcome = bytes.withUnsafeBytes { raw in
            // Size the index for the entries at once rather than growing its way there. Usually the
            // pre-pass (`hintedEntries`) already did, for every hint; this covers one it could not read.
            if let entries = Self.declaredEntries(raw, segmentLength: segmentLength) {
                result.index.reserve(result.index.count + entries)
            }
            let outcome = HintFile.apply(raw, segmentID: id, segmentLength: segmentLength, sealing: sealing, keyPrefix: keyPrefix) { entry in
                let location = RecordLocation(segmentID: UInt32(id), offset: UInt32(entry.offset), length: UInt32(entry.recordLength))
                Self.count(seq: entry.seq, valueLength: entry.valueLength, into: &result, stats: &loaded)
                if entry.flags & RecordFlags.batchMember == 0 { settled = entry.offset + Int64(entry.recordLength) }
                if entry.flags & RecordFlags.batchMember != 0 {
                    loadedBatch.hold(.init(
                        key: Array(entry.key), type: entry.type, seq: entry.seq, valueLength: entry.valueLength,
                        expiresAt: entry.expiresAt, location: location))
                } else if entry.type == .batch {
                    switch loadedBatch.commit(firstSeq: BatchAssembler.firstSeq(ofCommitKey: entry.key), commitSeq: entry.seq) {
                    case .whole(let members):
                        for member in members {
                            member.key.withUnsafeBytes { key in
                                Self.index(key: key, type: member.type, seq: member.seq, expiresAt: member.expiresAt, location: member.location,
                                           into: &result, stats: &loaded, pending: pending)
                            }
                        }
                    case .incomplete(let found, let expected):
                        incomplete += SegmentReader.incompleteBatch(found: found, expected: expected, commitSeq: entry.seq, commitAt: location, count: nil, in: segmentPath)
                    }
                } else {
                    Self.index(key: entry.key, type: entry.type, seq: entry.seq, expiresAt: entry.expiresAt, location: location,
                               into: &result, stats: &loaded, pending: pending)
                }
            }
            Self.drain(pending, into: &result, stats: &loaded)
            return outcome
        }
        switch outcome {
        case .invalid:
            return bytes.withUnsafeBytes { raw in
                .invalid(
                    InvalidHint(file: hintPath, segmentID: id, reason: SegmentReader.refusal(of: raw, segmentID: id, segmentLength: segmentLength, sealing: sealing)),
                    lostTail: SegmentReader.lostTail(segmentID: id, path: segmentPath, segmentLength: segmentLength, hint: raw, sealing: sealing))
            }
        case .inconsistent:
            result.inconsistentHint = id
            return .applied(covered: 0, settled: 0, damage: [], keyPrefix: [])
        case .applied(let summary):
            stats = loaded
            batch = loadedBatch
            return .applied(covered: summary.coveredLength, settled: settled, damage: incomplete, keyPrefix: summary.keyPrefix)
        }
    }
}
