/// Space accounting for one segment: what its records hold and how much of it is still live.
/// Live means the index points at the record; everything else (overwritten values, deleted keys,
/// tombstones, corrupt ranges) is dead and compaction can reclaim it.
public struct SegmentStats: Sendable, Equatable {
    public var id: UInt64
    /// The segment file's size, header included.
    public var fileBytes: Int64 = 0
    public var records = 0
    public var liveRecords = 0
    public var liveBytes: Int64 = 0
    /// Sum of the uncompressed value lengths of the records.
    public var valueBytes: Int64 = 0
    public var minSeq: UInt64?
    public var maxSeq: UInt64?
    /// Whether the segment is sealed (no longer appended to).
    public var sealed = false
    /// Whether recovery found damage in it (compaction leaves such segments alone, so that the
    /// damage stays where `verify` and `cask recover` can find it).
    public var damaged = false
    /// The dictionary the segment's header names (its records may be compressed against it); nil for none.
    public var dictionaryID: UInt32?
    /// The length of the segment's header: 40 bytes, 108 in an encrypted store.
    public var headerBytes = Int64(SegmentHeader.length)

    public var deadBytes: Int64 { max(0, fileBytes - headerBytes - liveBytes) }

    package init(id: UInt64) { self.id = id }

    mutating func noteRecord(seq: UInt64, valueLength: Int) {
        records += 1
        valueBytes += Int64(valueLength)
        minSeq = Swift.min(minSeq ?? seq, seq)
        maxSeq = Swift.max(maxSeq ?? seq, seq)
    }
}
