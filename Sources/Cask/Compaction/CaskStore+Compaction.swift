import Dispatch

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

    /// Compacts now: seals the active segment if it holds dead records, then rewrites every sealed
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
            throw isClosed.load(ordering: .relaxed) ? CaskError.closed(path: directory) : CaskError.readOnly(path: directory)
        }
        return try compactionGate.withLock { (_) throws(CaskError) -> CompactionResult in
            let expired = state.read { Compactor.expiredBytes($0) }  // before the writer mutex
            try writer.withLock { (w) throws(CaskError) in
                try w.checkUsable()
                // Sealed (to be compacted with the rest) only when some of its records are dead:
                // else a compaction with nothing to do would leave one more segment each time.
                let activeID = w.active.id
                let hasDeadRecords = state.read { shared in
                    guard let stats = shared.stats[activeID], stats.records > 0 else { return false }
                    return stats.deadBytes + (expired[activeID] ?? 0) > 0
                }
                if hasDeadRecords { try rotate(&w, followUp: false) }
            }
            return try compactor().run(.everythingDead, progress: progress)
        }
    }

    /// Returns once the work the store started on its own has finished: automatic compactions,
    /// the hint files of sealed segments and dictionary training, including work that starts while
    /// it waits. Writes may go on meanwhile (and may start more).
    ///
    /// For a test or a benchmark that wants the machine quiet before it measures, or a caller about
    /// to copy the store's files with tools of its own. Blocks the calling thread; thread-safe.
    public func waitForBackgroundWork() {
        backgroundWork.wait()
    }

    func compactor() -> Compactor {
        Compactor(
            state: state, writer: writer!, fileSystem: fileSystem, directory: directory, options: options, observers: observers,
            dictionaries: dictionaries, encryption: encryption)
    }

    /// After a segment is sealed: compacts in the background if the policy says so, on the
    /// low-priority thread (``LowPriorityThread``), after the sealed segment's hint: while the
    /// application keeps every core busy, the compaction waits rather than its threads.
    func scheduleCompactionIfDue() {
        guard options.automaticCompaction, writer != nil else { return }
        let compactor = compactor(), gate = compactionGate
        LowPriorityThread.shared.async(group: backgroundWork) {
            gate.withLock { _ in
                // Closed meanwhile: leave it for the next open.
                guard !compactor.writer.withLock({ $0.closed || $0.failure != nil }) else { return }
                // A failure leaves the store as it was (see Compactor); the next seal tries again.
                _ = try? compactor.run(.policy)
            }
        }
    }

    /// The parts of the store that compact it when it is small (``CompactionWatch``); nil when
    /// automatic compaction is off, ``Options/idleCompactionDelay`` is 0, or the store is read-only.
    var smallStoreCompaction: SmallStoreCompaction? {
        guard options.automaticCompaction, options.idleCompactionDelay > 0, writer != nil else { return nil }
        return SmallStoreCompaction(
            compactor: compactor(), gate: compactionGate, queue: background, work: backgroundWork, groupCommit: groupCommit,
            delay: .microseconds(Int(min(options.idleCompactionDelay, 86_400) * 1_000_000)))
    }

    /// After a write that appended `bytes`, under the writer mutex: sets an idle check if none is
    /// pending, or, once per ``CompactionWatch/burstStep`` appended, compacts a small store that
    /// is mostly dead. O(1) but for that step's check (O(segments), and for a store that fits in one
    /// segment O(keys with an expiry)).
    func watchForCompaction(_ w: inout StoreWriter, appending bytes: Int64) {
        switch w.compactionWatch.noteWrite(appending: bytes) {
        case .nothing: return
        case .armIdleCheck: smallStoreCompaction?.armIdleCheck(&w)
        case .checkBurst: smallStoreCompaction?.queueIfDue(&w, floor: CompactionWatch.burstStep)
        }
    }
}

/// Compacts a store that fits in one segment once it is mostly dead: after writes pause for
/// ``CaskStore/Options/idleCompactionDelay`` (and after an open that finds it so), or while they go
/// on once per ``CompactionWatch/burstStep`` (``CompactionWatch``). Holds the store's parts, never
/// the store, so that a pending check does not keep it open; a check that finds it closed does nothing.
struct SmallStoreCompaction: Sendable {
    let compactor: Compactor
    let gate: Lock<Bool>
    let queue: DispatchQueue
    let work: DispatchGroup
    let groupCommit: GroupCommit
    let delay: DispatchTimeInterval

    /// Sets an idle check `delay` from now. Under the writer mutex.
    func armIdleCheck(_ w: inout StoreWriter) {
        w.compactionWatch.armed()
        queue.asyncAfter(deadline: .now() + delay) { idleCheckFired() }
    }

    private func idleCheckFired() {
        compactor.writer.withLock { w in
            guard !w.closed, w.failure == nil else { return w.compactionWatch.disarm() }
            let (idle, rearm) = w.compactionWatch.idleCheckFired()
            if rearm {
                queue.asyncAfter(deadline: .now() + delay) { idleCheckFired() }
            } else if idle {
                queueIfDue(&w, floor: CompactionWatch.idleFloor)
            }
        }
    }

    /// Queues a compaction of the whole store if it is due with `floor` dead bytes and none is
    /// queued. Under the writer mutex (which `close()` takes before it waits for queued work: a
    /// job queued here is either waited for or finds the store closed).
    func queueIfDue(_ w: inout StoreWriter, floor: Int64) {
        guard !w.compactionWatch.compactionQueued, compactor.smallStoreIsDue(floor: floor) else { return }
        w.compactionWatch.compactionQueued = true
        queue.async(group: work) { run() }
    }

    /// Under the writer mutex: nil if the store is closed, failed or no longer due; else the active
    /// segment, sealed if it held records (nil inside if not, or if the next segment could not be
    /// made: the writer then goes on in this one, and the rest is compacted).
    private func sealIfDue(_ w: inout StoreWriter) -> (sealed: SegmentFile, length: Int64)?? {
        guard !w.closed, w.failure == nil, compactor.smallStoreIsDue(floor: CompactionWatch.idleFloor) else { return nil }
        let activeID = w.active.id
        guard compactor.state.read({ $0.stats[activeID]?.records ?? 0 }) > 0 else { return .some(nil) }
        do throws(CaskError) { return .some(try w.rotate(state: compactor.state)) } catch { return .some(nil) }
    }

    /// Seals the active segment (if it holds records) and compacts every segment with dead
    /// records, as `compact()` does, if the store is still due. A failure leaves the store as it
    /// was (see ``Compactor``); the next check tries again.
    private func run() {
        defer { compactor.writer.withLock { $0.compactionWatch.compactionQueued = false } }
        gate.withLock { _ in
            guard let sealed = compactor.writer.withLock({ (w: inout StoreWriter) in sealIfDue(&w) }) else { return }
            _ = try? compactor.run(.wholeStore)
            // The sealed segment was an input unless it was all live; a retired one gets no hint.
            if let sealed, compactor.options.writeHints {
                CaskStore.writeHint(
                    for: sealed.sealed, length: sealed.length, directory: compactor.directory, encryption: compactor.encryption,
                    fileSystem: compactor.fileSystem, writer: compactor.writer, groupCommit: groupCommit)
            }
        }
    }
}
