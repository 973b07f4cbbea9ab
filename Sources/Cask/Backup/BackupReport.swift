extension CaskStore {
    /// How ``backup(to:method:verify:progress:)`` places the segments in the copy.
    public enum BackupMethod: Sendable, Equatable {
        /// Sealed segments and their hint files get a second name in the copy (a hard link: no
        /// byte copied, whatever their size) when the destination is on the store's file system;
        /// everything else, and everything on another file system, is copied.
        case linkWherePossible
        /// Every file is copied (`copy_file_range`): a copy that shares no block with the store.
        case copy
    }

    /// What a ``backup(to:method:verify:progress:)`` made.
    public struct BackupReport: Sendable, Equatable, CustomStringConvertible {
        /// The backup: a store directory, complete.
        public var destination: String
        /// The copy holds every commit up to this seq and none after it (0 for a store with no
        /// record): the highest seq of a record in it.
        public var lastSeq: UInt64 = 0
        /// The keys the store had at that point (keys whose expiry has passed but whose record is
        /// still there included: the copy holds them as the store did).
        public var keys = 0
        /// Segments given a second name (hard links) and segments copied.
        public var segmentsLinked = 0
        public var segmentsCopied = 0
        /// Hint files linked or copied beside their segments.
        public var hintFiles = 0
        /// Dictionary files written for the segments that name them.
        public var dictionaryFiles = 0
        /// Bytes of the files linked, and bytes copied.
        public var bytesLinked: Int64 = 0
        public var bytesCopied: Int64 = 0
        /// With `verify`: what is wrong with the copy, one sentence each, naming the file; empty
        /// when every record of it reads back intact, its hints agree with its segments, it opens
        /// clean, and it holds the keys and the last seq above. Nil when not verified.
        public var verificationProblems: [String]?

        public init(destination: String) { self.destination = destination }

        public var description: String {
            var text = "backed up to \(destination): \(keys) key\(keys == 1 ? "" : "s") up to seq \(lastSeq); "
                + "\(segmentsLinked + segmentsCopied) segment\(segmentsLinked + segmentsCopied == 1 ? "" : "s") "
                + "(\(segmentsLinked) linked, \(segmentsCopied) copied), \(hintFiles) hint file\(hintFiles == 1 ? "" : "s")"
                + (dictionaryFiles == 0 ? "" : ", \(dictionaryFiles) dictionar\(dictionaryFiles == 1 ? "y" : "ies")") + "; "
                + "\(bytesLinked) bytes linked, \(bytesCopied) bytes copied"
            if let problems = verificationProblems {
                text += problems.isEmpty ? "\nverified: every record intact, opens clean" : "\n" + problems.joined(separator: "\n")
            }
            return text
        }
    }
}
