extension CaskStore {
    /// How far a long call has got — ``verify(at:progress:)``, ``compact(progress:)`` and
    /// ``repair(at:dryRun:backupDirectory:progress:)`` all report it: bytes done of bytes to do,
    /// per phase. Reported on the calling thread, about once per 1% of `total` (and at most once per
    /// MiB), and when a phase ends. `done` can pass `total` when a writer appends to a segment
    /// being read (verify beside a live writer).
    public struct Progress: Sendable, Equatable {
        public enum Phase: String, Sendable, Equatable {
            /// ``CaskStore/verify(at:progress:)`` reading every segment.
            case verifying
            /// ``CaskStore/compact(progress:)`` reading the segments it compacts.
            case compacting
            /// A repair reading every segment and hint file (the whole of a dry run).
            case checking
            /// A repair copying the files about to change into the backup directory.
            case backingUp = "backing up"
            /// A repair writing the repaired files.
            case repairing
            /// ``CaskStore/rekey(at:from:to:progress:)`` copying the store's entries under the new key.
            case rekeying
        }

        public var phase: Phase
        public var done: Int64
        public var total: Int64

        public init(phase: Phase, done: Int64, total: Int64) {
            self.phase = phase
            self.done = done
            self.total = total
        }
    }
}
