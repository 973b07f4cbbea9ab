/// One segment file as ``CaskStore/inspect(at:segment:_:)`` found it.
public struct InspectedSegment: Sendable, Equatable {
    public var id: UInt64
    /// The segment file's path.
    public var file: String
    /// The file's size when it was opened.
    public var bytes: Int64
    /// The header's base sequence number, or nil when the header is invalid (reported as damage).
    public var baseSeq: UInt64?
    /// The dictionary the header names (a version 2 or 4 segment), nil for none.
    public var dictionaryID: UInt32?
    /// The key prefix the segment's records are read with (a version 4 header's, or behind a
    /// damaged header its hint's), empty for none.
    public var keyPrefix: [UInt8] = []
}

/// One valid record as it is on disk (FORMAT.md, "Records"), without its value.
public struct InspectedRecord: Sendable, Equatable {
    public var segmentID: UInt64
    /// Where the record starts in its segment file.
    public var offset: Int64
    /// The whole record on disk: header, key and payload.
    public var bytes: Int
    public var type: RecordType
    public var seq: UInt64
    /// The key's bytes; for a batch commit, the 8 bytes of its batch's first seq.
    public var key: [UInt8]
    /// The value's length as written (uncompressed); 0 for a delete.
    public var valueBytes: Int
    /// The payload's length on disk: the compressed length when ``isCompressed``, else ``valueBytes``.
    public var storedBytes: Int
    /// Whether the payload is an LZ4 block.
    public var isCompressed: Bool
    /// Whether that block was compressed against the segment's dictionary.
    public var usesDictionary = false
    /// Whether the record belongs to the atomic batch committed by a later batch-commit record.
    public var isBatchMember: Bool
    /// How many of the key's first bytes are the segment's key prefix's, not stored (0: the key is whole).
    public var elidedKeyBytes = 0
    /// The expiry time (milliseconds since 1970-01-01 UTC) of a put that has one.
    public var expiresAtMilliseconds: UInt64?
    /// For a batch-commit record, the seqs of the members it commits (`first ..< seq`); else nil.
    public var committedSeqs: Range<UInt64>?
}

/// What ``CaskStore/inspect(at:segment:_:)`` reports, in file order.
public enum InspectedItem: Sendable, Equatable {
    /// A segment file, before its records and damage.
    case segment(InspectedSegment)
    /// A valid record (lengths and checksum hold).
    case record(InspectedRecord)
    /// A damaged byte range: a bad segment header, bytes that are not a valid record, or a torn
    /// tail at the end of the active segment (a crash, or an append in progress).
    case damage(DamagedRange)
}
