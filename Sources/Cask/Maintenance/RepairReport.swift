/// What ``CaskStore/repair(at:dryRun:backupDirectory:progress:)`` changed in a store — or, in a dry
/// run, what it would change: every file, what was done to it, and the bytes and records dropped.
public struct RepairReport: Sendable, Equatable, CustomStringConvertible {
    /// One file changed or removed.
    public struct Change: Sendable, Equatable, CustomStringConvertible {
        public enum Kind: String, Sendable, Equatable {
            /// A segment cut short: everything after its last intact record was damaged (a torn
            /// write, or damage reaching the end of the file).
            case truncateSegment = "truncate"
            /// A segment rewritten with every intact record copied byte for byte, without its damaged
            /// ranges (and with a valid header when its header was damaged).
            case rewriteSegment = "rewrite"
            /// A hint file written again from its (intact or repaired) segment.
            case rebuildHint = "rebuild-hint"
            /// A file removed: a hint file without a segment, an invalid compaction manifest.
            case removeFile = "remove"
            /// A leftover temporary file of an interrupted write removed: housekeeping (a writer's open
            /// removes them too), not damage.
            case removeLeftover = "remove-leftover"
            /// A segment or hint file removed because a valid compaction manifest lists its segment
            /// as replaced, then the manifest itself: the interrupted compaction is finished.
            case finishCompaction = "finish-compaction"
            /// An encrypted store's `ENCRYPTION` file, missing or damaged, written again from a
            /// segment header that authenticates under the key given (its store id and algorithm).
            case rewriteEncryptionFile = "rewrite-encryption-file"
        }

        public var kind: Kind
        /// The file's path.
        public var file: String
        public var bytesBefore: Int64
        /// The file's size afterwards: 0 when it is removed, nil when it is not known yet (the
        /// hint file a dry run would rebuild).
        public var bytesAfter: Int64?
        /// The byte ranges of the old file that the new one does not hold (segments only), in
        /// order: the damaged ranges an open or ``CaskStore/verify(at:progress:)`` reports (their
        /// reasons prefixed with what the repair does), and the intact records dropped with them.
        public var droppedRanges: [DamagedRange] = []
        /// Records that were readable but are dropped: batch members whose commit record is gone
        /// (never applied), values that do not decompress. Records inside a damaged range are not
        /// counted here: their bytes do not say how many there were (``lostRecords`` names those
        /// that a hint file still describes).
        public var recordsDropped = 0
        /// Records rebuilt, byte for byte, from the segment's hint file where the segment's own bytes
        /// were damaged: deletes and batch commit records, which a hint describes completely.
        public var recordsRestored = 0
        /// Why, in a sentence.
        public var reason: String

        public var bytesDropped: Int64 { droppedRanges.reduce(0) { $0 + $1.length } }

        public var description: String {
            var text = "\(kind.rawValue) \(file): \(reason)"
            switch kind {
            case .truncateSegment, .rewriteSegment:
                text += "; \(bytesBefore) -> \(bytesAfter ?? 0) bytes"
                if recordsDropped > 0 { text += ", \(recordsDropped) intact record\(recordsDropped == 1 ? "" : "s") dropped" }
                if recordsRestored > 0 { text += ", \(recordsRestored) record\(recordsRestored == 1 ? "" : "s") restored from the hint file" }
                for range in droppedRanges { text += "\n  dropped \(range.summary)" }
            case .rebuildHint, .rewriteEncryptionFile:
                if let bytesAfter { text += "; \(bytesBefore) -> \(bytesAfter) bytes" }
            case .removeFile, .removeLeftover, .finishCompaction:
                text += "; \(bytesBefore) bytes"
            }
            return text
        }
    }

    /// A record the repair takes away whose identity is known: an intact record it drops (a member
    /// of a batch never applied, a value that does not expand), a record inside a damaged range that
    /// the segment's hint file names (the hint agreed with every intact record of the segment, so it
    /// is trusted), or — unverified — one whose damaged bytes still parse as a header.
    public struct LostRecord: Sendable, Equatable, CustomStringConvertible {
        /// The segment file's path.
        public var file: String
        public var offset: Int64
        public var type: RecordType
        public var seq: UInt64
        public var key: [UInt8]
        /// True when a consistent hint file names this record; false when only its damaged bytes
        /// suggest it (any field, the key included, may then be wrong).
        public var verified: Bool

        public var description: String {
            let what = verified ? "lost" : "possibly lost (its damaged bytes suggest)"
            return "\(what): \(type) of key \(RepairReport.printable(key)) (seq \(seq)) at \(file) offset \(offset)"
        }
    }

    /// The store directory.
    public var directory: String
    /// True when nothing was changed: the report is the plan.
    public var dryRun = false
    /// Where every file the repair changes or removes was copied first (in a dry run: would be
    /// copied). Nil when there is nothing to change.
    public var backupDirectory: String?
    public var segmentsChecked = 0
    public var recordsChecked = 0
    public var bytesChecked: Int64 = 0
    /// In the order they are (or would be) made.
    public var changes: [Change] = []
    /// Records the repair takes away, where their identity is known (see ``LostRecord``).
    public var lostRecords: [LostRecord] = []
    /// Files that are not part of the store (names that look like a store's but are not one), each
    /// `path: why`: left alone, as every reader leaves them.
    public var ignoredFiles: [String] = []

    public init(directory: String) { self.directory = directory }

    /// True when the store needed nothing.
    /// True when the store needs no repair: nothing to change but leftover temporary files.
    public var isClean: Bool { changes.allSatisfy { $0.kind == .removeLeftover } }
    public var recordsDropped: Int { changes.reduce(0) { $0 + $1.recordsDropped } }
    public var recordsRestored: Int { changes.reduce(0) { $0 + $1.recordsRestored } }
    /// Bytes of segments dropped (damaged ranges and dropped records).
    public var bytesDropped: Int64 { changes.reduce(0) { $0 + $1.bytesDropped } }

    public var description: String {
        var lines = ["\(directory): \(segmentsChecked) segments, \(recordsChecked) records, \(bytesChecked) bytes checked"]
        if let backupDirectory { lines.append("\(dryRun ? "would back up to" : "backup"): \(backupDirectory)") }
        lines += changes.map(\.description)
        lines += lostRecords.map(\.description)
        lines += ignoredFiles.map { "ignored: \($0)" }
        lines.append(isClean ? "nothing to repair" : dryRun ? "dry run: nothing changed" : "repaired")
        return lines.joined(separator: "\n")
    }

    /// A key for a sentence: printable ASCII as is, other bytes (and the backslash) as `\xHH`.
    static func printable(_ key: [UInt8]) -> String {
        var text = "'"
        for byte in key {
            if byte >= 0x20 && byte < 0x7F && byte != UInt8(ascii: "\\") && byte != UInt8(ascii: "'") {
                text.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                let hex = String(byte, radix: 16)
                text += "\\x" + (hex.count == 1 ? "0" : "") + hex
            }
        }
        return text + "'"
    }
}
