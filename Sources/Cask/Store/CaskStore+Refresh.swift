import Synchronization

extension CaskStore {
    /// What a ``refresh()`` did.
    public struct RefreshResult: Sendable, Equatable {
        /// Puts and deletes applied to the index (batch members counted one by one); after a reload,
        /// the keys whose entry changed.
        public var recordsApplied = 0
        /// Segments the writer created since the last refresh (or the open).
        public var segmentsAdded = 0
        /// Set when a compaction ran since the last refresh: the directory was then recovered afresh
        /// (as an open does) rather than read on from where the handle was; says why.
        public var reloadReason: String?
        /// Damage found in what was read (a record the writer is writing is not damage: it is read
        /// by the next refresh).
        public var damage: [DamagedRange] = []

        public init() {}
    }

    /// Brings a read-only store up to date with the process writing it: afterwards it sees every
    /// commit the writer had made when the call began (and perhaps later ones), never part of a
    /// batch. On a writable store, whose view is always current, it does nothing.
    ///
    /// Cheap: it reads only the records appended since the last refresh (or the open) and the
    /// segments created since; O(new records). After a compaction (its outputs hold copies of
    /// older records, its inputs are gone) it recovers the directory afresh, as an open does
    /// (O(keys) from hint files), and moves the index to that state key by key. Readers go on
    /// meanwhile and see the state before or after the refresh, a batch whole. `changes(…)`
    /// streams of this handle get the puts and deletes a refresh reads, in commit order (a reload
    /// gives them none: it does not know what changed). One refresh runs at a time; a second
    /// call waits.
    /// Throws ``CaskError/closed(path:)`` and I/O errors (the handle stays as it was).
    @discardableResult
    public func refresh() throws(CaskError) -> RefreshResult {
        if isClosed.load(ordering: .relaxed) { throw CaskError.closed(path: directory) }
        guard writer == nil else { return RefreshResult() }
        return try refreshEnds.withLock { (ends) throws(CaskError) -> RefreshResult in
            let (known, maxSeq) = try state.read { (shared) throws(CaskError) -> ([UInt64: SegmentFile], UInt64) in
                if shared.closed { throw CaskError.closed(path: directory) }
                var files: [UInt64: SegmentFile] = [:]
                for segment in shared.stats.segments {
                    if let file = shared.segments[UInt32(segment.id)] { files[segment.id] = file }
                }
                return (files, shared.stats.segments.compactMap(\.maxSeq).max() ?? 0)
            }
            let refresh = StoreRefresh(directory: directory, fileSystem: fileSystem, mapReads: options.memoryMapping, dictionaries: dictionaries)
            switch try refresh.plan(known: known, ends: ends, maxSeq: maxSeq) {
            case .plan(let plan):
                let result = try apply(plan)
                ends.merge(plan.ends) { $1 }
                return result
            case .reload(let reason):
                let fresh = try StoreRecovery(
                    directory: directory, fileSystem: fileSystem, writable: false, maxSegmentSize: options.maxSegmentSize,
                    mapReads: options.memoryMapping, dictionaries: dictionaries, encryption: encryption
                ).run()
                var result = try reload(from: fresh)
                result.reloadReason = reason
                ends = fresh.contentEnds
                return result
            }
        }
    }

