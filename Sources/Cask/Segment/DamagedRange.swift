/// A byte range of a store file that does not hold what it should, named the same way by every
/// reader of a store: the open (``RecoveryReport/damagedRanges``), ``CaskStore/verify(at:progress:)``
/// (``VerificationReport/damagedRanges``) and ``CaskStore/repair(at:dryRun:backupDirectory:progress:)``
/// (``RepairReport/Change/droppedRanges``). FORMAT.md, "Reading a store", defines each kind and
/// how a range is bounded.
public struct DamagedRange: Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable, Equatable {
        /// The 40-byte segment header is invalid (bytes `0 ..< 40`), or names another segment
        /// (bytes `16 ..< 24`).
        case segmentHeader = "segment-header"
        /// Bytes inside a segment that are not a valid record (a bad checksum, impossible lengths, a
        /// payload that does not decompress), or at the end of a sealed segment; or records lost
        /// past a segment's end, which its hint file still describes. Every open skips them.
        case record
        /// The end of the active segment: an incomplete record, an incomplete batch, or a header
        /// whose creation was torn — a write a crash interrupted, or an append still in progress.
        /// A writable open cuts it.
        case tornTail = "torn-tail"
        /// Valid batch members whose batch is not complete (its commit record, or some of its
        /// members, lost in damage), and the commit record of such a batch: never applied.
        case uncommittedBatch = "uncommitted-batch"
        /// The `COMPACTION` manifest is invalid (the whole file): every open ignores it, and
        /// `cask recover` removes it.
        case compactionManifest = "compaction-manifest"
    }

    public var kind: Kind
    /// The file's path: a segment's, or the manifest's.
    public var file: String
    /// The segment's id; nil for the compaction manifest.
    public var segmentID: UInt64?
    public var offset: Int64
    public var length: Int64
    /// Why, in a sentence.
    public var reason: String

    public init(kind: Kind, file: String, segmentID: UInt64?, offset: Int64, length: Int64, reason: String) {
        self.kind = kind
        self.file = file
        self.segmentID = segmentID
        self.offset = offset
        self.length = length
        self.reason = reason
    }

    /// The offset just past the range.
    public var end: Int64 { offset + length }

    /// Whether `count` bytes at `position` lie inside the range.
    public func contains(_ position: Int64, length count: Int64 = 1) -> Bool {
        position >= offset && position + count <= end
    }

    /// The range without its file: `bytes 40..<151 (111 bytes, record): checksum mismatch`.
    public var summary: String { "bytes \(offset)..<\(end) (\(length) byte\(length == 1 ? "" : "s"), \(kind.rawValue)): \(reason)" }

    public var description: String { "\(file) \(summary)" }
}
