/// What opening a store found and did. Available as ``CaskStore/recoveryReport``.
public struct RecoveryReport: Sendable, Equatable, CustomStringConvertible {
    /// A cut made at the end of the active segment (a torn write from a crash).
    public struct Truncation: Sendable, Equatable, CustomStringConvertible {
        public var file: String
        /// The new length of the file.
        public var offset: Int64
        public var bytesRemoved: Int64
        public var reason: String

        public var description: String { "\(file): cut \(bytesRemoved) bytes at offset \(offset) (\(reason))" }
    }

    public var segments = 0
    /// Segments indexed from their hint files (the rest were scanned).
    public var segmentsFromHints = 0
    /// Records read from hint files or segment scans.
    public var recordsScanned = 0
    public var truncations: [Truncation] = []
    /// Every damaged range the open found and skipped, in segment id order, then by offset (an
    /// invalid compaction manifest's first). A torn tail that a writable open cut is in
    /// ``truncations`` instead; a read-only open, which cuts nothing, lists it here.
    public var damagedRanges: [DamagedRange] = []
    /// Hint files that were present but not used (the segment was read instead).
    public var invalidHints: [InvalidHint] = []
    /// Files the store directory holds that are not part of the store, each with why: names that
    /// look like a store's but are not one (`4.cask`, an id out of range), and hint files whose
    /// segment does not exist. Every reader ignores them, and nothing removes them but `recover`
    /// (hint files only, into its backup).
    public var ignoredFiles: [String] = []

    public var bytesTruncated: Int64 { truncations.reduce(0) { $0 + $1.bytesRemoved } }
    /// True when the store opened without cutting or skipping anything.
    public var isClean: Bool { truncations.isEmpty && damagedRanges.isEmpty }

    public var description: String {
        var lines = ["\(segments) segments (\(segmentsFromHints) from hints), \(recordsScanned) records"]
        lines += truncations.map { "truncated: \($0)" }
        lines += damagedRanges.map { "corrupt: \($0)" }
        lines += invalidHints.map { "invalid hint ignored: \($0)" }
        lines += ignoredFiles.map { "ignored: \($0)" }
        return lines.joined(separator: "\n")
    }
}