    /// Applies a refresh plan under one hold of the exclusive lock (lock-free gets see it whole:
    /// `batchVersion`), then tells observers.
    private func apply(_ plan: StoreRefresh.Plan) throws(CaskError) -> RefreshResult {
        var result = RefreshResult()
        result.segmentsAdded = plan.newSegments.count
        result.damage = plan.damage
        try state.write { (shared) throws(CaskError) in
            if shared.closed { throw CaskError.closed(path: directory) }
            shared.batchVersion.add(1, ordering: .sequentiallyConsistent)
            atomicMemoryFence(ordering: .releasing)
            defer { shared.batchVersion.add(1, ordering: .releasing) }
            shared.segments.add(plan.newSegments.map { (UInt32($0.file.id), $0.file) })
            for segment in plan.newSegments { shared.stats.append(segment.stats) }
            for record in plan.records {
                let segmentID = UInt64(record.location.segmentID)
                shared.stats.update(segmentID) { $0.noteRecord(seq: record.seq, valueLength: record.valueLength) }
                guard record.type != .batch else { continue }
                result.recordsApplied += 1
                let isPut = record.type == .put
                record.key.withUnsafeBytes { key in
                    if let old = isPut ? shared.index.upsert(key, record.location) : shared.index.remove(key) {
                        shared.stats.update(UInt64(old.segmentID)) { $0.removeLive(bytes: old.length) }
                    }
                    if isPut {
                        shared.stats.update(segmentID) {
                            $0.liveBytes += Int64(record.location.length)
                            $0.liveRecords += 1
                        }
                    }
                    shared.expiries.set(key, expiresAt: isPut ? record.expiresAt : nil, seq: record.seq)
                    if isPut && record.expiresAt != nil { shared.noteExpiries() }
                }
            }
            for (id, end) in plan.ends {
                shared.stats.update(id) { $0.fileBytes = end }
                guard let file = shared.segments[UInt32(id)] else { continue }
                if end > file.writtenLength.load(ordering: .relaxed) { file.writtenLength.store(end, ordering: .releasing) }
                shared.segments.noteWritten(UInt32(id), length: end)
            }
        }
        if observers.isActive {
            for record in plan.records where record.type != .batch {
                observers.publish(Change(kind: record.type == .put ? .put : .delete, key: record.key, seq: record.seq))
            }
        }
        return result
    }

    /// Moves the index, segments and accounting to `fresh` (a recovery of the whole directory),
    /// key by key, under one hold of the exclusive lock. Keeps the files the handle holds (the
    /// same bytes) and takes the new ones; O(keys).
    private func reload(from fresh: StoreRecovery.Result) throws(CaskError) -> RefreshResult {
        var result = RefreshResult()
        // A torn end (the writer's write in progress) is not damage: the next refresh reads it.
        result.damage = fresh.report.damagedRanges.filter { $0.kind != .tornTail }
        try state.write { (shared) throws(CaskError) in
            if shared.closed { throw CaskError.closed(path: directory) }
            shared.batchVersion.add(1, ordering: .sequentiallyConsistent)
            atomicMemoryFence(ordering: .releasing)
            defer { shared.batchVersion.add(1, ordering: .releasing) }
            var added: [(id: UInt32, file: SegmentFile)] = []
            for (id, file) in fresh.segments where shared.segments[UInt32(id)] == nil { added.append((UInt32(id), file)) }
            shared.segments.add(added)
            result.segmentsAdded = added.count
            var stale: [[UInt8]] = []
            shared.index.forEach { key, _ in if fresh.index.lookup(key) == nil { stale.append(Array(key)) } }
            for key in stale { key.withUnsafeBytes { _ = shared.index.remove($0) } }
            var moved = 0
            fresh.index.forEach { key, location in
                guard shared.index.lookup(key) != location else { return }
                _ = shared.index.upsert(key, location)
                moved += 1
            }
            result.recordsApplied = stale.count + moved
            for segment in shared.stats.segments where fresh.segments[segment.id] == nil {
                shared.segments[UInt32(segment.id)] = nil
            }
            for (id, end) in fresh.contentEnds {
                guard let file = shared.segments[UInt32(id)] else { continue }
                if end > file.writtenLength.load(ordering: .relaxed) { file.writtenLength.store(end, ordering: .releasing) }
                shared.segments.noteWritten(UInt32(id), length: end)
            }
            shared.stats = SegmentAccounting(fresh.stats.values)
            shared.expiries = fresh.expiries
            shared.noteExpiries()
        }
        return result
    }
}
