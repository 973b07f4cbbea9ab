/// What ``CaskStore/verify(at:progress:)`` found: every segment it read, every record it checked,
/// and every damaged byte range and invalid hint file, each with its file and offset.
public struct VerificationReport: Sendable, Equatable, CustomStringConvertible {
    /// A byte range of a segment that does not hold what it should.
    public struct Problem: Sendable, Equatable, CustomStringConvertible {
        public enum Kind: String, Sendable, Equatable {
            /// The 40-byte segment header is damaged or names another segment.
            case segmentHeader = "segment-header"
            /// Bytes inside the segment that are not a valid record (bad checksum, impossible
            /// lengths, a payload that does not decompress). Opening the store skips them.
            case record
            /// An incomplete record (or header) at the very end of the active segment: a torn write
            /// from a crash, or an append still in progress. The next writable open cuts it.
            case tornTail = "torn-tail"
            /// Valid batch members whose batch is not complete (its commit record, or some of its
            /// members, lost in damage), and the commit record of such a batch: never applied.
            case uncommittedBatch = "uncommitted-batch"
            /// The `COMPACTION` manifest is invalid (every open ignores it; `cask recover` removes it).
            case compactionManifest = "compaction-manifest"
        }

        public var kind: Kind
        /// The segment file's path.
        public var file: String
        public var offset: Int64
        public var length: Int64
        public var reason: String

        public var description: String { "\(file) offset \(offset) (\(length) bytes, \(kind.rawValue)): \(reason)" }
    }

    /// A hint file that opening the store would ignore, or that disagrees with its segment.
    public struct InvalidHint: Sendable, Equatable, CustomStringConvertible {
        /// The hint file's path.
        public var file: String
        public var reason: String

        public var description: String { "\(file): \(reason)" }
    }

    /// One segment file as verified.
    public struct Segment: Sendable, Equatable {
        public enum Hint: Sendable, Equatable {
            /// The segment has no hint file (the active segment of an open store, or a damaged one).
            case absent
            /// The hint file is valid and matches the first `coveredBytes` bytes of the segment record for record.
            case valid(entries: Int, coveredBytes: Int64)
            /// The hint file is listed in ``VerificationReport/invalidHints``.
            case invalid
        }

        public var id: UInt64
        /// The segment file's path.
        public var file: String
        /// The file's size when it was verified.
        public var bytes: Int64
        /// Valid records found (a record whose payload fails to decompress counts here and in the problems).
        public var records = 0
        public var hint = Hint.absent

        public init(id: UInt64, file: String, bytes: Int64) {
            self.id = id
            self.file = file
            self.bytes = bytes
        }
    }

    /// The store directory.
    public var directory: String
    /// Segment files in id order.
    public var segments: [Segment] = []
    /// Damage in segment files, ordered by file then offset.
    public var problems: [Problem] = []
    /// Invalid hint files, including hint files whose segment does not exist.
    public var invalidHints: [InvalidHint] = []
    /// Files that are not part of the store, each `path: why` — names that look like a store's but
    /// are not one, and segments a valid compaction manifest retires (the next writable open
    /// removes them). Not read, and not damage.
    public var ignoredFiles: [String] = []

    public init(directory: String) { self.directory = directory }

    /// Records checked across all segments.
    public var recordsChecked: Int { segments.reduce(0) { $0 + $1.records } }
    /// Bytes of all segment files read.
    public var bytesChecked: Int64 { segments.reduce(0) { $0 + $1.bytes } }
    /// True when no problem was found and every hint file is valid.
    ///
    /// An invalid hint file costs nothing but open time (the segment is scanned instead), yet it
    /// counts as damage here: a hint that disagrees with its segment would index the wrong bytes.
    public var isClean: Bool { problems.isEmpty && invalidHints.isEmpty }

    public var description: String {
        var lines = ["\(directory): \(segments.count) segments, \(recordsChecked) records, \(bytesChecked) bytes"]
        lines += problems.map { "corrupt: \($0)" }
        lines += invalidHints.map { "invalid hint: \($0)" }
        lines += ignoredFiles.map { "ignored: \($0)" }
        lines.append(isClean ? "clean" : "damage found")
        return lines.joined(separator: "\n")
    }
}
