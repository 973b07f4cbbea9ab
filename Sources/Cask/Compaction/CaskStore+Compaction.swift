extension CaskStore {
    /// What a compaction did.
    public struct CompactionResult: Sendable, Equatable {
        /// Segments rewritten (and deleted), and segments written in their place.
        public var segmentsCompacted = 0
        public var segmentsWritten = 0
        /// File bytes of the segments compacted, and of the segments that replaced them.
        public var bytesBefore: Int64 = 0
        public var bytesAfter: Int64 = 0
        /// Records copied (live puts, and tombstones still needed), and records dropped.
        public var recordsCopied = 0
        public var recordsDropped = 0
        public var milliseconds: UInt64 = 0
        /// Damage found in segments chosen for compaction: each such segment was left as it is (and
        /// is skipped by later compactions of this open store); `cask recover` repairs it.
        public var damage: [DamagedRange] = []

        public init() {}
    }

    /// Compacts now: seals the active segment if it holds records, then rewrites every sealed
    /// segment that holds dead records, keeping only live ones.
    ///
    /// Reads and writes continue meanwhile (a write racing the compaction always wins). A crash at
    /// any instant leaves the store opening to its state before or after, with every acknowledged
    /// write. Segments with damage are left alone: those the open found, and those this call finds
    /// (listed in the result's ``CompactionResult/damage``; the rest is compacted all the same).
    /// One compaction runs at a time; a second call waits.
    /// Complexity: one sequential read of the segments compacted and one write of their live records.
    ///
    /// `progress`, if given, is called on the calling thread as the segments are read (phase
    /// ``Progress/Phase/compacting``), with the bytes read so far and the bytes to read in all.
    @discardableResult
    public func compact(progress: ((Progress) -> Void)? = nil) throws(CaskError) -> CompactionResult {
        guard let writer else {
            throw isClosed.load(ordering: .relaxed) ? CaskError.closed : CaskError.readOnly
        }
        return try compactionGate.withLock { (_) throws(CaskError) -> CompactionResult in
            try writer.withLock { (w) throws(CaskError) in
                try w.checkUsable()
                let hasRecords = state.read { $0.stats[w.active.id]?.records ?? 0 } > 0
                if hasRecords { try rotate(&w, followUp: false) }
            }
            return try compactor().run(.everythingDead, progress: progress)
        }
    }

    func compactor() -> Compactor {
        Compactor(state: state, writer: writer!, fileSystem: fileSystem, directory: directory, options: options)
    }

    /// After a segment is sealed: compacts in the background if the policy says so.
    func scheduleCompactionIfDue() {
        guard options.automaticCompaction, writer != nil else { return }
        let compactor = compactor(), gate = compactionGate
        background.async(group: backgroundWork) {
            gate.withLock { _ in
                // Closed meanwhile: leave it for the next open.
                guard !compactor.writer.withLock({ $0.closed || $0.failure != nil }) else { return }
                // A failure leaves the store as it was (see Compactor); the next seal tries again.
                _ = try? compactor.run(.policy)
            }
        }
    }
}
