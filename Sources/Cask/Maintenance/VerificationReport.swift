/// What ``CaskStore/verify(at:progress:)`` found: every segment it read, every record it checked,
/// and every damaged byte range and invalid hint file, each with its file and offset.
public struct VerificationReport: Sendable, Equatable, CustomStringConvertible {
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
        /// Valid records found (a record whose payload fails to decompress counts here and in ``VerificationReport/damagedRanges``).
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
    /// Damage, ordered by file then offset: the compaction manifest's first, then each segment's.
    /// The same ranges, with the same kinds, as an open reports (``RecoveryReport/damagedRanges``),
    /// plus values that do not decompress (``DamagedRange/Kind/record``), which only verify looks for.
    public var damagedRanges: [DamagedRange] = []
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
    public var isClean: Bool { damagedRanges.isEmpty && invalidHints.isEmpty }

    public var description: String {
        var lines = ["\(directory): \(segments.count) segments, \(recordsChecked) records, \(bytesChecked) bytes"]
        lines += damagedRanges.map { "corrupt: \($0)" }
        lines += invalidHints.map { "invalid hint: \($0)" }
        lines += ignoredFiles.map { "ignored: \($0)" }
        lines.append(isClean ? "clean" : "damage found")
        return lines.joined(separator: "\n")
    }
}
